"""Times as people write them: a clock, maybe a date, maybe a zone, read the way the
evidence's own instants can be compared with them.

A written time is compared in its own zone: each instant of the evidence is turned into
that zone's local time (with zoneinfo, so "PT" is PST or PDT by the date) and the two clocks
are compared, dates too when the text gives one. A time written without a date is the
same clock on any day. A time written without a zone takes the zone its heading, list or
table states ("Timeline (PT)", "All times UTC"), else UTC, the zone every tool writes.

Zone names (case-insensitive) and what they mean; a name that means two zones is
*ambiguous*, and a time written in it is unchecked, never judged:
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from functools import cache, lru_cache
from zoneinfo import ZoneInfo

# abbreviation -> minutes east of UTC, an IANA zone (its offset follows the date), or None
# for a name two zones use
ZONES: dict[str, int | str | None] = {
    "utc": 0,
    "z": 0,
    "gmt": 0,
    "wet": 0,
    "west": 60,
    "bst": 60,  # British Summer Time
    "cet": 60,
    "cest": 120,
    "eet": 120,
    "eest": 180,
    "msk": 180,
    "ist": 330,  # India; Irish and Israel Standard Time are written IST far less often
    "pkt": 300,
    "ict": 420,
    "wib": 420,
    "sgt": 480,
    "hkt": 480,
    "pht": 480,
    "awst": 480,
    "jst": 540,
    "kst": 540,
    "acst": 570,
    "acdt": 630,
    "aest": 600,
    "aedt": 660,
    "nzst": 720,
    "nzdt": 780,
    "hst": -600,
    "akst": -540,
    "akdt": -480,
    "pst": -480,
    "pdt": -420,
    "mst": -420,
    "mdt": -360,
    "cst": -360,  # US Central: China Standard Time is written CST too, but rarely in SRE text
    "cdt": -300,
    "est": -300,
    "edt": -240,
    "brt": -180,
    "art": -180,
    "pt": "America/Los_Angeles",
    "mt": "America/Denver",
    "ct": "America/Chicago",
    "et": "America/New_York",
    "ast": None,  # Atlantic or Arabia
    "cat": 120,
    "eat": 180,
    "sast": 120,
    "wat": 60,
}
ZONE_NAMES = "|".join(sorted(ZONES, key=len, reverse=True))
__doc__ = (__doc__ or "") + "\n".join(
    f"- {name.upper()}: "
    + (
        "ambiguous"
        if meaning is None
        else meaning
        if isinstance(meaning, str)
        else f"UTC{meaning // 60:+d}" + (f":{abs(meaning) % 60:02d}" if meaning % 60 else "")
    )
    for name, meaning in ZONES.items()
)


class Ambiguous(ValueError):
    """The zone a time is written in names two zones."""


@cache
def zone(name: str, shift: str | None = None) -> tzinfo:
    """The tzinfo a written zone means ("PT", "CEST", "UTC+1", "+05:30"). Raises KeyError
    for a name not in the table, Ambiguous for one two zones use."""
    offset = 0
    if name:
        meaning = ZONES[name.lower()]
        if meaning is None:
            raise Ambiguous(name)
        if isinstance(meaning, str):
            if shift:
                raise KeyError(f"{name}{shift}")
            return ZoneInfo(meaning)
        offset = meaning
    if shift:
        sign = -1 if shift[0] == "-" else 1
        digits = shift[1:].replace(":", "")
        hours, minutes = (digits, "0") if len(digits) <= 2 else (digits[:-2], digits[-2:])
        offset += sign * (int(hours) * 60 + int(minutes))
    return UTC if offset == 0 else timezone(timedelta(minutes=offset))


@dataclass(frozen=True)
class WrittenTime:
    """A time as written: its clock, its date if the text gives one, its zone."""

    second: int  # of the day, local to `tz`
    precision: int  # 1 (seconds written) or 60
    day: date | None
    tz: tzinfo

    def on(self, day: date) -> datetime:
        """This clock on `day`, as a wall-clock time of its zone (DST-correct for the date)."""
        return datetime.combine(day, datetime.min.time()) + timedelta(seconds=self.second)

    def dated(self, latest: float, tolerance_s: float, days_back: int = 0) -> WrittenTime:
        """A time written without a date is the last such clock up to `latest` (the newest
        instant the evidence holds), `days_back` days earlier ("yesterday")."""
        if self.day is not None:
            return self
        newest = datetime.fromtimestamp(latest + tolerance_s + self.precision, self.tz)
        day = newest.date()
        if self.on(day) > newest.replace(tzinfo=None):
            day -= timedelta(days=1)
        return WrittenTime(self.second, self.precision, day - timedelta(days=days_back), self.tz)

    def clock_near(self, instant: float, tolerance_s: float) -> bool:
        """Whether `instant`'s wall clock in this time's zone is this clock, on whatever day:
        a time written without a date claims its clock, not a day."""
        seen = datetime.fromtimestamp(instant, self.tz).date()
        days = (seen + timedelta(days=shift) for shift in (-1, 0, 1))
        return any(replace(self, day=day).near(instant, tolerance_s) for day in days)

    def near(self, instant: float, tolerance_s: float) -> bool:
        """Whether `instant` is this time, within the tolerance (and the precision written):
        the instant's wall clock in this time's zone against the clock written."""
        assert self.day is not None, "a time is compared once it has its date (dated())"
        seen = datetime.fromtimestamp(instant, self.tz).replace(tzinfo=None)
        slack = tolerance_s + self.precision - 1
        return abs((self.on(self.day) - seen).total_seconds()) <= slack


_CLOCK_TEXT = re.compile(
    r"^(?:(\d{4})-(\d{2})-(\d{2})[t ])?(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\.\d+)?"
    r"(?:\s?([ap])\.?m\.?)?\s?([a-z]+)?\s?([+-]\d{1,2}(?::?\d{2})?)?$",
    re.ASCII,
)


def read(text: str, day: date | None = None, carried: tzinfo | None = None) -> WrittenTime | None:
    """A claim's text ("14:01 UTC", "2:01 PM PT", "2026-11-28T14:10:00Z") on `day` (the date
    written next to it) in the `carried` zone when it writes none; None when it is no time.
    Raises Ambiguous for a zone two zones share."""
    m = _CLOCK_TEXT.match(text.strip().lower())
    if not m:
        return None
    year, month, mday, hours, minutes, seconds, half, name, shift = m.groups()
    try:
        tz = zone(name or "", shift) if (name or shift) else (carried or UTC)
    except KeyError:
        return None
    hour = int(hours)
    if half:  # "2:01 PM": 14:01; "12:30 am": 00:30
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half == "p" else 0)
    if hour > 23:
        return None
    if year:
        try:
            day = date(int(year), int(month), int(mday))
        except ValueError:  # "2026-11-31"
            return None
    second = hour * 3600 + int(minutes) * 60 + int(seconds or 0)
    return WrittenTime(second, 1 if seconds else 60, day, tz)


# --- what a heading, a list's introduction or a table's header states for its items -------

_DECLARED_ZONE = re.compile(
    rf"(?:\b(?:all\s+)?times?\s+(?:are\s+)?(?:in\s+)?|\(\s*(?:all\s+times?\s+)?(?:in\s+)?)"
    rf"({ZONE_NAMES})\b",
    re.IGNORECASE,
)
MONTHS = [
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
]
MONTH_ABBREVIATIONS = "|".join(m[:3] for m in MONTHS)
_MONTH_WORDS = "|".join(rf"{m[:3]}(?:{m[3:]})?" if len(m) > 3 else m for m in MONTHS)
_DATE = re.compile(
    rf"\b(?:(\d{{4}})-(\d{{2}})-(\d{{2}})|({_MONTH_WORDS})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?"
    rf"(?:,?\s+(\d{{4}}))?|(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH_WORDS})(?:,?\s+(\d{{4}}))?)\b",
    re.IGNORECASE | re.ASCII,
)


# "11/28", "11/28/2026", "28/11/2026": month first or day first, whichever is a date
_SLASHED = re.compile(r"(?<![\w/.])(\d{1,2})/(\d{1,2})(?:/(\d{4}))?(?![\w/])", re.ASCII)
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_WEEKDAY = re.compile(
    r"\b(?:(?-i:(Mon|Tue|Tues|Wed|Thu|Thur|Thurs|Fri|Sat|Sun))\.?"
    r"|(monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b",
    re.IGNORECASE,
)


def _slashed(m: re.Match[str], year: int) -> date | None:
    """A slashed date, or None when it is no date or reads as two (`12/02`: Dec 2 or 12 Feb)."""
    a, b = int(m.group(1)), int(m.group(2))
    written = int(m.group(3)) if m.group(3) else year
    readings = set()
    for month, mday in ((a, b), (b, a)):
        try:
            readings.add(date(written, month, mday))
        except ValueError:
            continue
    return readings.pop() if len(readings) == 1 else None


def date_in(text: str, year: int, today: date | None = None) -> tuple[date, int, int] | None:
    """The last date written in `text` ("2026-11-28", "Nov 28", "28 November 2026") and
    where it stands; a month name without a year takes `year`. With `today` (the
    incident's day; for a date written right before a time), also "11/28" and a weekday:
    the last one up to `today` — forms too loose to carry from a line above ("5/30 pods",
    "Monday's blip")."""
    found = None
    if today is not None:
        for m in _SLASHED.finditer(text):
            if (slashed := _slashed(m, year)) and (found is None or m.start() > found[1]):
                found = (slashed, m.start(), m.end())
        for m in _WEEKDAY.finditer(text):
            if found is None or m.start() > found[1]:  # the last such weekday up to `today`
                wanted = [d[:3] for d in WEEKDAYS].index((m.group(1) or m.group(2)).lower()[:3])
                found = (today - timedelta(days=(today.weekday() - wanted) % 7), m.start(), m.end())
    for m in _DATE.finditer(text):
        try:
            if m.group(1):
                day = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
            else:
                name = (m.group(4) or m.group(8)).lower()[:3]
                month = [n[:3] for n in MONTHS].index(name) + 1
                mday = int(m.group(5) or m.group(7))
                day = date(int(m.group(6) or m.group(9) or year), month, mday)
        except ValueError:
            continue
        if found is None or m.start() >= found[1]:
            found = (day, m.start(), m.end())
    return found


def declared_zone(text: str) -> str | None:
    """The zone a heading or a list's introduction states for what follows: "Timeline
    (PT)", "All times UTC", "times in CET"."""
    found = [m.group(1) for m in _DECLARED_ZONE.finditer(text)]
    return found[-1] if found else None


@lru_cache(maxsize=16)
def declared_zones(text: str) -> tuple[tuple[int, str], ...]:
    """Every zone declaration in `text` and where it ends (a draft's read once)."""
    return tuple((m.end(), m.group(1)) for m in _DECLARED_ZONE.finditer(text))
