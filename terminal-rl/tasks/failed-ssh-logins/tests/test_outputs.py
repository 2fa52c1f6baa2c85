from pathlib import Path


def lines(path):
    p = Path(path)
    assert p.is_file(), f"{path} was not created"
    return [line.strip() for line in p.read_text().splitlines() if line.strip()]


def test_blocklist_most_failures_first():
    # 203.0.113.50: 6 failures, 198.51.100.9: 4, 10.1.1.4: 2 (not blocked), 192.0.2.77: 2 (not blocked)
    assert lines("/app/blocklist.txt") == ["203.0.113.50", "198.51.100.9"]


def test_successful_logins_do_not_count():
    got = lines("/app/blocklist.txt")
    assert got and "10.1.1.4" not in got and "192.0.2.77" not in got


def test_targeted_users():
    assert lines("/app/targeted_users.txt") == ["admin", "git", "oracle", "postgres", "root", "test", "ubuntu"]
