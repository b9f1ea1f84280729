"""The placeholder shows the turn's progress, edited at most once every PROGRESS_INTERVAL
(Slack allows about one chat.update a second per channel). Counted at the Slack simulator."""

import uuid

from sandbox import GeminiSimulator, Reply
from sandbox.scenarios import Scenario
from sandbox.slack import SlackDriver, SlackSimulator
from tests.gates_fixtures import until
from tests.slack_fixtures import SECRET, BotFactory, settled

ROOT = "1700000000.000100"
ANSWER = "payment-api 1.42.0 throws NullPointerException."


def _three_steps(gemini: GeminiSimulator, scenario: Scenario, delay_s: float = 0.0) -> None:
    """A search, a trace read and the answer: six different progress lines in a row
    (thinking, running the search, thinking, reading the trace, thinking, checking the IDs);
    the answer comes `delay_s` after the trace was read."""
    cited = scenario.error_trace_ids[0]
    gemini.script(
        Reply.call("query_tempo_traces", traceql="{ status = error }"),
        Reply.call("get_trace", trace_id=cited),
        Reply(parts=({"text": f"{ANSWER} See {cited}."},), delay_s=delay_s),
    )


def _progress_edits(slack: SlackSimulator) -> list[str]:
    """The placeholder's progress lines: the chat.update calls without blocks (the answer
    comes with its blocks)."""
    return [c.args["text"] for c in slack.calls_to("chat.update") if not c.args.get("blocks")]


async def _investigate_once(
    bot_for: BotFactory, slack: SlackSimulator, progress_interval: float
) -> None:
    async with bot_for(progress_interval=progress_interval) as bot:
        driver = SlackDriver(bot.url, SECRET, team=f"T{uuid.uuid4().hex[:8].upper()}", slack=slack)
        await driver.mention("checkout is throwing 500s, why?", ts=ROOT)
        await settled(bot)
        # Every progress edit comes before the answer's: once it shows, the count is final.
        await until(
            lambda: any(ANSWER in m.text for m in slack.thread("C1", ROOT)), "the answer to show"
        )
    assert len(slack.thread("C1", ROOT)) == 1


async def test_without_an_interval_every_new_progress_line_is_shown(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator, scenario: Scenario
) -> None:
    _three_steps(gemini, scenario)
    await _investigate_once(bot_for, slack, progress_interval=0)

    edits = _progress_edits(slack)
    assert len(edits) == 6, edits
    assert "Running `query_tempo_traces`" in edits[1] and "Running `get_trace`" in edits[3]


async def test_the_placeholder_is_edited_at_most_once_per_progress_interval(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator, scenario: Scenario
) -> None:
    _three_steps(gemini, scenario)
    await _investigate_once(bot_for, slack, progress_interval=3600)

    assert _progress_edits(slack) == [":hourglass_flowing_sand: Thinking…"]
    assert len(slack.calls_to("chat.update")) == 2  # that one progress line, then the answer


async def test_progress_is_shown_again_once_the_interval_has_passed(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator, scenario: Scenario
) -> None:
    """The throttle drops lines inside the interval, not every line after the first: the
    answer takes 2 s after the trace was read, so "Checking the cited trace IDs" comes more
    than the 0.5 s interval after any earlier edit."""
    _three_steps(gemini, scenario, delay_s=2.0)
    await _investigate_once(bot_for, slack, progress_interval=0.5)

    edits = _progress_edits(slack)
    assert edits[0] == ":hourglass_flowing_sand: Thinking…"
    assert edits[-1] == ":hourglass_flowing_sand: Checking the cited trace IDs in Tempo…"
