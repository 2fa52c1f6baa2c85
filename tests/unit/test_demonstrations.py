"""Teacher demonstrations: the pure parts (seeds, reply budget, argument checks); the engine round trip is in
tests/integration/test_proxy_distillation.py."""

from __future__ import annotations

import pytest

from slime.conversation.demonstrations import TeacherDemonstrator, demonstration_seed, reply_budget


def test_seed_is_fixed_per_turn_and_index_and_fits_an_int32():
    assert demonstration_seed(7, 0) == demonstration_seed(7, 0)
    seeds = {demonstration_seed(turn, index) for turn in range(50) for index in range(3)}
    assert len(seeds) == 150 and all(0 <= s < 2 ** 31 for s in seeds)


@pytest.mark.parametrize("request_body, expected", [
    ({}, 512),
    ({"max_tokens": 200}, 200),
    ({"max_completion_tokens": 64, "max_tokens": 200}, 64),
    ({"max_tokens": 4096}, 512),  # the proxy's cap wins
    ({"max_tokens": 0}, 512),
    ({"max_tokens": "lots"}, 512),
])
def test_reply_budget_follows_the_client_within_the_cap(request_body, expected):
    assert reply_budget(request_body, 512) == expected


@pytest.mark.parametrize("kwargs, message", [
    ({"count": 0}, "count"),
    ({"temperature": 0.0}, "temperature"),
    ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"opening_tokens": 0}, "opening_tokens"),
])
def test_bad_settings_are_refused(kwargs, message):
    settings = {"count": 1, "temperature": 0.6, "max_new_tokens": 16} | kwargs
    with pytest.raises(ValueError, match=message):
        TeacherDemonstrator(None, None, None, **settings)


def _demo(teacher, student, finish_reason="stop"):
    from slime.conversation.demonstrations import Demonstration
    from slime.conversation.teacher import TeacherScores

    return Demonstration(response_ids=list(range(len(teacher))), text="", finish_reason=finish_reason,
                         student_log_probs=student, teacher=TeacherScores(teacher, None, None, 0), weight_version="",
                         hint="h")


def test_hint_log_ratio_is_the_mean_per_token_gap():
    from slime.conversation.demonstrations import hint_log_ratio

    assert hint_log_ratio([-1.0, -2.0], [-5.0, -2.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        hint_log_ratio([], [])


def test_keep_best_ranks_by_how_much_the_hint_explains_the_reply():
    from slime.conversation.demonstrations import keep_best

    # a reply that opens the way the hint asked (+4.5 on its first token) outranks ones the student writes anyway
    ignored = _demo([-0.3, -0.2, -0.4], [-0.3, -0.3, -0.3])  # ratio 0.0
    followed = _demo([-0.5, -0.2, -0.4], [-5.0, -0.3, -0.3])  # ratio 1.5
    tie = _demo([-0.3, -0.2, -0.4], [-0.3, -0.3, -0.3])
    assert keep_best([ignored, followed, tie], 1) == [followed]
    assert keep_best([ignored, followed, tie], 2) == [followed, ignored]  # a tie keeps the earlier candidate
    assert keep_best([], 1) == []


def test_candidates_must_cover_the_demonstrations_kept():
    with pytest.raises(ValueError, match="candidates"):
        TeacherDemonstrator(None, None, None, count=2, candidates=1, temperature=0.6, max_new_tokens=8)
    assert TeacherDemonstrator(None, None, None, count=1, temperature=0.6, max_new_tokens=8).candidates == 1


def test_a_stop_token_is_taken_off_an_opening_but_nothing_else_is():
    from slime.conversation.demonstrations import only_stops, without_stop

    stopped = {"finish_reason": {"type": "stop", "matched": 2}}
    assert without_stop([5, 6, 2], stopped) == [5, 6]
    assert without_stop([5, 6, 7], {"finish_reason": {"type": "length", "length": 3}}) == [5, 6, 7]
    assert without_stop([5, 6, 7], stopped) == [5, 6, 7]  # the last id is not the stop the engine names
    assert without_stop([5, 6], {"finish_reason": {"type": "stop", "matched": "\n\n"}}) == [5, 6]  # a stop string
    assert without_stop([2], stopped) == []
    # a continuation that only stops leaves the reply as the opening alone ("Sure!" and end)
    assert only_stops([2], stopped) and only_stops([], stopped)
    assert not only_stops([9, 2], stopped)


def test_openings_are_ranked_by_the_tokens_the_teacher_wrote_not_the_policys_continuation():
    from slime.conversation.demonstrations import Opening, keep_best

    # "Sure!" as an opening: the hint explains it (+5 a token); an opening the student writes anyway: 0
    plain = Opening([1, 2], [-0.3, -0.2], [-0.3, -0.2])
    hinted = Opening([3, 4], [-0.5, -0.5], [-6.0, -5.0])
    assert keep_best([plain, hinted], 1) == [hinted]
    # a demonstration's ratio is over its opening only: the policy's own continuation does not dilute it
    demo = _demo([-0.5, -0.5, -1.0, -1.0], [-6.0, -5.0, -1.0, -1.0])
    demo.opening_length = 2
    assert demo.hint_log_ratio == pytest.approx(hinted.hint_log_ratio) == pytest.approx(5.0)
