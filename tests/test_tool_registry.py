"""A tool is one module: a throwaway tool set added through the registry alone is offered
to the model, titled on the timeline, hands over only the facts it declares, is read from
its own variables and listed on the configuration page, and is not offered when its
settings are not configured."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel, Field, create_model

from bot.outbound.timeline import Timeline
from bot.process import settings_docs
from bot.process.settings import Settings, SettingsError, load_settings, tool_groups
from graph.config import GraphLimits, ModelSpec, TempoSpec
from graph.grounding.evidence import Fact, fact
from graph.runner import open_investigator
from graph.tools import Bound, Shown, ToolSet, declared
from graph.tools.registry import TOOLSETS, render
from sandbox import GeminiSimulator, Reply
from tests.shared_redis import PREFIX

ROOT = Path(__file__).resolve().parent.parent


# --- the throwaway tool's module: its settings, its tool, its TOOLSET -------------------------
class EchoSettings(BaseModel):
    url: str | None = Field(
        default=None, description="Where the echo service is. Set: the agent gets `read_echo`."
    )
    loudness: int = Field(default=3, ge=1, description="How loud the echo is.")


def settings_model(toolsets: list[ToolSet]) -> type[Settings]:
    """`Settings` with the groups of tool sets the registry does not list (the echo's)."""
    extra = [t for t in toolsets if t not in TOOLSETS]
    return create_model("Settings", __base__=Settings, **tool_groups(extra, Settings.model_fields))


SHOWN = {"read_echo": Shown("Listening to the echo of {word}", facts=("service",))}


def echo_tools(spec: EchoSettings) -> list[BaseTool]:
    @tool(response_format="content_and_artifact")
    async def read_echo(word: str) -> tuple[str, list[Fact]]:
        """What the echo service says back for `word`."""
        said = f"{word} " * spec.loudness
        # The second fact is of a kind the tool does not declare: it is not evidence.
        return said, [fact("service", word, "read_echo"), fact("pod", f"{word}-pod", "read_echo")]

    return declared(SHOWN, [read_echo])


def _open(bound: Bound) -> nullcontext[list[BaseTool]]:
    assert isinstance(bound.settings, EchoSettings)
    return nullcontext(echo_tools(bound.settings))


ECHO = ToolSet(
    name="echo",
    label="Echo",
    open=_open,
    shown=SHOWN,
    settings=EchoSettings,
    env_prefix="ECHO_",
    section="Echo service",
    needs="`ECHO_URL`",
)
# ----------------------------------------------------------------------------------------------


async def test_a_tool_added_through_the_registry_is_in_the_graph_and_titled_on_the_timeline(
    model_spec: ModelSpec,
    tempo_spec: TempoSpec,
    redis_client: aioredis.Redis,
    gemini: GeminiSimulator,
    thread_id: str,
) -> None:
    gemini.script(Reply.call("read_echo", word="cart"), Reply.text("The echo said cart."))
    async with open_investigator(
        model_spec,
        tempo_spec,
        GraphLimits(),
        redis_client,
        prefix=PREFIX,
        toolsets=[*TOOLSETS, ECHO],
        configured={"echo": EchoSettings(url="http://echo.invalid")},
    ) as investigator:
        result = await investigator.investigate(thread_id, "what does the echo say?", "U1")
        state = await investigator.graph.aget_state({"configurable": {"thread_id": thread_id}})
        evidence = state.values["evidence"]

    assert "read_echo" in gemini.requests[0].tool_names
    (started,) = [e for e in result.events if e["type"] == "tool_started"]
    (chunk,) = Timeline().update(started)
    assert chunk["title"] == "Listening to the echo of cart"
    from_echo = {(f["kind"], f["value"]) for f in evidence if f["source"] == "read_echo"}
    assert from_echo == {("service", "cart")}  # the undeclared pod fact was left out


async def test_a_tool_set_whose_settings_are_not_configured_is_not_offered(
    model_spec: ModelSpec,
    tempo_spec: TempoSpec,
    redis_client: aioredis.Redis,
    gemini: GeminiSimulator,
    thread_id: str,
) -> None:
    gemini.script(Reply.text("nothing to see"))
    async with open_investigator(
        model_spec,
        tempo_spec,
        GraphLimits(),
        redis_client,
        prefix=PREFIX,
        toolsets=[*TOOLSETS, ECHO],
    ) as investigator:
        await investigator.investigate(thread_id, "why?", "U1")

    assert "read_echo" not in gemini.requests[0].tool_names
    assert "query_tempo_traces" in gemini.requests[0].tool_names


def test_the_tools_page_is_what_the_registry_generates() -> None:
    assert (ROOT / "docs/tools.md").read_text() == render() + "\n", "stale: run make docs"


def test_a_tool_added_through_the_registry_is_on_the_tools_page() -> None:
    page = render([*TOOLSETS, ECHO])
    assert "## Echo" in page and "Needs: `ECHO_URL`." in page
    assert "| `read_echo` | “Listening to the echo of {word}” | 12,000 chars | `service` |" in page


def test_a_tool_a_set_does_not_declare_is_refused() -> None:
    with pytest.raises(ValueError, match="read_echo is not declared"):
        declared({}, echo_tools(EchoSettings(url="http://echo.invalid")))


def test_a_tool_added_through_the_registry_is_read_from_its_own_variables() -> None:
    toolsets = [*TOOLSETS, ECHO]
    model = settings_model(toolsets)
    settings = model(_env_file=None, tempo_url="http://t:1", echo_url="http://echo:1")
    assert settings.tool_settings(toolsets)["echo"] == EchoSettings(url="http://echo:1")
    assert "echo" not in model(_env_file=None, tempo_url="http://t:1").tool_settings(toolsets)


def test_a_bad_value_of_a_registered_tool_is_named_by_its_variable() -> None:
    with pytest.raises(SettingsError, match=r"^ECHO_LOUDNESS: 0 is below the minimum 1$"):
        load_settings(
            _env_file=None,
            tempo_url="http://t:1",
            echo_loudness=0,
            model=settings_model([*TOOLSETS, ECHO]),
        )


def test_a_tool_added_through_the_registry_is_on_the_configuration_page() -> None:
    page = settings_docs.render(settings_model([*TOOLSETS, ECHO]))
    assert "## Echo service" in page
    assert "| `ECHO_URL` |" in page and "| `ECHO_LOUDNESS` |" in page
    assert "Where the echo service is." in page


@pytest.mark.parametrize("name", ["slack", "redis", "prometheus"])
def test_a_tool_set_named_as_a_settings_group_is_refused(name: str) -> None:
    clash = ToolSet(name=name, label="Clash", open=_open, shown=SHOWN, settings=EchoSettings)
    with pytest.raises(ValueError, match=f"tool set '{name}': a settings group has that name"):
        settings_model([*TOOLSETS, clash])
