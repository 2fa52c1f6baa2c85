"""OSWorld's ``rule_relativeTime`` expected getter (``desktop_env/evaluators/getters/misc.py``): an expected value
whose dates are written relative to today ("tomorrow", "10th next month", "next week Saturday") and formatted into
the rule's templates, so a task stays valid whatever day it runs.

``rules``: ``relativeTime`` ``{from[, to]}`` (phrases below), ``expected`` (the templates: ``time`` for a single
date; ``from`` and ``to`` for a range; ``puDay``/``puMonth``/``puYear`` with "next Monday split" and
``doDay``/``doMonth``/``doYear`` with "next Friday split"), optional ``timezone`` (an IANA name; else today is the
desktop's local date, as OSWorld asks its VM). Template fields, each replaced once: ``{DoW}`` Mon, ``{Month}`` Jan,
``{MonthFull}`` January, ``{month}`` january, ``{MonthD}`` 1, ``{Month0D}`` 01, ``{DayD}`` 5, ``{Day0D}`` 05,
``{Year}`` 2026. Weeks run Monday to Sunday.

Differs from OSWorld where it is broken: "first monday four/eight months later" counts the months across the year's
end (OSWorld's ``(month + 4) % 12`` asks for month 0 from August and fails); an unknown phrase is an
:class:`EvaluationError` naming it (OSWorld: a KeyError, or a date left unset).
"""

from __future__ import annotations

import copy
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .getters import EvalEnv, EvaluationError

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


def _day_of_next_month(today: date, day: int) -> date:
    return date(today.year + today.month // 12, today.month % 12 + 1, day)


def _first_monday_months_later(today: date, months: int) -> date:
    index = today.month - 1 + months
    first = date(today.year + index // 12, index % 12 + 1, 1)
    return first + timedelta(days=(7 - first.weekday()) % 7)


def _next_friday(today: date) -> date:
    """Friday of this week until Thursday; from Friday on, the next week's."""
    wd = today.weekday()
    return today + timedelta(days=4 - wd if wd < 4 else 11 - wd)


def _next_saturday(today: date) -> date:
    wd = today.weekday()
    return today + timedelta(days=5 - wd if wd < 5 else 12 - wd)


def _next_sunday(today: date) -> date:
    wd = today.weekday()
    return today + timedelta(days=6 - wd if wd < 6 else 7)


_NEXT_WEEK = {"next week Friday": 4, "next week Saturday": 5, "next week Sunday": 6}
PHRASES = {
    "tomorrow": lambda t: t + timedelta(days=1),
    "this month": lambda t: t,
    "5th next month": lambda t: _day_of_next_month(t, 5),
    "10th next month": lambda t: _day_of_next_month(t, 10),
    "11th next month": lambda t: _day_of_next_month(t, 11),
    "this Saturday": lambda t: t + timedelta(days=5 - t.weekday()),
    "this Sunday": lambda t: t + timedelta(days=6 - t.weekday()),
    "next Monday": lambda t: t + timedelta(days=7 - t.weekday()),
    "next Monday split": lambda t: t + timedelta(days=7 - t.weekday()),
    "next Friday": _next_friday,
    "next Friday split": _next_friday,
    "next Saturday": _next_saturday,
    "next Sunday": _next_sunday,
    **{phrase: (lambda d: lambda t: t + timedelta(days=7 - t.weekday() + d))(d) for phrase, d in _NEXT_WEEK.items()},
    "first monday four months later": lambda t: _first_monday_months_later(t, 4),
    "first monday eight months later": lambda t: _first_monday_months_later(t, 8),
}


def resolve(phrase: str, today: date, start: tuple[str, date] | None = None) -> date:
    """The date `phrase` names from `today`; an end date follows its range's start where OSWorld ties them (the
    Friday after "next Monday", the Sunday of the weekend that "next Friday"/"next Saturday" starts)."""
    if start is not None:
        start_phrase, start_day = start
        if phrase in ("next Friday", "next Friday split") and start_phrase in ("next Monday", "next Monday split"):
            return start_day + timedelta(days=4)
        if phrase == "next Sunday" and start_phrase in ("next Friday", "next Saturday"):
            return start_day + timedelta(days=6 - start_day.weekday())
    if phrase not in PHRASES:
        raise EvaluationError(f"rule_relativeTime: unknown relative time {phrase!r} (known: {', '.join(PHRASES)})")
    return PHRASES[phrase](today)


def format_date(template: str, day: date) -> str:
    for field, value in (("{DoW}", DAYS[day.weekday()]), ("{Month}", MONTHS[day.month - 1][:3]),
                         ("{DayD}", str(day.day)), ("{Year}", str(day.year)), ("{Month0D}", f"{day.month:02d}"),
                         ("{month}", MONTHS[day.month - 1].lower()), ("{MonthFull}", MONTHS[day.month - 1]),
                         ("{Day0D}", f"{day.day:02d}"), ("{MonthD}", str(day.month))):
        template = template.replace(field, value, 1)
    return template


def _fill(template, day: date):
    return [format_date(t, day) for t in template] if isinstance(template, list) else format_date(template, day)


def relative_rules(rules: dict, today: date) -> dict:
    """The rules with their `expected` dates filled in for `today` (a copy)."""
    out = copy.deepcopy(rules)
    relative, expected = out["relativeTime"], out["expected"]
    start_phrase = relative["from"]
    start = resolve(start_phrase, today)
    if "to" not in relative:
        expected["time"] = _fill(expected["time"], start)
        return out
    if start_phrase == "next Monday split":
        for key in ("puDay", "puMonth", "puYear"):
            expected[key] = _fill(expected[key], start)
    else:
        expected["from"] = _fill(expected["from"], start)
    end_phrase = relative["to"]
    end = resolve(end_phrase, today, start=(start_phrase, start))
    if end_phrase == "next Friday split":
        for key in ("doDay", "doMonth", "doYear"):
            expected[key] = _fill(expected[key], end)
    else:
        expected["to"] = _fill(expected["to"], end)
    return out


async def desktop_today(env: EvalEnv, timezone: str | None) -> date:
    if timezone:
        try:
            return datetime.now(ZoneInfo(timezone)).date()
        except (ZoneInfoNotFoundError, ValueError):
            raise EvaluationError(f"rule_relativeTime: unknown timezone {timezone!r}") from None
    result = await env.client.execute(["python3", "-c", "import datetime; print(datetime.date.today().isoformat())"])
    try:
        return date.fromisoformat(result.get("output", "").strip())
    except ValueError:
        raise EvaluationError(f"rule_relativeTime: the desktop's date is unreadable: {result!r}") from None


async def get_rule_relativeTime(env: EvalEnv, config: dict):
    rules = config["rules"]
    return relative_rules(rules, await desktop_today(env, rules.get("timezone")))


__all__ = ["PHRASES", "format_date", "get_rule_relativeTime", "relative_rules", "resolve"]
