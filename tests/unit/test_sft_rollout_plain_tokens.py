"""--sft-plain-tokens: added-token strings in an SFT response are trained as ordinary text pieces (for a model whose
rows of those tokens are untrained), the rest of the response as before, and the text decodes back unchanged."""
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from slime.rollout.sft_rollout import encode_response, plain_ids


@pytest.fixture(scope="module")
def tokenizer():
    vocab = {ch: i for i, ch in enumerate(["<", "/", ">", "t", "o", "l", "_", "c", "a", "x", " ", "{", "}"])}
    vocab.update({"to": 13, "ol": 14, "tool": 15, "ca": 16, "call": 17, "_call": 18})
    merges = [("t", "o"), ("o", "l"), ("to", "ol"), ("c", "a"), ("l", "l"), ("ca", "ll"), ("_", "call")]
    vocab["ll"] = 19
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    backend.pre_tokenizer = pre_tokenizers.Split(" ", behavior="isolated")
    backend.decoder = decoders.Fuse()  # the pieces joined as they are
    tok = PreTrainedTokenizerFast(tokenizer_object=backend)
    tok.add_tokens(["<tool_call>"])  # an added token, as in Qwen2.5's tokenizer (not "special")
    return tok


def test_an_added_token_is_encoded_as_text_pieces_only_when_asked(tokenizer):
    added = tokenizer.convert_tokens_to_ids("<tool_call>")
    text = "x <tool_call> {x}"
    assert added in encode_response(tokenizer, text)
    ids = encode_response(tokenizer, text, ("<tool_call>",))
    assert added not in ids
    assert plain_ids(tokenizer, "<tool_call>") == [0, 15, 18, 2]  # "<", "tool", "_call", ">"
    assert tokenizer.decode(ids) == tokenizer.decode(encode_response(tokenizer, text))


def test_a_slow_tokenizer_is_refused_with_the_reason():
    class Slow:
        pass

    with pytest.raises(ValueError, match="needs a fast"):
        plain_ids(Slow(), "<tool_call>")
