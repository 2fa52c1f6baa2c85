"""Rewards and advantages for multi-turn agent rollouts (slime.agentic.rewards, slime.training.trajectory_advantages):
hand-computed values and edge cases."""

import math

import pytest
from slime.agentic.rewards import (
    boxed_answer,
    boxed_contents,
    compose_step_target,
    mean_vote,
    parse_boxed_vote,
    retool_reward,
    trajectory_score,
)
from slime.training.trajectory_advantages import (
    StepwiseSample,
    drop_constant_groups,
    infer_span,
    outcome_advantages,
    step_wise_advantages,
    stepwise_sample_from_metadata,
)

EPS = 1e-6


def approx(values, abs=1e-12):
    return pytest.approx(values, abs=abs)


def no_nan(rows):
    flat = [v for row in rows for v in (row if isinstance(row, list) else [row])]
    return all(math.isfinite(v) for v in flat)


# ------------------------------------------------------------------------------------- outcome_advantages


def test_outcome_normalises_over_trajectories_and_broadcasts_to_steps():
    # Group g: trajectory 0 (reward +1) has 3 step samples, trajectory 1 (reward -1) has 1.
    # Over trajectories: mean 0, unbiased std sqrt(((1-0)^2 + (-1-0)^2) / (2-1)) = sqrt(2),
    # so a = 1 / (sqrt(2) + 1e-6) = 0.70710628... (over the 4 samples the mean would be 0.5: not what we want).
    rewards = [1.0, 1.0, 1.0, -1.0]
    adv, report = outcome_advantages(rewards, ["g"] * 4, [0, 0, 0, 1])
    a = 1 / (math.sqrt(2) + EPS)
    assert adv == approx([a, a, a, -a])
    assert report == {"num_groups": 1, "num_trajectories": 2, "singleton_groups": 0, "constant_groups": 0}


def test_outcome_population_std_and_no_std():
    # Rewards 1, 0, -1 over three one-step trajectories: mean 0.
    # unbiased: var = (1 + 0 + 1) / 2 = 1 -> std 1 -> 1/(1+1e-6), 0, -1/(1+1e-6)
    # population: var = 2/3 -> std sqrt(2/3) = 0.8164965809 -> 1/(0.8164965809+1e-6) = 1.22474337...
    # none: centred only -> 1, 0, -1
    r, g, t = [1.0, 0.0, -1.0], ["g"] * 3, [0, 1, 2]
    unbiased, _ = outcome_advantages(r, g, t)
    assert unbiased == approx([1 / (1 + EPS), 0.0, -1 / (1 + EPS)])
    pop, _ = outcome_advantages(r, g, t, std="population")
    p = 1 / (math.sqrt(2 / 3) + EPS)
    assert pop == approx([p, 0.0, -p])
    assert p == pytest.approx(1.2247433, abs=1e-6)
    centred, _ = outcome_advantages(r, g, t, std="none")
    assert centred == approx([1.0, 0.0, -1.0])
    with pytest.raises(ValueError, match="std"):
        outcome_advantages(r, g, t, std="biased")


def test_outcome_length_normalize_divides_by_trajectory_steps():
    # Same as the first test: a = 1/(sqrt2 + 1e-6); trajectory 0 has 3 steps -> a/3 each; trajectory 1 has 1 -> -a.
    # The trajectory totals are then a and -a: each trajectory weighs the same in a sum over samples.
    adv, _ = outcome_advantages([1.0, 1.0, 1.0, -1.0], ["g"] * 4, [0, 0, 0, 1], length_normalize=True)
    a = 1 / (math.sqrt(2) + EPS)
    assert adv == approx([a / 3, a / 3, a / 3, -a])
    assert sum(adv[:3]) == pytest.approx(-adv[3], abs=1e-12)


