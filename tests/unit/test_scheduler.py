"""The scheduler in-process (no HTTP): joins and leaves, failures, swaps, prefix reuse."""

from __future__ import annotations

import threading

import pytest
import torch

from slime.engine.sampling import SamplingConfig
from slime.engine.scheduler import QueueFullError, Scheduler, SchedulerConfig, Sequence


def _run(scheduler: Scheduler, sequences: list[Sequence], timeout: float = 60.0):
    done = threading.Event()
    remaining = {id(s) for s in sequences}

    def on_update(seq, finished):
        if finished:
            remaining.discard(id(seq))
            if not remaining:
                done.set()

    for seq in sequences:
        seq.on_update = on_update
    scheduler.submit(sequences)
    assert done.wait(timeout), "sequences did not finish"


@pytest.fixture()
def scheduler(tiny_model):
    model, tokenizer = tiny_model
    sched = Scheduler(model, tokenizer, SchedulerConfig(max_running=4, max_waiting=8, prefill_chunk_tokens=8,
                                                         eos_token_ids=frozenset({tokenizer.eos_token_id})))
    sched.start()
    yield sched
    sched.stop()


def _greedy(n: int, **kw) -> SamplingConfig:
    return SamplingConfig(temperature=0.0, max_new_tokens=n, ignore_eos=True, **kw)


def _reference_greedy(model, prompt: list[int], n: int) -> list[int]:
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt):]


def test_more_sequences_than_slots_all_match_unbatched_greedy(scheduler, tiny_model):
    model, _ = tiny_model
    prompts = [list(range(10 + i, 10 + i + 3 + 4 * i)) for i in range(7)]  # 7 > max_running=4, varied lengths
    seqs = [Sequence(prompt_ids=p, sampling=_greedy(6 + i)) for i, p in enumerate(prompts)]
    _run(scheduler, seqs)
    for seq, prompt in zip(seqs, prompts):
        assert seq.finish_reason["type"] == "length"
        assert seq.output_ids == _reference_greedy(model, prompt, len(seq.output_ids))


def test_failure_while_sampling_first_token_finishes_the_sequence_and_engine_keeps_serving(scheduler, monkeypatch):
    original = scheduler._sample
    calls = {"n": 0}

    def flaky(logits, seqs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return original(logits, seqs)

    monkeypatch.setattr(scheduler, "_sample", flaky)
    broken = Sequence(prompt_ids=[5, 6, 7], sampling=_greedy(3))
    _run(scheduler, [broken])
    assert broken.finish_reason["type"] == "abort" and "boom" in broken.error
    healthy = Sequence(prompt_ids=[5, 6, 7], sampling=_greedy(3))
    _run(scheduler, [healthy])
    assert healthy.error is None and len(healthy.output_ids) == 3


def test_queue_full_rejects_whole_submission(tiny_model):
    model, tokenizer = tiny_model
    sched = Scheduler(model, tokenizer, SchedulerConfig(max_running=1, max_waiting=2))  # not started: nothing drains
    sched.submit([Sequence(prompt_ids=[1], sampling=_greedy(1))])
    with pytest.raises(QueueFullError):
        sched.submit([Sequence(prompt_ids=[1], sampling=_greedy(1)) for _ in range(2)])
    assert sched.load()["waiting"] == 1


def test_swap_waits_for_running_sequences_and_tags_versions(scheduler, tiny_model):
    model, _ = tiny_model
    long = Sequence(prompt_ids=[3, 4, 5], sampling=_greedy(40))
    finished = threading.Event()
    long.on_update = lambda s, f: f and finished.set()
    scheduler.submit([long])
    while not long.output_ids:
        threading.Event().wait(0.01)
    future = scheduler.request_swap(model, "v2")
    late = Sequence(prompt_ids=[3, 4, 5], sampling=_greedy(2))
    _run(scheduler, [late])
    assert finished.is_set() and future.result(timeout=5) == "v2"
    assert long.weight_version == "0" and len(long.output_ids) == 40
    assert late.weight_version == "v2"


def test_prefix_cache_reuse_gives_identical_output(scheduler):
    prompt = list(range(20, 60))
    first = Sequence(prompt_ids=prompt, sampling=_greedy(5))
    _run(scheduler, [first])
    second = Sequence(prompt_ids=prompt + first.output_ids[:3], sampling=_greedy(5))
    _run(scheduler, [second])
    assert second.cached_tokens >= len(prompt)
    reference = Sequence(prompt_ids=prompt + first.output_ids[:3], sampling=_greedy(5))
    scheduler.flush_cache()
    _run(scheduler, [reference])
    assert reference.cached_tokens == 0
    assert second.output_ids == reference.output_ids
    assert second.output_logprobs == pytest.approx(reference.output_logprobs, abs=1e-4)
