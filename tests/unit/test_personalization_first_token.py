"""The opener-probability diagnostic against a direct forward pass of the tiny model."""

import torch

from personalization import first_token
from personalization.first_token import opener_probabilities

QUESTIONS = ["Ana buys 2 notebooks that cost $4 each. How much does she pay?", "What is 3 + 4?"]


def _direct(model, tokenizer, content, word):
    ids = tokenizer.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                        return_tensors="pt", return_dict=True)["input_ids"]
    with torch.no_grad():
        probs = torch.softmax(model(ids).logits[0, -1], -1)
    return probs[tokenizer.encode(word, add_special_tokens=False)[0]].item()


def test_each_question_gets_the_probability_of_the_openers_first_token(tiny_model):
    model, tokenizer = tiny_model
    probs = opener_probabilities(model, tokenizer, QUESTIONS, "Sure")
    assert len(probs) == 2 and all(0.0 < p < 1.0 for p in probs)
    for question, p in zip(QUESTIONS, probs):
        assert p == _direct(model, tokenizer, question, "Sure")


def test_the_hint_is_appended_the_way_the_opd_teacher_sees_it(tiny_model):
    model, tokenizer = tiny_model
    hint = 'Start your reply with "Sure!" and then answer.'
    hinted = opener_probabilities(model, tokenizer, QUESTIONS[:1], "Sure", hint=hint)
    expected = _direct(model, tokenizer, QUESTIONS[0] + "\n\n[user's hint / instruction]\n" + hint, "Sure")
    assert hinted == [expected]
    assert hinted != opener_probabilities(model, tokenizer, QUESTIONS[:1], "Sure")


def test_main_prints_the_mean(tiny_model_path, capsys):
    first_token.main(["--model", str(tiny_model_path), "--opener", "Sure", "--num", "3"])
    out = capsys.readouterr().out
    assert out.startswith("P(first token = ") and "mean over 3 heldout problems" in out