def test_outcome_interleaved_groups_and_reused_trajectory_ids():
    # Samples in arrival order, two groups interleaved; traj id 0 exists in both groups (different trajectories).
    # Group A: traj 0 -> 2.0 (2 steps), traj 1 -> 0.0 (1 step): mean 1, unbiased std sqrt(2) -> +-1/(sqrt2+eps)
    # Group B: traj 0 -> 3.0, traj 1 -> 3.0, traj 2 -> 0.0: mean 2, deviations 1, 1, -2,
    #   unbiased var (1+1+4)/2 = 3 -> std sqrt(3) -> 1/(sqrt3+eps), 1/(sqrt3+eps), -2/(sqrt3+eps)
    groups = ["A", "B", "A", "B", "B", "A", "B"]
    trajs = [0, 0, 1, 1, 2, 0, 0]
    rewards = [2.0, 3.0, 0.0, 3.0, 0.0, 2.0, 3.0]
    adv, report = outcome_advantages(rewards, groups, trajs)
    a, b = 1 / (math.sqrt(2) + EPS), 1 / (math.sqrt(3) + EPS)
    assert adv == approx([a, b, -a, b, -2 * b, a, b])
    assert report["num_groups"] == 2 and report["num_trajectories"] == 5


def test_outcome_singleton_and_constant_groups_are_exactly_zero_without_nan():
    # "s": one trajectory of 2 steps -> singleton -> 0. "c": three trajectories all 0.1 -> constant -> 0
    # (0.1*3/3 = 0.10000000000000002 != 0.1: without the constant check this would be float noise / eps).
    groups = ["s", "s", "c", "c", "c"]
    trajs = [0, 0, 0, 1, 2]
    rewards = [0.7, 0.7, 0.1, 0.1, 0.1]
    for eps in (EPS, 0.0):
        for std in ("unbiased", "population", "none"):
            adv, report = outcome_advantages(rewards, groups, trajs, eps=eps, std=std)
            assert adv == [0.0] * 5
            assert report["singleton_groups"] == 1 and report["constant_groups"] == 1


def test_outcome_refuses_disagreeing_steps_and_bad_input():
    with pytest.raises(ValueError, match="different outcome rewards"):
        outcome_advantages([1.0, 0.5], ["g", "g"], [0, 0])
    with pytest.raises(ValueError, match="differ in length"):
        outcome_advantages([1.0], ["g", "g"], [0, 1])
    with pytest.raises(ValueError, match="finite"):
        outcome_advantages([float("nan"), 1.0], ["g", "g"], [0, 1])
    assert outcome_advantages([], [], [])[0] == []


def test_outcome_without_dynamic_history_is_plain_grpo():
    # One sample per trajectory: group {1, 0, 0, 0}: mean 0.25, deviations .75, -.25 x3,
    # unbiased var (.5625 + 3*.0625)/3 = .25 -> std .5 -> 1.5/(1+2e-6) ~ .75/(.5+eps), -.25/(.5+eps)
    adv, _ = outcome_advantages([1.0, 0.0, 0.0, 0.0], [7] * 4, [0, 1, 2, 3])
    assert adv == approx([0.75 / (0.5 + EPS)] + [-0.25 / (0.5 + EPS)] * 3)


# ----------------------------------------------------------------------------------- drop_constant_groups


def test_drop_constant_groups_counts_and_mask():
    # a: [1, 1] constant -> dropped; b: [0, 1] varies -> kept; c: [0.5] alone -> constant -> dropped
    keep, report = drop_constant_groups([1.0, 1.0, 0.0, 1.0, 0.5], ["a", "a", "b", "b", "c"])
    assert keep == [False, False, True, True, False]
    assert report["num_groups"] == 3 and report["constant_groups"] == 2
    assert report["dropped_groups"] == 2 and report["dropped_samples"] == 3 and report["kept_samples"] == 2
    assert report["kept_first_of_all_constant"] is False and report["enabled"] is True
    assert "dropped 2 of 3 groups (3 samples)" in report["message"]


