from pathlib import Path

OUT = Path("/app/emails.txt")
EXPECTED = [
    "ana.lima@example.com",
    "bo.chen@example.com",
    "bochen+home@mail.example.org",
    "carla_diaz@sub.example.net",
    "eve.oneil@example.co.uk",
    "farid99@example.io",
    "finance-team@example.com",
]


def lines():
    assert OUT.is_file(), "/app/emails.txt was not created"
    return [line.strip() for line in OUT.read_text().splitlines() if line.strip()]


def test_all_addresses_lowercase():
    got = lines()
    assert got and all(line == line.lower() for line in got)


def test_no_duplicates_and_sorted():
    got = lines()
    assert got and got == sorted(set(got))


def test_exact_addresses():
    # "front-desk@" is not an address; the trailing "." after finance-team@example.com is not part of it
    assert lines() == EXPECTED
