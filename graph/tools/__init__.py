"""The agent's tools: one module per external system, one client class each."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.tools import BaseTool


def as_declared(tools: Sequence[BaseTool]) -> list[BaseTool]:
    """The tools with their descriptions as the model is sent them: a docstring's line
    breaks and indentation collapsed to single spaces. Every declaration is sent with
    every model call, so each character of it is paid for on each call."""
    for each in tools:
        each.description = " ".join(each.description.split())
    return list(tools)
