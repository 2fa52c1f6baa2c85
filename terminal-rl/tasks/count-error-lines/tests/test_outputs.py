from pathlib import Path

ANSWER = Path("/app/answer.txt")
EXPECTED = 35  # lines with the level [ERROR] in the generated log


def test_answer_file_exists():
    assert ANSWER.is_file(), "/app/answer.txt was not created"


def test_answer_is_a_single_number():
    text = ANSWER.read_text()
    assert text.strip().isdigit(), f"expected just a number, got {text!r}"
    assert len(text.strip().splitlines()) == 1


def test_answer_counts_error_level_only():
    # lines that merely mention "error" or "ERROR" in their message are not ERROR-level lines
    assert int(ANSWER.read_text().strip()) == EXPECTED
