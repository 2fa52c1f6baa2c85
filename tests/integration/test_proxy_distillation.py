"""OPD and Combine through the proxy: hints from corrective feedback, teacher log-probs of the exact sampled
ids under the hinted prompt, and one merged sample per turn (Combine's three-way dispatch)."""

from __future__ import annotations

import time
from contextlib import contextmanager

import httpx
import pytest

from slime.conversation.launch import ProxyProcess
from slime.conversation.store import ConversationStore
from slime.engine.client import EngineClient
from slime.engine.launch import EngineProcess
from slime.utils.types import Sample


@pytest.fixture(scope="module")
def engine(tiny_model_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    with EngineProcess(tiny_model_path, log_path=log, ready_timeout=120) as server:
        yield server


def _conversation(url: str, session: str, replies: list[str]) -> list[dict]:
    history = [{"role": "user", "content": "Tell me about the sea."}]
    with httpx.Client(timeout=120) as client:
        for reply in replies + [None]:
            answer = client.post(url + "/v1/chat/completions", headers={"X-Session-Id": session},
                                 json={"messages": history, "max_tokens": 8, "temperature": 1.0, "seed": 3}).json()
            if reply is None:
                break
            history += [answer["choices"][0]["message"], {"role": "user", "content": reply}]
    return history


def _settled(store: ConversationStore, session: str, n: int):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        turns = [store.find_turn(session, i) for i in range(1, n + 1)]
        if all(t is not None and t.status in ("sampled", "excluded") for t in turns):
            return turns
        time.sleep(0.2)
    raise AssertionError([(t.turn_num, t.status) if t else None for t in turns])


def _sample(store: ConversationStore, turn_id: int) -> Sample:
    return Sample.from_dict(store.get_sample(turn_id))


@contextmanager
def _demonstrating(engine, tmp_path, session: str, correction: str, *flags: str, method: str = "opd",
                   then: str = "thanks!"):
    """A proxy with one teacher demonstration per hinted turn (plus `flags`), a conversation whose first reply is
    corrected (the hint) and whose second is thanked; yields (proxy, store, hinted turn, thanked turn). The tiny
    model's replies are nonsense, so the answer check is off unless `flags` name it."""
    if "--teacher-demonstration-check" not in flags:
        flags = (*flags, "--teacher-demonstration-check", "none")
    with ProxyProcess(engine.url, tmp_path / f"{session}.db", "--method", method, "--hint-judge", "rules",
                      "--teacher-temperature", "1.0", "--teacher-demonstrations", "1", *flags, judge="rules",
                      log_path=tmp_path / "proxy.log") as proxy:
        _conversation(proxy.url, session, [correction, then])
        store = ConversationStore(proxy.store_path)
        try:
            yield (proxy, store, *_settled(store, session, 2))
        finally:
            store.close()


def _seeded_reply(client: EngineClient, input_ids: list[int], max_new_tokens: int, seed: int) -> list[int]:
    """The ids the engine samples at temperature 1 with `seed`: what the proxy's seeded call produced."""
    return client.generate(input_ids=list(input_ids), sampling_params={
        "temperature": 1.0, "max_new_tokens": max_new_tokens, "seed": seed})["output_ids"]


def _hinted_teacher_prompt(engine, hinted):
    """The teacher's prompt for a hinted turn, rebuilt outside the proxy: its accepted hint, the policy's template."""
    from transformers import AutoTokenizer

    from slime.conversation.teacher import TeacherPromptBuilder

    hint = hinted.judgement["extras"]["hint"]["hint"]
    return TeacherPromptBuilder(AutoTokenizer.from_pretrained(engine.model_path)).build_for_turn(hinted, hint)


def test_combine_dispatch_and_teacher_log_probs(engine, tmp_path):
    with ProxyProcess(engine.url, tmp_path / "c.db", "--method", "combine", "--hint-judge", "rules",
                      "--teacher-temperature", "1.0", "--distill-topk", "3", judge="rules",
                      log_path=tmp_path / "proxy.log") as proxy:
        _conversation(proxy.url, "comb", ["too long, one sentence please", "thanks, perfect",
                                          "what about the mountains?"])
        store = ConversationStore(proxy.store_path)
        try:
            hinted, thanked, neutral = _settled(store, "comb", 3)
            # 1: a correction: the hint trains through the teacher AND the PRM says -1 -> one merged sample
            assert hinted.status == "sampled" and hinted.judgement["score"] == -1.0
            assert hinted.judgement["extras"]["hint"]["accepted"]
            sample = _sample(store, hinted.id)
            assert len(sample.teacher_log_probs) == sample.response_length == len(hinted.response_ids)
            assert len(sample.teacher_topk_indices) == sample.response_length
            assert all(len(row) == 3 for row in sample.teacher_topk_log_probs)
            # the teacher scored exactly the sampled ids under the hinted prompt
            prompt = _hinted_teacher_prompt(engine, hinted)
            with EngineClient(engine.url) as client:
                direct = client.score(prompt.prompt_ids, prompt.response_ids, temperature=1.0)
            assert sample.teacher_log_probs == pytest.approx(direct.logprobs, abs=1e-4)
            assert sample.teacher_log_probs != pytest.approx(sample.rollout_log_probs, abs=1e-3)
            # 2: praise: no hint, +1 -> an RL-only sample without teacher data
            assert thanked.status == "sampled" and thanked.judgement["score"] == 1.0
            assert _sample(store, thanked.id).teacher_log_probs is None
            # 3: a neutral follow-up: neither signal
            assert neutral.status == "excluded" and neutral.exclusion_reason == "no_signal"
        finally:
            store.close()
        stats = httpx.get(proxy.url + "/v1/stats").json()["proxy"]
        assert stats["method"] == "combine" and stats["teacher_stats"]["calls"] >= 1


def test_opd_trains_only_hinted_turns(engine, tmp_path):
    with ProxyProcess(engine.url, tmp_path / "o.db", "--method", "opd", "--hint-judge", "rules",
                      "--teacher-temperature", "0.6", judge="rules", log_path=tmp_path / "proxy.log") as proxy:
        _conversation(proxy.url, "opd", ["don't use bullet points", "thanks!"])
        store = ConversationStore(proxy.store_path)
        try:
            hinted, thanked = _settled(store, "opd", 2)
            assert hinted.status == "sampled" and len(_sample(store, hinted.id).teacher_log_probs) > 0
            assert thanked.status == "excluded" and thanked.exclusion_reason == "no_hint"
        finally:
            store.close()


def test_teacher_demonstrations_train_the_teachers_own_reply_under_the_students_prompt(engine, tmp_path):
    """--teacher-demonstrations 1: a hinted turn also yields a reply the teacher wrote under the hinted prompt,
    stored as a demonstration turn (numbered -1) with a sample: the student's prompt ids, the teacher's reply
    ids, the policy's log-probs of them as rollout log-probs, the teacher's under the hint, reward 0."""
    from slime.conversation.demonstrations import demonstration_seed

    with _demonstrating(engine, tmp_path, "demo", "too long, one sentence please", method="combine",
                        then="thanks, perfect") as (proxy, store, hinted, thanked):
        # the main line keeps its numbers 1, 2
        assert hinted.judgement["extras"]["demonstrations"] == 1
        assert thanked.judgement["extras"]["demonstrations"] == 0  # no hint, no demonstration
        demo = store.find_turn("demo", -1)
        assert demo is not None and demo.turn_type == "demonstration" and demo.status == "sampled"
        assert store.find_turn("demo", -2) is None
        assert demo.judgement["extras"]["demonstration_of"] == hinted.id
        sample = _sample(store, demo.id)
        assert sample.reward == {"score": 0.0} and sample.index == demo.id
        assert sample.tokens == list(hinted.prompt_ids) + list(demo.response_ids)
        assert sample.response_length == len(demo.response_ids) > 0
        # the teacher sampled it under the hinted prompt with the demonstration's seed: the same call again
        # gives the same ids, and both engines' scores are the ones stored
        prompt = _hinted_teacher_prompt(engine, hinted)
        with EngineClient(engine.url) as client:
            assert _seeded_reply(client, prompt.prompt_ids, 8, demonstration_seed(hinted.id, 0)) == demo.response_ids
            teacher = client.score(prompt.prompt_ids, demo.response_ids, temperature=1.0)
            student = client.score(hinted.prompt_ids, demo.response_ids, temperature=1.0)
        assert sample.teacher_log_probs == pytest.approx(teacher.logprobs, abs=1e-4)
        assert sample.rollout_log_probs == pytest.approx(student.logprobs, abs=1e-4)
        # the user never saw it: its number is not one feedback can name, and `judged` counts the real turns
        refused = httpx.post(proxy.url + "/v1/feedback", json={"session_id": "demo", "turn": -1, "rating": 1})
        assert refused.status_code == 400
        stats = httpx.get(proxy.url + "/v1/stats").json()
        assert stats["judged"] == 2 and stats["turns"]["demonstration"] == 1
        assert stats["proxy"]["demonstrations"] == 1
        assert stats["proxy"]["demonstration_stats"]["demonstrations"] == 1


def test_the_answer_check_drops_teacher_replies_that_do_not_answer(engine, tmp_path):
    """--teacher-demonstration-check answers (the default): the tiny model's teacher replies are nonsense, so
    none is kept and each is counted as not answering; the student's own nonsense does not answer either, so its
    teacher term stays (only a teacher worse than the policy loses it)."""
    with _demonstrating(engine, tmp_path, "check", "too long, one sentence please",
                        "--teacher-demonstration-candidates", "2", "--teacher-demonstration-check", "answers",
                        method="combine") as (proxy, store, hinted, _):
        assert hinted.judgement["extras"]["demonstrations"] == 0
        assert hinted.judgement["extras"]["teacher_dropped"] is None
        assert store.find_turn("check", -1) is None
        assert _sample(store, hinted.id).teacher_log_probs is not None
        stats = httpx.get(proxy.url + "/v1/stats").json()["proxy"]
        assert stats["demonstration_stats"]["candidates"] == 2 and stats["demonstration_stats"]["unanswering"] == 2
        assert stats["teacher_stats"]["dropped"] == 0


def test_the_demonstration_kept_is_the_candidate_the_hint_explains_best(engine, tmp_path):
    """--teacher-demonstration-candidates 3: three seeded teacher replies, and the one stored is the one with the
    highest mean log-ratio teacher (hinted prompt) minus student (plain prompt)."""
    from slime.conversation.demonstrations import demonstration_seed, hint_log_ratio

    with _demonstrating(engine, tmp_path, "best", "don't use bullet points",
                        "--teacher-demonstration-candidates", "3") as (proxy, store, hinted, _):
        demo = store.find_turn("best", -1)
        assert demo is not None and store.find_turn("best", -2) is None
        prompt = _hinted_teacher_prompt(engine, hinted)
        ratios = {}
        with EngineClient(engine.url) as client:
            for index in range(3):
                ids = _seeded_reply(client, prompt.prompt_ids, 8, demonstration_seed(hinted.id, index))
                teacher = client.score(prompt.prompt_ids, ids, temperature=1.0).logprobs
                student = client.score(hinted.prompt_ids, ids, temperature=1.0).logprobs
                ratios[tuple(ids)] = hint_log_ratio(teacher, student)
        assert len(ratios) > 1  # the seeds gave different replies, so the choice is a real one
        assert tuple(demo.response_ids) == max(ratios, key=ratios.get)
        stats = httpx.get(proxy.url + "/v1/stats").json()["proxy"]["demonstration_stats"]
        assert stats["candidates"] == 3 and stats["demonstrations"] == 1


def test_a_teacher_opened_demonstration_is_the_teachers_opening_and_the_policys_continuation(engine, tmp_path):
    """--teacher-demonstration-tokens 3: the teacher writes the first 3 tokens under the hinted prompt (its seeded
    generation, cut at 3), and the policy writes the rest of the client's 8-token budget after the student's
    prompt plus that opening; both engines score the whole reply, as for any demonstration."""
    from slime.conversation.demonstrations import demonstration_seed

    with _demonstrating(engine, tmp_path, "open", "too long, one sentence please",
                        "--teacher-demonstration-tokens", "3") as (_, store, hinted, _):
        demo = store.find_turn("open", -1)
        assert demo is not None and len(demo.response_ids) > 3
        prompt = _hinted_teacher_prompt(engine, hinted)
        with EngineClient(engine.url) as client:
            opening = _seeded_reply(client, prompt.prompt_ids, 3, demonstration_seed(hinted.id, 0))
            # the continuation's seed is the first one no candidate opening used (1 candidate: index 1)
            rest = _seeded_reply(client, list(hinted.prompt_ids) + opening, 5, demonstration_seed(hinted.id, 1))
            teacher = client.score(prompt.prompt_ids, demo.response_ids, temperature=1.0)
            student = client.score(hinted.prompt_ids, demo.response_ids, temperature=1.0)
        assert len(opening) == 3 and demo.response_ids == opening + rest
        sample = _sample(store, demo.id)
        assert sample.tokens == list(hinted.prompt_ids) + opening + rest
        assert sample.teacher_log_probs == pytest.approx(teacher.logprobs, abs=1e-4)
        assert sample.rollout_log_probs == pytest.approx(student.logprobs, abs=1e-4)
        assert demo.response_message["content"]  # the reply's text, decoded from its ids