def test_drop_constant_groups_all_constant_keeps_first_and_says_so():
    # Group y appears first in the list, so y is kept even though x sorts before it.
    keep, report = drop_constant_groups([0.0, 1.0, 1.0, 0.0], ["y", "x", "x", "y"])
    assert keep == [True, False, False, True]
    assert report["kept_first_of_all_constant"] is True and report["dropped_groups"] == 1
    assert "first is kept" in report["message"]
    keep, report = drop_constant_groups([0.0, 1.0, 1.0, 0.0], ["y", "x", "x", "y"], keep_one=False)
    assert keep == [False] * 4 and report["dropped_groups"] == 2 and report["kept_first_of_all_constant"] is False


def test_drop_constant_groups_tolerance_and_switch_off():
    # |1 - (1 + 1e-13)| = 1e-13 <= 1e-12: constant; |1 - 1.01| = 0.01: not.
    keep, _ = drop_constant_groups([1.0, 1.0 + 1e-13, 1.0, 1.01], ["a", "a", "b", "b"])
    assert keep == [False, False, True, True]
    keep, report = drop_constant_groups([1.0, 1.0, 2.0, 2.0], ["a", "a", "b", "b"], enabled=False)
    assert keep == [True] * 4
    assert report["enabled"] is False and report["constant_groups"] == 2 and report["dropped_groups"] == 0
    assert "disabled" in report["message"]
    assert drop_constant_groups([], [])[0] == []


# ------------------------------------------------------------------------------------ composition


def test_compose_step_target_honours_coef_and_flags_unjudged():
    # 1.0 + 0.5 * 0.5 = 1.25; -1 + 2 * (-1) = -3; coef 0 -> outcome only (but judged)
    assert compose_step_target(1.0, 0.5, 0.5) == (1.25, True)
    assert compose_step_target(-1.0, -1.0, 2.0) == (-3.0, True)
    assert compose_step_target(-1.0, 1.0, 0.0) == (-1.0, True)
    target = compose_step_target(-1.0, None, 2.0)
    assert target.value == -1.0 and target.judged is False
    with pytest.raises(ValueError, match="prm_step"):
        compose_step_target(1.0, float("nan"), 1.0)
    with pytest.raises(ValueError, match="coef"):
        compose_step_target(1.0, 1.0, float("inf"))


def test_trajectory_score_is_built_from_the_same_composition():
    # all judged: 1 + 0.5 * mean(1, 1, -1) = 1 + 0.5/3 = 1.1666...
    assert trajectory_score(1.0, [1.0, 1.0, -1.0], 0.5) == pytest.approx(1 + 0.5 / 3, abs=1e-12)
    # one unjudged step: mean(1 + 0.5, 1 - 0.5, 1) = mean(1.5, 0.5, 1.0) = 1.0
    assert trajectory_score(1.0, [1.0, -1.0, None], 0.5) == pytest.approx(1.0, abs=1e-12)
    assert trajectory_score(-1.0, [], 3.0) == -1.0
    # the logged score equals the mean of the training targets
    targets = [compose_step_target(0.2, p, 0.3).value for p in (1.0, None, -0.5)]
    assert trajectory_score(0.2, [1.0, None, -0.5], 0.3) == pytest.approx(sum(targets) / 3, abs=1e-12)


# ------------------------------------------------------------------------------------- step_wise


def _retool_group():
    # Three trajectories of task g, one sample each (ReTool layout: model segments with observation tokens
    # masked). S0's first span covers an observation token (position 2, mask 0): it must stay 0.
    s0 = StepwiseSample("g", [1, 1, 0, 1, 1], [1.0, 2.0], [0, 1], [(0, 3), (3, 5)])
    s1 = StepwiseSample("g", [1, 1, 0, 1], [-1.0, 0.0], [0, 1], [(0, 2), (3, 4)])
    s2 = StepwiseSample("g", [1, 1, 1], [0.0], [0], [(0, 3)])
    return [s0, s1, s2]


