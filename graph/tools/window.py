"""The time window a search covers, as every searching tool takes it.

`since_minutes_ago` and `until_minutes_ago` count back from now; without `since`, a search
starts 15 minutes before the thread's alert, else an hour ago (the thread's incident start
is injected from the state, never chosen by the model).
"""

from __future__ import annotations

import math
import time
from typing import Annotated

from langgraph.prebuilt import InjectedState

ALERT_LEAD_MINUTES = 15  # errors often start a little before an alert fires
DEFAULT_MINUTES = 60

# A searching tool's window arguments, the same in each.
Since = int | None
IncidentStart = Annotated[float | None, InjectedState("incident_start")]


def window(
    since_minutes_ago: Since, until_minutes_ago: int, incident_start: float | None
) -> tuple[int, int] | str:
    """(start, end) in whole unix seconds, or why the window makes no sense."""
    now = int(time.time())
    if since_minutes_ago is None:  # from 15 minutes before the thread's alert, else an hour
        since_minutes_ago = (
            DEFAULT_MINUTES
            if not isinstance(incident_start, int | float) or incident_start > now
            else math.ceil((now - incident_start) / 60) + ALERT_LEAD_MINUTES
        )
    if since_minutes_ago <= until_minutes_ago or until_minutes_ago < 0:
        return "since_minutes_ago must be larger than until_minutes_ago (e.g. 60 and 0)."
    return now - since_minutes_ago * 60, now - until_minutes_ago * 60


def utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
