"""Who a log line is about: fields bound for the rest of the current task (and the tasks it
starts), which `bot.process.logs` adds to every record. Kept here so the graph can bind its turn's
correlation id without knowing how logs are written."""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from types import MappingProxyType

LOG_CONTEXT: ContextVar[Mapping[str, str]] = ContextVar(
    "tracegate_log_context", default=MappingProxyType({})
)


def bind_log_context(**fields: str) -> None:
    """Add `fields` to every later log line of this task (a new dict: tasks started before
    keep what they had)."""
    LOG_CONTEXT.set({**LOG_CONTEXT.get(), **fields})
