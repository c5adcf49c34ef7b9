"""Relative dates resolved against the time a turn was said: "last year" in a 2023 conversation is 2022.

Memory outlives its conversation, so "yesterday" in a remembered turn is wrong a week later. The writer annotates
each relative expression with the date it meant, in the item's text ("yesterday [7 May 2023]"), so recall can show
it and a question about a date can match it.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "a couple of": 2}
_RELATIVE = re.compile(
    r"\b(?P<expr>yesterday|today|tonight|this morning|last night|"
    r"last (?:week|weekend|month|year|" + "|".join(_WEEKDAYS) + r")|"
    r"this (?:week|month|year)|next (?:week|month|year)|"
    r"(?P<n>\d+|a couple of|an?|one|two|three|four|five|six) (?P<unit>day|week|month|year)s? ago)\b",
    re.I,
)


def day_text(day: date) -> str:
    return f"{day.day} {day:%B %Y}"


def _month_shift(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _meaning(expression: str, n: str | None, unit: str | None, said: date) -> str:
    e = expression.lower()
    if unit is not None:
        count = int(n) if n and n.isdigit() else _NUMBERS.get((n or "a").lower(), 1)
        if unit.lower() == "day":
            return day_text(said - timedelta(days=count))
        if unit.lower() == "week":
            return f"the week of {day_text(said - timedelta(weeks=count))}"
        if unit.lower() == "month":
            return f"{_month_shift(said, -count):%B %Y}"
        return str(said.year - count)
    if e in ("today", "tonight", "this morning"):
        return day_text(said)
    if e in ("yesterday", "last night"):
        return day_text(said - timedelta(days=1))
    if e in ("last week", "last weekend"):
        return f"the week before {day_text(said)}"
    if e == "last month":
        return f"{_month_shift(said, -1):%B %Y}"
    if e == "last year":
        return str(said.year - 1)
    if e == "this week":
        return f"the week of {day_text(said)}"
    if e == "this month":
        return f"{said:%B %Y}"
    if e == "this year":
        return str(said.year)
    if e == "next week":
        return f"the week after {day_text(said)}"
    if e == "next month":
        return f"{_month_shift(said, 1):%B %Y}"
    if e == "next year":
        return str(said.year + 1)
    weekday = _WEEKDAYS.index(e.split()[1])  # "last friday": the latest such day before the day it was said
    back = (said.weekday() - weekday) % 7 or 7
    return day_text(said - timedelta(days=back))


def resolve_relative_dates(text: str, said_at: float) -> str:
    """``text`` with each relative date followed by the date it meant, in brackets."""
    said = datetime.fromtimestamp(said_at, UTC).date()

    def annotate(match: re.Match[str]) -> str:
        return f"{match.group(0)} [{_meaning(match.group('expr'), match.group('n'), match.group('unit'), said)}]"

    return _RELATIVE.sub(annotate, text)


def date_label(ts: float) -> str:
    """How an item's time is shown: the day it was said."""
    return day_text(datetime.fromtimestamp(ts, UTC).date())


_PERIOD = re.compile(
    r"\b(?P<expr>yesterday|today|last (?:week|month|year)|this (?:week|month|year)|"
    r"(?:in|during) (?P<year>(?:19|20)\d\d))\b",
    re.I,
)
_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_SHORT_MONTHS = r"(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.?"
_MONTH = r"(?P<month>" + "|".join(m.capitalize() for m in _MONTHS) + "|" + _SHORT_MONTHS + ")"
_DAY = r"(?P<day>[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
# a calendar date the question names: "on 3 June, 2023", "October 13, 2023", "in July 2023", "2023-06-03", and, with
# a "now" to place them, "on June 3" and "in June" (the latest such day or month up to now). Month names are
# capitalised, so "may" the verb is no month.
_NAMED = (
    re.compile(rf"\b{_DAY} (?:of )?{_MONTH},? {_YEAR}\b"),
    re.compile(rf"\b{_MONTH} {_DAY},? {_YEAR}\b"),
    re.compile(rf"\b{_MONTH},? {_YEAR}\b"),
    re.compile(r"\b(?P<iso>(?:19|20)\d\d-[01]\d-[0-3]\d)\b"),
    re.compile(rf"\b(?:on|of|since) {_DAY} (?:of )?{_MONTH}\b"),
    re.compile(rf"\b(?:on|of|since) {_MONTH} {_DAY}\b"),
    re.compile(rf"\b(?:in|during|of|since) (?:early |late |mid-)?{_MONTH}\b"),
)


def _named_date(question: str, now: float | None) -> tuple[date, date] | None:
    """The day or month a question names, as [start, end) dates; a date without a year needs ``now``."""
    for pattern in _NAMED:
        match = pattern.search(question)
        if match is None:
            continue
        found = match.groupdict()
        if found.get("iso"):
            try:
                day = date.fromisoformat(found["iso"])
            except ValueError:
                continue
            return day, day + timedelta(days=1)
        month = next(i for i, m in enumerate(_MONTHS, 1) if m.startswith(found["month"].rstrip(".").lower()))
        if found.get("year"):
            year = int(found["year"])
        elif now is None:
            return None
        else:
            today = datetime.fromtimestamp(now, UTC).date()
            year = today.year if (month, int(found.get("day") or 1)) <= (today.month, today.day) else today.year - 1
        if not found.get("day"):
            return date(year, month, 1), _month_shift(date(year, month, 1), 1)
        try:
            day = date(year, month, int(found["day"]))
        except ValueError:  # "31 June"
            continue
        return day, day + timedelta(days=1)
    return None


def period_asked(question: str, now: float | None) -> tuple[float, float] | None:
    """The span of time a question asks about ("last year", "yesterday", "in 2022", "on 3 June, 2023", "in July"),
    resolved against ``now``, as [start, end) timestamps; ``None`` when it names none (or only a relative one and
    ``now`` is unknown). A named day or month wins over a year or a relative span."""
    to_ts = lambda d: datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()  # noqa: E731
    named = _named_date(question, now)
    if named is not None:
        return to_ts(named[0]), to_ts(named[1])
    match = _PERIOD.search(question)
    if match is None or (now is None and not match.group("year")):
        return None
    today = datetime.fromtimestamp(now or 0.0, UTC).date()
    e = match.group("expr").lower()
    if match.group("year"):
        start, end = date(int(match.group("year")), 1, 1), date(int(match.group("year")) + 1, 1, 1)
    elif e in ("today", "yesterday"):
        start = today - timedelta(days=1 if e == "yesterday" else 0)
        end = start + timedelta(days=1)
    elif e.endswith("week"):
        monday = today - timedelta(days=today.weekday())
        start = monday - timedelta(weeks=1) if e.startswith("last") else monday
        end = start + timedelta(weeks=1)
    elif e.endswith("month"):
        this_month = today.replace(day=1)
        start = _month_shift(this_month, -1) if e.startswith("last") else this_month
        end = _month_shift(start, 1)
    else:
        year = today.year - 1 if e.startswith("last") else today.year
        start, end = date(year, 1, 1), date(year + 1, 1, 1)
    return to_ts(start), to_ts(end)


_PAST = re.compile(r"\b(before|previous(?:ly)?|used to|earlier|formerly|old|former|originally|last time)\b", re.I)


def asks_about_past(question: str) -> bool:
    """The question asks what was true before ("which version did I run before?"): superseded facts answer it."""
    return bool(_PAST.search(question))
