"""Methods are plugins: the registry (built-ins, aliases, `module:factory`), each built-in's rule for which turns
train, the evaluator that gathers a method's signals, and the trainer settings a method brings with it."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from types import SimpleNamespace

import pytest

from slime.conversation.judges.base import Judgement, TurnForJudge, Vote
from slime.conversation.judges.hints import HintResult
from openclaw_combine_method import Combine
from openclaw_opd_method import OnPolicyDistillation
from openclaw_rl_method import BinaryRL
from slime.conversation.methods import (BUILT_IN_METHODS, Decision, Method, TurnEvaluator, TurnSignals,
                                        canonical_method_name, load_method)
from slime.conversation.teacher import TeacherScores
from slime.utils.arguments import ArgumentError, parse_args

TEACHER = TeacherScores(log_probs=[-0.5, -0.5], topk_log_probs=None, topk_indices=None, prompt_len=3)


def _verdict(score, failed=False):
    return Judgement(score=float(score), votes=[Vote(score=score, rationale="r", source="rules")], judge="rules",
                     failed=failed)


def _hint(accepted=True, failed=False):
    return HintResult(accepted=accepted, hint="be brief" if accepted else "", votes=[], judge="rules", failed=failed)


def _turn(**overrides):
    base = dict(id=1, session_id="s", turn_num=1, prompt_ids=[1], response_ids=[5, 6], response_logprobs=[-1.0, -1.0],
                next_state=[{"role": "user", "content": "too long"}], judgement=None,
                response_message={"role": "assistant", "content": "hi"}, request={"messages": []})
    base.update(overrides)
    return SimpleNamespace(**base)


# ------------------------------------------------------------------------------------------------ registry

def test_registry_names_and_aliases():
    assert set(BUILT_IN_METHODS) == {"rl", "opd", "opd_topk", "combine", "combine_topk"}
    assert canonical_method_name("binary_rl") == canonical_method_name("Binary-RL") == "rl"
    assert canonical_method_name("combine-topk") == "combine_topk"
    assert canonical_method_name("my_folder_method:build") == "my_folder_method:build"
    with pytest.raises(ValueError, match="unknown conversation method 'ppo'.*rl, opd"):
        canonical_method_name("ppo")
    assert isinstance(load_method("combine"), Combine)
    with pytest.raises(ValueError, match="takes no options"):
        load_method("rl", margin=1)


def test_plugin_methods_load_from_a_folder_and_bad_ones_are_explained(tmp_path, monkeypatch):
    (tmp_path / "folder_method.py").write_text(textwrap.dedent("""
        from openclaw_rl_method import BinaryRL
        from slime.conversation.methods import Decision

        class Strict(BinaryRL):
            name = "strict"
            def __init__(self, floor=1.0):
                self.floor = floor
            def decide(self, turn, signals):
                d = super().decide(turn, signals)
                return d if d.reward >= self.floor else Decision(False, reason="below_floor")

        def build(floor=1.0):
            return Strict(floor)

        def broken():
            return object()
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    method = load_method("folder_method:build", floor=0.5)
    assert method.name == "strict" and method.floor == 0.5
    assert method.decide(_turn(), TurnSignals(reward=_verdict(-1))).reason == "below_floor"
    with pytest.raises(ValueError, match="lacks a non-empty 'name' string"):
        load_method("folder_method:broken")
    with pytest.raises(ValueError, match="bad options"):
        load_method("folder_method:build", nope=1)
    with pytest.raises(ValueError, match="cannot import module 'no_such_module'.*--extra-python-path"):
        load_method("no_such_module:build")
    with pytest.raises(ValueError, match="has no callable 'missing'"):
        load_method("folder_method:missing")
    sys.modules.pop("folder_method", None)


# ------------------------------------------------------------------------------------- the built-in rules

