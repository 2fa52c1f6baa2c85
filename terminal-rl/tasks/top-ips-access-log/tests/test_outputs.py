from pathlib import Path

OUT = Path("/app/top_ips.txt")
EXPECTED = [
    ("192.168.1.20", 107),
    ("198.51.100.23", 84),
    ("10.0.0.5", 71),
    ("10.0.0.9", 53),
    ("10.0.0.17", 37),
]


def rows():
    assert OUT.is_file(), "/app/top_ips.txt was not created"
    out = []
    for line in OUT.read_text().splitlines():
        if line.strip():
            ip, count = line.split()
            out.append((ip, int(count)))
    return out


def test_five_lines_ip_then_count():
    got = rows()
    assert len(got) == 5
    for ip, _ in got:
        assert ip.count(".") == 3


def test_busiest_client_first():
    assert rows()[0] == EXPECTED[0]


def test_exact_top_five():
    assert rows() == EXPECTED
