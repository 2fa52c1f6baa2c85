import subprocess
import sys
import tempfile
from pathlib import Path


def report(csv_text):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d, "in.csv")
        p.write_text(csv_text)
        out = subprocess.run([sys.executable, "/app/report.py", str(p)], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_shipped_example():
    assert report(Path("/app/expenses.csv").read_text()) == ["food: 26.70", "office: 12.75", "travel: 41.00"]


def test_quoted_commas_and_escaped_quotes():
    text = (
        "date,category,description,amount\n"
        '2024-02-01,books,"Dune, ""deluxe"" edition",19.99\n'
        "2024-02-02,books,Notebook,5.01\n"
        '2024-02-03,gifts,"Flowers, card, wrap",30\n'
    )
    assert report(text) == ["books: 25.00", "gifts: 30.00"]


def test_description_with_newline_inside_quotes():
    text = 'date,category,description,amount\n2024-03-01,misc,"two\nlines",7.5\n2024-03-02,misc,x,2.5\n'
    assert report(text) == ["misc: 10.00"]
