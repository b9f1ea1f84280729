"""Every tool set the agent can be given, in the order its tools are declared to the model.

Adding a read tool is its module (the tools, their `Shown`, a `TOOLSET`), one line here, its
simulator and its tests: the runner opens it when its settings are configured, the timeline
titles its calls from its `Shown`, and the docs list it and its settings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from langchain_core.tools import BaseTool
from pydantic import BaseModel

from graph.tools import Bound, Shown, ToolSet, kubernetes, loki, pods, prometheus, tempo

if TYPE_CHECKING:
    from gates.pipeline import ActionPipeline
    from graph.tools.tempo import TempoClient

TOOLSETS: tuple[ToolSet, ...] = (
    tempo.TOOLSET,
    prometheus.TOOLSET,
    loki.TOOLSET,
    kubernetes.TOOLSET,
    pods.TOOLSET,
)


def shown_by_name(toolsets: Sequence[ToolSet] = TOOLSETS) -> dict[str, Shown]:
    return {name: each for toolset in toolsets for name, each in toolset.shown.items()}


def render(toolsets: Sequence[ToolSet] = TOOLSETS) -> str:
    """docs/tools.md: each tool set, what it needs, and how each of its tools is shown."""
    lines = [
        "# The agent's tools",
        "",
        "Generated from `graph/tools/registry.py` (`make docs`); each tool set is declared in",
        "its module (`TOOLSET`, and a `Shown` per tool). A set's tools are offered only when",
        "what it needs is configured. Facts are what a result hands over as evidence for the",
        "grounding check (`text`: what free text it reads names, of any kind).",
        "",
    ]
    for toolset in toolsets:
        lines += [f"## {toolset.label}", "", f"Needs: {toolset.needs or 'nothing more'}."]
        if toolset.grader:
            lines.append("The grader may look up its evidence too.")
        lines += [
            "",
            "| tool | on the timeline | output budget | facts it hands over |",
            "|---|---|---|---|",
        ]
        for name, each in toolset.shown.items():
            titles = [each.title, *(each.titles_by[1].values() if each.titles_by else ())]
            shown_as = "; ".join(f"“{t}”" for t in titles)
            facts = ", ".join(f"`{kind}`" for kind in each.facts) or "none"
            lines.append(f"| `{name}` | {shown_as} | {each.budget:,} chars | {facts} |")
        lines.append("")
    return "\n".join(lines)


@asynccontextmanager
async def open_tools(
    toolsets: Sequence[ToolSet],
    configured: Mapping[str, BaseModel],
    tempo_client: TempoClient,
    actions: ActionPipeline | None,
) -> AsyncIterator[tuple[list[BaseTool], list[BaseTool]]]:
    """The tools of every set whose prerequisites hold: its settings are in `configured`
    (by set name) when it has settings, and the cluster is configured (`actions`) when it
    needs it; every tool the agent is given, and the read-only evidence tools the grader may
    look up. Each set is closed when the block is left."""
    agent: list[BaseTool] = []
    grader: list[BaseTool] = []
    async with AsyncExitStack() as opened:
        for toolset in toolsets:
            settings = configured.get(toolset.name)
            if (toolset.settings is not None and settings is None) or (
                toolset.cluster and actions is None
            ):
                continue
            bound = Bound(settings=settings, tempo=tempo_client, actions=actions)
            tools = list(await opened.enter_async_context(toolset.open(bound)))
            agent += tools
            grader += tools if toolset.grader and not toolset.cluster else []
        yield agent, grader


if __name__ == "__main__":  # make docs
    print(render())
