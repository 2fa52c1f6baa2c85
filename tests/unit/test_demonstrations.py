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
])
def test_bad_settings_are_refused(kwargs, message):
    settings = {"count": 1, "temperature": 0.6, "max_new_tokens": 16} | kwargs
    with pytest.raises(ValueError, match=message):
        TeacherDemonstrator(None, None, None, **settings)