@pytest.mark.parametrize("signals, trainable, reward, reason", [
    (TurnSignals(reward=_verdict(1)), True, 1.0, None),
    (TurnSignals(reward=_verdict(-1)), True, -1.0, None),
    (TurnSignals(reward=_verdict(0)), False, 0.0, "neutral"),
    (TurnSignals(reward=_verdict(0, failed=True)), False, 0.0, "judge_failed"),
    (TurnSignals(), False, 0.0, "not_judged"),
])
def test_binary_rl_trains_the_plus_and_minus_ones(signals, trainable, reward, reason):
    decision = BinaryRL().decide(_turn(), signals)
    assert (decision.trainable, decision.reward, decision.reason) == (trainable, reward, reason)


@pytest.mark.parametrize("signals, opd, combine", [
    (TurnSignals(hint=_hint(), teacher=TEACHER), (True, None), (True, None)),
    (TurnSignals(reward=_verdict(-1), hint=_hint(), teacher=TEACHER), (True, None), (True, None)),
    (TurnSignals(reward=_verdict(1), hint=_hint(False)), (False, "no_hint"), (True, None)),
    (TurnSignals(reward=_verdict(0), hint=_hint(False)), (False, "no_hint"), (False, "no_signal")),
    (TurnSignals(hint=_hint(), teacher_error="ConnectError: down"), (False, "teacher_failed"),
     (False, "teacher_failed")),
    (TurnSignals(hint=_hint(False, failed=True)), (False, "judge_failed"), (False, "no_signal")),
])
def test_distillation_rules(signals, opd, combine):
    for method, (trainable, reason) in ((OnPolicyDistillation(), opd), (Combine(), combine)):
        decision = method.decide(_turn(), signals)
        assert (decision.trainable, decision.reason) == (trainable, reason), method.name
        if trainable:
            assert decision.reward == signals.score


# --------------------------------------------------------------------------------------------- evaluator

class FixedJudge:
    name = "fixed"

    def __init__(self, score):
        self.score = score
        self.calls = 0

    async def judge(self, turn: TurnForJudge):
        self.calls += 1
        return _verdict(self.score)

    async def aclose(self):
        pass


class FixedHints:
    name = "fixed-hints"

    def __init__(self, accepted):
        self.accepted = accepted

    async def hint(self, turn):
        return _hint(self.accepted)

    async def aclose(self):
        pass


class FixedTeacher:
    stats: dict = {}

    async def score(self, turn, hint):
        return TEACHER

    async def aclose(self):
        pass


def _view(turn):
    return TurnForJudge(session_id="s", turn_num=1, prompt_messages=[], response_message=turn.response_message,
                        next_state=turn.next_state or [])


def _evaluate(evaluator, turn, verdict=None):
    return asyncio.run(evaluator.evaluate(turn, _view(turn), verdict))


def test_evaluator_runs_what_the_method_uses_and_stores_one_record():
    judge = FixedJudge(-1)
    outcome = _evaluate(TurnEvaluator(Combine(), judge=judge, hint_judge=FixedHints(True), teacher=FixedTeacher()),
                        _turn())
    assert outcome.decision == Decision(True, reward=-1.0) and outcome.teacher is TEACHER
    record = outcome.judgement
    assert record["judge"] == "combine:fixed-hints+fixed" and record["extras"]["hint"]["hint"] == "be brief"
    assert record["extras"]["prm"]["score"] == -1.0 and judge.calls == 1
    # the user's own rating replaces the reward judge's, which is then not asked
    outcome = _evaluate(TurnEvaluator(Combine(), judge=judge, hint_judge=FixedHints(False), teacher=FixedTeacher()),
                        _turn(), verdict=_verdict(1))
    assert outcome.decision.reward == 1.0 and judge.calls == 1
    # Binary RL stores the judge's own record and never reads hints
    outcome = _evaluate(TurnEvaluator(BinaryRL(), judge=FixedJudge(1)), _turn())
    assert outcome.judgement["judge"] == "rules" and outcome.decision.trainable and outcome.teacher is None


