"""IncrementalDetokenizer fed one token at a time must reproduce tokenizer.decode of the whole sequence."""

import random

import pytest

from slime.engine.detokenizer import IncrementalDetokenizer

REPLACEMENT = "\ufffd"


@pytest.fixture(scope="module")
def tok(tiny_model):
    return tiny_model[1]


def _stream(tok, ids, skip, check_prefix=True):
    """Feed ids one by one; return (deltas, flushed tail, detokenizer)."""
    detok = IncrementalDetokenizer(tok, skip_special_tokens=skip)
    final = tok.decode(ids, skip_special_tokens=skip)
    deltas = []
    for token in ids:
        delta = detok.add(token)
        deltas.append(delta)
        assert detok.text == "".join(deltas)
        if check_prefix:
            # what is committed is never taken back: it is always a prefix of the final text
            assert final.startswith(detok.text), (detok.text, final)
    tail = detok.flush()
    return deltas, tail, detok


TEXTS = [
    "Hello, world! This is plain ASCII text.\n    def f(x):\n        return x + 1\n",
    "café crème brûlée, naïve résumé",
    "你好，世界！中文文本。",
    "emoji 🎉🚀 and a family 👨‍👩‍👧 in text ✔",
    "mixed: é你🎉 a<tool_call>b</tool_call> <|im_end|> end",
]


@pytest.mark.parametrize("skip", [True, False])
@pytest.mark.parametrize("text", TEXTS)
def test_text_round_trips_token_by_token(tok, text, skip):
    ids = tok.encode(text)
    deltas, tail, detok = _stream(tok, ids, skip)
    assert detok.text == tok.decode(ids, skip_special_tokens=skip)
    assert tail == ""  # complete input: nothing was left dangling
    for delta in deltas:
        assert not delta.endswith(REPLACEMENT)


def test_multibyte_characters_really_are_split_across_tokens(tok):
    # guards the tests above: with this tokenizer é, 你, 好 and 🎉 are each spread over several byte tokens
    for ch in ["é", "你", "好", "🎉"]:
        ids = tok.encode(ch)
        assert len(ids) > 1, ch
        assert tok.decode(ids[:1]).endswith(REPLACEMENT)


def test_partial_characters_are_held_back_until_complete(tok):
    ids = tok.encode("a🎉")
    emoji = tok.encode("🎉")
    assert ids[-len(emoji) :] == emoji
    detok = IncrementalDetokenizer(tok)
    out = [detok.add(t) for t in ids]
    # nothing of the emoji is committed before its last byte token arrives, then all of it at once
    assert out[-1].endswith("🎉")
    assert all("🎉" not in o and REPLACEMENT not in o for o in out[:-1])
    assert "".join(out) == "a🎉"


def test_special_tokens_are_skipped_or_kept(tok):
    ids = tok.encode("hi") + [tok.convert_tokens_to_ids("<|im_end|>")] + tok.encode(" there")
    _, _, skipped = _stream(tok, ids, True)
    _, _, kept = _stream(tok, ids, False)
    assert skipped.text == "hi there"
    assert kept.text == "hi<|im_end|> there"


def test_tag_tokens_survive_skip_special_tokens(tok):
    ids = tok.encode("<tool_call>\n{}\n</tool_call>")
    assert tok.convert_tokens_to_ids("<tool_call>") in ids
    _, _, detok = _stream(tok, ids, True)
    assert detok.text == "<tool_call>\n{}\n</tool_call>"


@pytest.mark.parametrize("skip", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_random_token_sequences(tok, seed, skip):
    rng = random.Random(seed)
    ids = [rng.randrange(len(tok)) for _ in range(200)]
    _, tail, detok = _stream(tok, ids, skip)
    assert detok.text == tok.decode(ids, skip_special_tokens=skip)
    assert detok.ids == ids


@pytest.mark.parametrize("seed", [10, 11, 12])
def test_random_byte_tokens_with_invalid_utf8(tok, seed):
    # single-byte tokens only (ids of the 256 byte-level symbols): lots of lone lead/continuation bytes
    byte_ids = sorted({tok.encode(ch)[0] for ch in "aé你🎉"} | set(range(3, 259)))
    rng = random.Random(seed)
    ids = [rng.choice(byte_ids) for _ in range(200)]
    _, _, detok = _stream(tok, ids, True)
    assert detok.text == tok.decode(ids, skip_special_tokens=True)


def test_flush_commits_a_dangling_partial_character(tok):
    emoji = tok.encode("🎉")
    ids = tok.encode("ok ") + emoji[:-1]
    detok = IncrementalDetokenizer(tok)
    committed = "".join(detok.add(t) for t in ids)
    assert committed == "ok "
    tail = detok.flush()
    assert tail.endswith(REPLACEMENT)
    assert detok.text == tok.decode(ids) == committed + tail
    # flushing again adds nothing
    assert detok.flush() == ""
    assert detok.text == tok.decode(ids)


def test_flush_on_empty_and_complete_input(tok):
    detok = IncrementalDetokenizer(tok)
    assert detok.flush() == "" and detok.text == ""
    for t in tok.encode("done"):
        detok.add(t)
    assert detok.flush() == "" and detok.text == "done"


def test_adding_after_flush_continues_the_text(tok):
    first, second = tok.encode("ab"), tok.encode(" cd é")
    detok = IncrementalDetokenizer(tok)
    for t in first:
        detok.add(t)
    detok.flush()
    for t in second:
        detok.add(t)
    detok.flush()
    assert detok.text == tok.decode(first + second)