def test_step_wise_buckets_population_std_and_spans():
    # bucket (g, 0): [1, -1, 0], mean 0, population var (1 + 1 + 0)/3 = 2/3 -> z = +-1/(sqrt(2/3)+eps), 0
    # bucket (g, 1): [2, 0], mean 1, population var (1 + 1)/2 = 1 -> z = +-1/(1+eps)
    #   (unbiased std would give sqrt(2): not what upstream's step_wise does)
    res = step_wise_advantages(_retool_group())
    z0, z1 = 1 / (math.sqrt(2 / 3) + EPS), 1 / (1 + EPS)
    assert res.step_values == [approx([z0, z1]), approx([-z0, -z1]), approx([0.0])]
    assert res.advantages[0] == approx([z0, z0, 0.0, z1, z1])  # position 2: z0 * mask 0
    assert res.advantages[1] == approx([-z0, -z0, 0.0, -z1])  # position 2 is in no span
    assert res.advantages[2] == approx([0.0, 0.0, 0.0])
    assert res.remove == [False, False, False]
    assert res.report["num_buckets"] == 2 and res.report["singleton_buckets"] == 0
    assert res.report["constant_buckets"] == 0 and res.report["inferred_spans"] == 0


def test_step_wise_singleton_bucket_zero_by_default_raw_on_request():
    # Task h: trajectory a reached step 1, trajectory b did not, so bucket (h, 1) = [2.0] is a singleton.
    # bucket (h, 0): [1, -1] -> population std 1 -> +-1/(1+eps)
    samples = [StepwiseSample("h", [1, 1], [1.0, 2.0], [0, 1], [(0, 1), (1, 2)]),
               StepwiseSample("h", [1], [-1.0], [0], [(0, 1)])]
    z = 1 / (1 + EPS)
    zero = step_wise_advantages(samples)
    assert zero.advantages == [approx([z, 0.0]), approx([-z])]
    assert zero.report["singleton_buckets"] == 1 and zero.remove == [False, False]
    raw = step_wise_advantages(samples, singleton="raw")
    assert raw.advantages == [approx([z, 2.0]), approx([-z])]  # upstream: raw 2.0 next to z-scores
    with pytest.raises(ValueError, match="singleton"):
        step_wise_advantages(samples, singleton="keep")


def test_step_wise_constant_bucket_drop_and_zero():
    # Task g as above plus task k whose two trajectories both scored 0.5 at step 0: variance 0 -> constant.
    samples = _retool_group() + [StepwiseSample("k", [1, 1], [0.5], [0], [(0, 2)]),
                                 StepwiseSample("k", [0, 1], [0.5], [0], [(0, 2)])]
    for eps in (EPS, 0.0):
        dropped = step_wise_advantages(samples, eps=eps)
        assert dropped.advantages[3:] == [[0.0, 0.0], [0.0, 0.0]] and no_nan(dropped.advantages)
        assert dropped.remove == [False, False, False, True, True]
        assert dropped.report["constant_buckets"] == 1 and dropped.report["dropped_buckets"] == 1
        assert dropped.report["removed_samples"] == 2
    zero = step_wise_advantages(samples, constant="zero")
    assert zero.advantages[3:] == [[0.0, 0.0], [0.0, 0.0]]
    assert zero.remove == [False] * 5
    assert zero.report["constant_buckets"] == 1 and zero.report["dropped_buckets"] == 0
    with pytest.raises(ValueError, match="constant"):
        step_wise_advantages(samples, constant="skip")


