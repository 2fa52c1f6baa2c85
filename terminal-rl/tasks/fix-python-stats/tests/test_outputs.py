import subprocess
import sys
import tempfile
from pathlib import Path


def run_stats(text):
    with tempfile.TemporaryDirectory() as d:
        data = Path(d, "nums.txt")
        data.write_text(text)
        out = subprocess.run([sys.executable, "/app/stats.py", str(data)], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_even_count_median_and_mean():
    assert run_stats("4\n8\n15\n16\n23\n42\n") == ["count=6", "mean=18.00", "median=15.50"]


def test_odd_count():
    assert run_stats("7\n1\n3\n") == ["count=3", "mean=3.67", "median=3.00"]


def test_decimals_and_blank_lines():
    assert run_stats("2.5\n\n0.5\n10\n\n1.25\n") == ["count=4", "mean=3.56", "median=1.88"]


def test_single_value():
    assert run_stats("-3\n") == ["count=1", "mean=-3.00", "median=-3.00"]
