from pathlib import Path

OUT = Path("/app/top_words.txt")
EXPECTED = [
    "33 the",
    "11 and",
    "11 river",
    "9 it",
    "6 in",
    "4 had",
    "4 mill",
    "4 miller",
    "4 of",
    "4 she",
]


def lines():
    assert OUT.is_file(), "/app/top_words.txt was not created"
    return [line.strip() for line in OUT.read_text().splitlines() if line.strip()]


def test_ten_lines_in_count_word_format():
    got = lines()
    assert len(got) == 10, f"expected 10 lines, got {len(got)}"
    for line in got:
        count, word = line.split()
        assert count.isdigit() and word.isalpha() and word.islower(), line


def test_most_frequent_word_first():
    assert lines()[:1] == EXPECTED[:1]


def test_exact_ranking_with_alphabetical_ties():
    assert lines() == EXPECTED