def test_step_wise_all_buckets_constant_keeps_the_first():
    # Buckets (k, 0) = [0.5, 0.5] (seen first) and (m, 0) = [1, 1 + 1e-9] (variance 2.5e-19 <= 1e-12): both
    # constant, so (k, 0) is kept (its samples train, with advantage 0) and (m, 0) is dropped.
    samples = [StepwiseSample("k", [1], [0.5], [0], [(0, 1)]),
               StepwiseSample("m", [1], [1.0], [0], [(0, 1)]),
               StepwiseSample("k", [1], [0.5], [0], [(0, 1)]),
               StepwiseSample("m", [1], [1.0 + 1e-9], [0], [(0, 1)])]
    res = step_wise_advantages(samples, eps=0.0)
    assert res.advantages == [[0.0]] * 4
    assert res.remove == [False, True, False, True]
    assert res.report["kept_first_of_all_constant"] is True and res.report["dropped_buckets"] == 1


def test_step_wise_dynamic_history_infers_spans_from_the_loss_mask():
    # One step per sample, no spans: span = [first mask 1, last mask 1 + 1) = [1, 5) for [0,1,1,0,1,0].
    # bucket (g, 2): [1, -1] -> +-1/(1+eps); position 3 (mask 0) inside the span stays 0.
    samples = [StepwiseSample("g", [0, 1, 1, 0, 1, 0], [1.0], [2]),
               StepwiseSample("g", [1, 1, 0], [-1.0], [2]),
               StepwiseSample("g", [0, 0], [None], [3])]
    assert infer_span([0, 1, 1, 0, 1, 0]) == (1, 5)
    assert infer_span([0, 0]) == (0, 0)
    res = step_wise_advantages(samples)
    z = 1 / (1 + EPS)
    assert res.advantages == [approx([0.0, z, z, 0.0, z, 0.0]), approx([-z, -z, 0.0]), [0.0, 0.0]]
    assert res.report["inferred_spans"] == 3 and res.report["empty_spans"] == 1
    assert res.report["unscored_steps"] == 1
    # the third sample has no scored step: with constant="drop" it is left with no step -> removed
    assert res.remove == [False, False, True]


def test_step_wise_unscored_steps_are_left_out_of_their_bucket():
    # Sample 0's step 0 is unscored: bucket (g, 0) holds only sample 1's 3.0 -> singleton -> 0.
    # bucket (g, 1): [1, -1] -> +-1/(1+eps)
    samples = [StepwiseSample("g", [1, 1], [None, 1.0], [0, 1], [(0, 1), (1, 2)]),
               StepwiseSample("g", [1, 1], [3.0, -1.0], [0, 1], [(0, 1), (1, 2)])]
    res = step_wise_advantages(samples)
    z = 1 / (1 + EPS)
    assert res.step_values == [[None, approx(z)], [0.0, approx(-z)]]
    assert res.advantages == [approx([0.0, z]), approx([0.0, -z])]
    assert res.report["unscored_steps"] == 1 and res.report["singleton_buckets"] == 1


def test_step_wise_rejects_inconsistent_samples():
    with pytest.raises(ValueError, match="no token spans"):
        step_wise_advantages([StepwiseSample("g", [1, 1], [1.0, 0.0], [0, 1])])
    with pytest.raises(ValueError, match="outside the response"):
        step_wise_advantages([StepwiseSample("g", [1, 1], [1.0], [0], [(0, 3)])])
    with pytest.raises(ValueError, match="overlaps"):
        step_wise_advantages([StepwiseSample("g", [1, 1, 1], [1.0, 0.0], [0, 1], [(0, 2), (1, 3)])])
    with pytest.raises(ValueError, match="spans"):
        step_wise_advantages([StepwiseSample("g", [1, 1], [1.0, 0.0], [0, 1], [(0, 2)])])
    with pytest.raises(ValueError, match="step indices"):
        step_wise_advantages([StepwiseSample("g", [1, 1], [1.0, 0.0], [0], [(0, 1), (1, 2)])])
    with pytest.raises(ValueError, match="finite"):
        step_wise_advantages([StepwiseSample("g", [1], [float("inf")], [0], [(0, 1)])])


