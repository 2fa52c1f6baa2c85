"""The trainer's side of live conversations: batches of judged samples from the store, surplus kept,
unfinished batches released on restart, trained ones marked; the rollout function's output."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from slime.conversation.rollout import ConversationDataSource, generate_rollout
from slime.conversation.samples import sample_from_turn
from slime.conversation.store import ConversationStore
from slime.rollout import RolloutInterrupted


def _args(tmp_path, **overrides):
    base = dict(run_dir=str(tmp_path), conversation_store=str(tmp_path / "conv.db"), proxy_url="http://127.0.0.1:9",
                save=None, load=None, rollout_batch_size=2, stop_flag=None)
    base.update(overrides)
    return SimpleNamespace(**base)


def _judged_turn(store: ConversationStore, session: str, reward: float) -> int:
    turn = store.add_turn(session_id=session, turn_type="main", turn_reason="header", request={"messages": []},
                          response_message={"role": "assistant", "content": "hi"}, prompt_ids=[1, 2],
                          response_ids=[3, 4], response_logprobs=[-0.5, -0.25], weight_version="3",
                          finish_reason="stop", trace_id=None, fingerprints=[], status="awaiting_next_state")
    store.set_next_state(turn.id, [{"role": "user", "content": "thanks"}], "request")
    store.set_judgement(turn.id, {"score": reward, "votes": [], "judge": "rules", "failed": False})
    turn = store.get_turn(turn.id)
    store.add_sample(turn.id, sample_from_turn(turn, reward).to_dict(), reward)
    return turn.id


def test_batches_surplus_restart_and_trained(tmp_path):
    store = ConversationStore(tmp_path / "conv.db")
    ids = [_judged_turn(store, f"s{i}", 1.0 if i % 2 else -1.0) for i in range(5)]
    source = ConversationDataSource(_args(tmp_path))
    assert source.live_traffic
    out = generate_rollout(source.args, 0, source)
    samples = [group[0] for group in out.samples]
    assert [s.index for s in samples] == ids[:2]  # the oldest first, one sample per group
    assert samples[0].tokens == [1, 2, 3, 4] and samples[0].rollout_log_probs == [-0.5, -0.25]
    assert out.metrics["rollout/prm_eval_score"] == 0.0 and out.metrics["rollout/pending_samples"] == 3
    source.mark_trained(0)
    groups = source.get_samples(2)  # batch 1: the surplus of before, not lost
    assert [g[0].index for g in groups] == ids[2:4]
    source.add_samples(groups[1:])  # given back: pending again, first in line
    assert store.count_pending_samples() == 2
    source.close()
    # a crash after claiming batch 1 but before training it: the restart makes it pending again
    restarted = ConversationDataSource(_args(tmp_path))
    assert store.count_pending_samples() == 3
    assert store.stats()["samples"]["trained"] == 2
    assert [g[0].index for g in restarted.get_samples(3)] == ids[2:5]
    restarted.close()
    store.close()


def test_waiting_for_samples_stops_on_request(tmp_path):
    stop = SimpleNamespace(requested=True)
    source = ConversationDataSource(_args(tmp_path, stop_flag=stop))
    with pytest.raises(RolloutInterrupted):
        source.claim(0, 4)
    source.close()
