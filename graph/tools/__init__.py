"""The agent's tools: one module per external system, one client class each."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.tools import BaseTool

RESULT_CHARS = "result_chars"  # a tool's metadata: the most of one result the model is sent
DEFAULT_RESULT_CHARS = 12_000  # for a tool that names no budget of its own


def budgeted(tool: BaseTool, chars: int) -> BaseTool:
    """The tool with its output budget: what the model is sent of one result, at most (the
    evidence a result hands over beside its text is taken whole)."""
    tool.metadata = {**(tool.metadata or {}), RESULT_CHARS: chars}
    return tool


def result_budget(tool: BaseTool | None) -> int:
    chars = (tool.metadata or {}).get(RESULT_CHARS) if tool is not None else None
    return chars if isinstance(chars, int) else DEFAULT_RESULT_CHARS


def as_declared(tools: Sequence[BaseTool]) -> list[BaseTool]:
    """The tools with their descriptions as the model is sent them: a docstring's line
    breaks and indentation collapsed to single spaces. Every declaration is sent with
    every model call, so each character of it is paid for on each call."""
    for each in tools:
        each.description = " ".join(each.description.split())
    return list(tools)