def test_turns_that_cannot_train_are_excluded_whatever_the_method_says():
    class TrainEverything(Method):
        name = "everything"

        def decide(self, turn, signals):
            return Decision(True, reward=1.0)

    evaluator = TurnEvaluator(TrainEverything(), judge=FixedJudge(0))
    assert _evaluate(evaluator, _turn(next_state=None)).decision.reason == "no_next_state"
    assert _evaluate(evaluator, _turn(response_ids=[])).decision.reason == "empty_response"
    assert _evaluate(evaluator, _turn()).decision.trainable


def test_a_method_may_train_without_the_teacher_it_has():
    class RewardOnly(Combine):
        name = "reward-only"

        def decide(self, turn, signals):
            return Decision(True, reward=signals.score, use_teacher=False)

    outcome = _evaluate(TurnEvaluator(RewardOnly(), judge=FixedJudge(1), hint_judge=FixedHints(True),
                                      teacher=FixedTeacher()), _turn())
    assert outcome.decision.trainable and outcome.teacher is None


def test_evaluator_refuses_missing_parts():
    with pytest.raises(ValueError, match="uses the reward judge"):
        TurnEvaluator(BinaryRL())
    with pytest.raises(ValueError, match="uses hints"):
        TurnEvaluator(OnPolicyDistillation(), judge=FixedJudge(1))


# ---------------------------------------------------------------------------- the trainer side of a method

BASE = ["--hf-checkpoint", "tiny", "--rollout-batch-size", "2", "--num-rollout", "1",
        "--disable-rollout-global-dataset", "--data-source-path", "slime.conversation.rollout.ConversationDataSource"]


def test_the_method_chooses_its_loss_unless_a_flag_says_otherwise():
    rl = parse_args(BASE)
    assert rl.conversation_method == "rl" and rl.loss_type == "policy_loss" and rl.advantage_estimator == "grpo"
    assert rl.rewards_normalization is False and not rl.conversation_uses_hints
    combine = parse_args([*BASE, "--conversation-method", "combine"])
    assert combine.custom_loss_function_path == "combine_loss.combine_loss_function"
    assert combine.loss_type == "custom_loss" and combine.conversation_uses_hints
    opd = parse_args([*BASE, "--conversation-method", "on_policy_distillation"])
    assert opd.conversation_method == "opd" and opd.advantage_estimator == "on_policy_distillation"
    topk = parse_args([*BASE, "--conversation-method", "opd_topk"])
    assert topk.distill_topk == 50 and topk.compute_advantages_and_returns is False
    assert parse_args([*BASE, "--conversation-method", "opd_topk", "--distill-topk", "5"]).distill_topk == 5
    explicit = parse_args([*BASE, "--conversation-method", "rl", "--advantage-estimator", "reinforce_plus_plus_baseline",
                           "--normalize-advantages"])
    assert explicit.advantage_estimator == "reinforce_plus_plus_baseline"
    # without a conversation the global defaults hold
    plain = parse_args(["--hf-checkpoint", "tiny", "--rollout-batch-size", "2", "--num-rollout", "1",
                        "--disable-rollout-global-dataset"])
    assert plain.conversation_method is None and plain.loss_type == "policy_loss" and plain.rewards_normalization


def test_a_plugin_method_loads_from_extra_python_path(tmp_path):
    (tmp_path / "trainer_side_method.py").write_text(textwrap.dedent("""
        from openclaw_combine_method import Combine

        class Gentle(Combine):
            name = "gentle"
            training = {**Combine.training, "eps_clip": 0.1}

        def build():
            return Gentle()
    """))
    args = parse_args([*BASE, "--extra-python-path", str(tmp_path), "--conversation-method", "trainer_side_method:build"])
    assert args.conversation_uses_hints and args.loss_type == "custom_loss"
    with pytest.raises(ArgumentError, match="--conversation-method: unknown conversation method 'bogus'"):
        parse_args([*BASE, "--conversation-method", "bogus"])
    with pytest.raises(ArgumentError, match="needs a method that uses hints"):
        parse_args([*BASE, "--teacher-demonstrations", "1"])
    sys.modules.pop("trainer_side_method", None)
