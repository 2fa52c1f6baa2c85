import json
from pathlib import Path

OUT = Path("/app/summary.json")
EXPECTED = {"total_events": 136, "invalid_lines": 12, "unique_users": 37, "by_type": {"click": 37, "purchase": 19, "signup": 19, "view": 61}}


def summary():
    assert OUT.is_file(), "/app/summary.json was not created"
    data = json.loads(OUT.read_text())
    assert isinstance(data, dict)
    return data


def test_counts_valid_and_invalid():
    s = summary()
    assert s["total_events"] == EXPECTED["total_events"]
    assert s["invalid_lines"] == EXPECTED["invalid_lines"]


def test_unique_users():
    assert summary()["unique_users"] == EXPECTED["unique_users"]


def test_by_type():
    assert summary()["by_type"] == EXPECTED["by_type"]