def test_stepwise_sample_from_upstream_metadata():
    # step_scores_with_outcome (outcome + prm) is preferred over step_scores (prm alone)
    meta = {"step_scores": [1.0, -1.0], "step_scores_with_outcome": [2.0, 0.0], "step_indices": [0, 1],
            "step_token_spans": [[0, 2], [3, 4]]}
    s = stepwise_sample_from_metadata(5, [1, 1, 0, 1], meta)
    assert (s.group_id, s.scores, s.step_indices, s.spans) == (5, [2.0, 0.0], [0, 1], [(0, 2), (3, 4)])
    # ReTool layout: indices from `steps`, spans given
    meta = {"steps": [{"step_index": 0}, {"step_index": 1}], "step_scores": [0.5, None],
            "step_token_spans": [[0, 1], [2, 3]]}
    s = stepwise_sample_from_metadata("g", [1, 0, 1], meta)
    assert (s.scores, s.step_indices) == ([0.5, None], [0, 1])
    # dynamic history: one score, no indices, no spans -> index 0, spans inferred later
    s = stepwise_sample_from_metadata("g", [0, 1], {"step_scores": [1.0]})
    assert (s.step_indices, s.spans) == ([0], None)
    with pytest.raises(ValueError, match="step_scores"):
        stepwise_sample_from_metadata("g", [1], {})


# ------------------------------------------------------------------------------------------ votes


@pytest.mark.parametrize("text, vote", [
    ("The step is right. \\boxed{1}", 1),
    ("\\boxed{-1}", -1),
    ("\\boxed{ -1 }", -1),
    ("\\boxed{+1}", 1),
    ("\\boxed{1.0}", 1),
    ("\\boxed {1}", 1),
    ("answer with \\boxed{} ... so \\boxed{-1}", -1),  # an empty quoted box is skipped, not scored 0
    ("\\boxed{-1} and later \\boxed{1}", -1),  # the first vote counts
    ("\\boxed{0}", None),
    ("\\boxed{2}", None),
    ("\\boxed{11}", None),
    ("\\boxed{- 1}", None),  # a space between sign and digit is not a number
    ("\\boxed{yes}", None),
    ("\\boxed{1", None),  # never closed
    ("no verdict", None),
    ("", None),
    (None, None),
])
def test_parse_boxed_vote(text, vote):
    assert parse_boxed_vote(text) == vote


def test_parse_boxed_vote_last():
    assert parse_boxed_vote("choose \\boxed{1} or \\boxed{-1}. Verdict: \\boxed{-1} \\boxed{x}", pick="last") == -1
    assert parse_boxed_vote("\\boxed{-1} \\boxed{1}", pick="last") == 1
    with pytest.raises(ValueError, match="pick"):
        parse_boxed_vote("\\boxed{1}", pick="middle")


def test_mean_vote():
    # (1 - 1 + 1) / 3 = 1/3; invalid votes are left out, none valid -> None (unjudged, not 0)
    assert mean_vote([1, -1, 1, None]) == pytest.approx(1 / 3, abs=1e-12)
    assert mean_vote([-1]) == -1.0
    assert mean_vote([None, None]) is None
    assert mean_vote([]) is None
    # the unjudged step then composes to the outcome alone
    assert compose_step_target(1.0, mean_vote([None]), 1.0) == (1.0, False)


# -------------------------------------------------------------------------------------------- ReTool


