import json
from pathlib import Path

COUNTS = Path("/app/status_counts.json")
ERRORS = Path("/app/server_errors.txt")
EXPECTED_COUNTS = {"200": 270, "201": 36, "304": 36, "401": 18, "404": 18, "500": 11, "502": 11}


def counts():
    assert COUNTS.is_file(), "/app/status_counts.json was not created"
    return json.loads(COUNTS.read_text())


def test_counts_cover_every_request():
    assert sum(counts().values()) == 400


def test_status_counts_exact():
    assert counts() == EXPECTED_COUNTS


def test_server_error_paths_without_query_string():
    assert ERRORS.is_file(), "/app/server_errors.txt was not created"
    lines = [line.strip() for line in ERRORS.read_text().splitlines() if line.strip()]
    assert lines == ["/api/orders", "/login"]
