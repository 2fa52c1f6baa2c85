"""OSWorld's rule_relativeTime expected getter, pure: each phrase from fixed days (a Friday, a Sunday, the year's
end), a range whose end follows its start, the split fields, the templates; an unknown phrase is a clear error."""

from __future__ import annotations

from datetime import date

import pytest

from slime.agentic.gui.evaluators import GETTERS
from slime.agentic.gui.evaluators.getters import EvaluationError
from slime.agentic.gui.evaluators.relative_time import format_date, relative_rules, resolve

FRIDAY = date(2026, 12, 4)
SUNDAY = date(2026, 12, 6)
WEDNESDAY = date(2026, 12, 2)


@pytest.mark.parametrize("phrase, today, expected", [
    ("tomorrow", FRIDAY, date(2026, 12, 5)),
    ("this month", FRIDAY, FRIDAY),
    ("5th next month", FRIDAY, date(2027, 1, 5)),  # across the year's end
    ("10th next month", date(2026, 3, 31), date(2026, 4, 10)),
    ("this Saturday", FRIDAY, date(2026, 12, 5)),
    ("this Sunday", WEDNESDAY, SUNDAY),
    ("next Monday", FRIDAY, date(2026, 12, 7)),
    ("next Monday", SUNDAY, date(2026, 12, 7)),
    ("next Friday", WEDNESDAY, FRIDAY),  # this week's until Thursday
    ("next Friday", FRIDAY, date(2026, 12, 11)),  # from Friday on, the next week's
    ("next Saturday", FRIDAY, date(2026, 12, 5)),
    ("next Saturday", date(2026, 12, 5), date(2026, 12, 12)),
    ("next Sunday", SUNDAY, date(2026, 12, 13)),
    ("next week Friday", WEDNESDAY, date(2026, 12, 11)),
    ("next week Sunday", FRIDAY, date(2026, 12, 13)),
    ("first monday four months later", FRIDAY, date(2027, 4, 5)),
    ("first monday four months later", date(2026, 8, 20), date(2026, 12, 7)),  # OSWorld asks for month 0 here
    ("first monday eight months later", date(2026, 5, 1), date(2027, 1, 4)),
])
def test_each_phrase_names_its_day(phrase, today, expected):
    assert resolve(phrase, today) == expected


def test_a_range_and_its_templates():
    rules = {"relativeTime": {"from": "next week Saturday", "to": "next week Sunday"}, "timezone": "America/New_York",
             "expected": {"from": "{DoW}, {Month} {Day0D}", "to": "{DoW}, {Month} {Day0D}", "city": "NYC"}}
    out = relative_rules(rules, FRIDAY)
    assert out["expected"] == {"from": "Sat, Dec 12", "to": "Sun, Dec 13", "city": "NYC"}
    assert rules["expected"]["from"] == "{DoW}, {Month} {Day0D}"  # the task's rules are not changed
    single = relative_rules({"relativeTime": {"from": "10th next month"},
                             "expected": {"time": ["{Year}-{Month0D}-{DayD}", "{MonthFull} {month} {MonthD}"]}}, FRIDAY)
    assert single["expected"]["time"] == ["2027-01-10", "January january 1"]
    # the Friday after "next Monday", in split fields
    split = relative_rules({"relativeTime": {"from": "next Monday split", "to": "next Friday split"},
                            "expected": {"puDay": "{DayD}", "puMonth": "{MonthD}", "puYear": "{Year}",
                                         "doDay": "{DayD}", "doMonth": "{MonthD}", "doYear": "{Year}"}}, SUNDAY)
    assert split["expected"] == {"puDay": "7", "puMonth": "12", "puYear": "2026",
                                 "doDay": "11", "doMonth": "12", "doYear": "2026"}
    assert format_date("{Day0D}/{Month0D} {DoW}", date(2027, 2, 3)) == "03/02 Wed"


def test_an_unknown_phrase_or_timezone_is_a_clear_error():
    with pytest.raises(EvaluationError, match="unknown relative time 'next leap day'"):
        resolve("next leap day", FRIDAY)
    import asyncio

    with pytest.raises(EvaluationError, match="unknown timezone"):
        asyncio.run(GETTERS["rule_relativeTime"](None, {"rules": {"relativeTime": {"from": "tomorrow"},
                                                                  "timezone": "Mars/Olympus",
                                                                  "expected": {"time": "{DayD}"}}}))