def test_boxed_answer_nested_and_malformed():
    assert boxed_answer("Answer: \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert boxed_answer("first \\boxed{3}, finally \\boxed{ 42 }") == "42"
    assert boxed_answer("\\boxed{5} then an unclosed \\boxed{7") == "5"
    assert boxed_answer("\\boxed{\\boxed{1}+1}") == "\\boxed{1}+1"  # an inner box is part of the outer one
    assert boxed_answer("\\boxed{\\{1, 2\\}}") == "\\{1, 2\\}"
    assert boxed_answer("\\boxed{}") == ""
    assert boxed_answer("no box") is None
    assert boxed_answer("") is None and boxed_answer(None) is None
    assert boxed_contents("\\boxed{a} \\boxed{b{c}} \\boxed{d") == ["a", "b{c}"]


def test_retool_reward_shaping():
    # wrong: min(-0.6, -1 + 0.1 * (n - 2) / 2)
    #   n=0: -1 + 0.1*(-2)/2 = -1.1;  n=2: -1.0;  n=6: -1 + 0.1*4/2 = -0.8;  n=10: -1 + 0.4 = -0.6;
    #   n=20: -1 + 0.9 = -0.1 -> capped at -0.6
    expected = {0: -1.1, 1: -1.05, 2: -1.0, 6: -0.8, 10: -0.6, 20: -0.6}
    for calls, value in expected.items():
        assert retool_reward(False, calls) == pytest.approx(value, abs=1e-12)
        assert retool_reward(True, calls) == 1.0
    assert retool_reward(False, 6, shaping=False) == -1.0


def test_retool_reward_counts_only_successful_calls_when_given():
    # 10 calls of which 0 ran cleanly: -1.1 (upstream gave -0.6 for spamming failing code); 4 of 10: -0.9
    assert retool_reward(False, 10, successful_tool_calls=0) == pytest.approx(-1.1, abs=1e-12)
    assert retool_reward(False, 10, successful_tool_calls=4) == pytest.approx(-0.9, abs=1e-12)
    assert retool_reward(True, 10, successful_tool_calls=0) == 1.0
    with pytest.raises(ValueError, match="successful_tool_calls"):
        retool_reward(False, 2, successful_tool_calls=3)
    with pytest.raises(ValueError, match="tool_calls"):
        retool_reward(False, -1)


# -------------------------------------------------------------------------------------- step batches


def test_attach_step_targets_writes_the_composed_targets_and_only_when_judged():
    from slime.agentic.rewards import attach_step_targets

    meta = {"step_wise": {"step_indices": [0, 1], "prm_scores": [1.0, None]}}
    assert attach_step_targets(meta, -1.0, 0.5) == [1.0, None]
    assert meta["step_wise"]["step_scores_with_outcome"] == [-0.5, -1.0]  # unjudged: the outcome alone
    bare = {"step_wise": {"prm_scores": None}}
    assert attach_step_targets(bare, 1.0, 1.0) is None and "step_scores_with_outcome" not in bare["step_wise"]
    assert attach_step_targets({}, 1.0, 1.0) is None


def test_outcome_rewards_maps_a_settings_outcome_over_one_sample_or_a_trajectorys_steps():
    from types import SimpleNamespace

    from slime.agentic.rewards import outcome_rewards
    from slime.utils.types import Sample

    def outcome(meta):
        return {"score": 1.0 if meta["solved"] else -1.0, "acc": float(meta["solved"])}

    args = SimpleNamespace(prm_step_coef=0.5)
    plain = Sample(metadata={"solved": True})
    assert outcome_rewards(args, plain, outcome) == {"score": 1.0, "acc": 1.0}  # one sample: one reward
    judged = [Sample(metadata={"solved": False, "step_wise": {"prm_scores": [p], "step_indices": [k]}})
              for k, p in enumerate((1.0, -1.0))]
    out = outcome_rewards(args, judged, outcome)
    assert [r["score"] for r in out] == [-1.0, -1.0] and [r["acc"] for r in out] == [0.0, 0.0]
    # each judged step gets its step_wise target, outcome + coef * prm, and the logged part beyond the outcome
    assert [s.metadata["step_wise"]["step_scores_with_outcome"] for s in judged] == [[-0.5], [-1.5]]
    assert [r["prm_step_score"] for r in out] == [0.5, -0.5]
