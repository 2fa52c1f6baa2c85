"""Traces (POST /v1/traces): parsing, ids rendered as the engine would, idempotent storage, and the counts."""

from __future__ import annotations

import pytest

from slime.conversation.store import ConversationStore
from slime.conversation.traces import parse_polarity, parse_trace, parse_traces, trace_token_ids
from slime.engine.protocol import APIError


def test_a_trace_from_a_prompt_or_from_a_conversation_that_ends_with_the_reply():
    t = parse_trace({"prompt": "hi", "response": "hello", "task": "greet", "profile": {"u": 1}})
    assert t.messages == [{"role": "user", "content": "hi"}]
    assert t.response == {"role": "assistant", "content": "hello"}
    assert t.session_id == f"trace:{t.trace_id}" and len(t.trace_id) == 32
    convo = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    t2 = parse_trace({"trace_id": "x", "session_id": "app-1", "messages": convo})
    assert t2.messages == convo[:1] and t2.response["content"] == "hello" and t2.session_id == "app-1"
    assert t2.request == {"messages": convo[:1]} and t2.meta()["reward"] is None


@pytest.mark.parametrize("raw, param", [
    ({"prompt": "a", "messages": [{"role": "user", "content": "a"}], "response": "b"}, "trace.prompt"),
    ({"prompt": "a", "response": {"role": "user", "content": "b"}}, "trace.response.role"),
    ({"prompt": "a", "response": "b", "reward": float("nan")}, "trace.reward"),
    ({"prompt": "a", "response": "b", "trace_id": ""}, "trace.trace_id"),
    ({"prompt": "a", "response": "b", "trace_id": "x" * 300}, "trace.trace_id"),
    ({"prompt": "a", "response": "b", "profile": ["x"]}, "trace.profile"),
    ({"prompt": "a", "response": "b", "profile": {"k": "x" * 20000}}, "trace.profile"),
    ({"prompt": "a", "response": "b", "tools": [{"type": "function"}]}, "trace.tools"),
    ({"prompt": "a", "response": "b", "next_messages": [{"role": "user"}]}, "trace.next_messages[0].content"),
    ({"messages": [{"role": "assistant", "content": "only the reply"}]}, "trace.messages"),
])
def test_bad_fields_are_named(raw, param):
    with pytest.raises(APIError) as err:
        parse_trace(raw)
    assert err.value.status == 400 and err.value.param == param, err.value.message


def test_a_batch_names_the_failing_trace_and_refuses_repeated_ids():
    with pytest.raises(APIError, match=r"traces\[1\]\.response"):
        parse_traces({"traces": [{"prompt": "a", "response": "b"}, {"prompt": "a"}]})
    with pytest.raises(APIError, match="a batch holds only 'traces'"):
        parse_traces({"traces": [{"prompt": "a", "response": "b"}], "extra": 1})
    traces, is_batch = parse_traces({"traces": [{"prompt": "a", "response": "b"}] * 3})
    assert is_batch and len({t.trace_id for t in traces}) == 3


def test_polarity_words_and_numbers():
    assert [parse_polarity(v) for v in ("positive", "Negative", " neutral ", 1, -1, 0, None)] == [1, -1, 0, 1, -1, 0, None]
    for bad in (True, 2, "meh"):
        with pytest.raises(APIError):
            parse_polarity(bad)


def test_trace_ids_are_the_engines_rendering_and_end_on_the_end_of_turn_token(tiny_model):
    _, tok = tiny_model
    t = parse_trace({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
                     "response": "Hello!"})
    prompt_ids, response_ids = trace_token_ids(tok, t)
    whole = tok.apply_chat_template(t.messages + [t.response], tokenize=False)
    assert tok.decode(prompt_ids + response_ids) == whole.rstrip("\n")
    assert response_ids[-1] == tok.eos_token_id and tok.decode(response_ids) == "Hello!<|im_end|>"
    assert prompt_ids == tok.encode(tok.apply_chat_template(t.messages, add_generation_prompt=True, tokenize=False),
                                    add_special_tokens=False)


def _item(trace_id: str, status: str = "awaiting_next_state", next_state=None) -> dict:
    return {"trace_id": trace_id, "meta": {"task": "t", "model": "m"}, "session_id": f"trace:{trace_id}",
            "request": {"messages": [{"role": "user", "content": "q"}]},
            "response_message": {"role": "assistant", "content": "a"}, "prompt_ids": [1, 2, 3],
            "response_ids": [4, 5], "fingerprints": ["f"], "status": status, "next_state": next_state}


def test_the_store_keeps_each_trace_id_once_and_counts_traces(tmp_path):
    with ConversationStore(tmp_path / "c.db") as store:
        rows = store.add_traces([_item("a"), _item("b", "judging", [{"role": "user", "content": "thanks"}]),
                                 _item("a")])
        assert [created for _, created in rows] == [True, True, False]
        assert rows[2][0].id == rows[0][0].id
        assert store.add_trace(**_item("b"))[1] is False
        b = store.trace_turn("b")
        assert b.next_state == [{"role": "user", "content": "thanks"}] and b.next_state_source == "trace"
        assert b.response_logprobs == [] and b.turn_reason == "trace" and b.weight_version is None
        assert set(store.trace_turns(["a", "b", "zzz"])) == {"a", "b"}
        store.set_judgement(b.id, {"score": 1.0, "votes": [], "judge": "trace"})
        store.add_sample(b.id, {"x": 1}, 1.0)
        counts = store.trace_stats()
        assert counts == {"total": 2, "pending": 1, "awaiting_feedback": 1, "judging": 0, "positive": 1,
                          "negative": 0, "neutral": 0, "excluded": 0, "trained": 0}
        assert store.stats()["traces"] == counts
        assert store.stats()["turns"]["main"] == 2
