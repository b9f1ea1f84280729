"""Every tool set the agent can be given, in the order its tools are declared to the model.

Adding a read tool is its module (the tools, their `Shown`, a `TOOLSET`), one line here, its
simulator and its tests: the runner opens it when its settings are configured, the timeline
titles its calls from its `Shown`, and the docs list it and its settings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Tools:
    agent: list[BaseTool]  # every tool the agent is given
    grader: list[BaseTool]  # the read-only evidence tools the grader may look up


@asynccontextmanager
async def open_tools(
    toolsets: Sequence[ToolSet],
    configured: Mapping[str, BaseModel],
    tempo_client: TempoClient,
    actions: ActionPipeline | None,
) -> AsyncIterator[Tools]:
    """The tools of every set whose prerequisites hold: its settings are in `configured`
    (by set name) when it has settings, and the cluster is configured (`actions`) when it
    needs it. Each set is closed when the block is left."""
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
        yield Tools(agent, grader)
