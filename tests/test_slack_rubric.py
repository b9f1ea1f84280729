"""`/rubric` and "rubric status" in a thread."""

from bot.rubric_command import normalise_checklist, parse_permalink
from bot.server import RunningBot
from sandbox import GeminiSimulator, Reply
from sandbox.slack import SlackDriver, SlackSimulator

ROOT = "1700000000.000100"


async def _settled(bot: RunningBot) -> None:
    assert await bot.services.jobs.join(15), "answers still running"


def _said(slack: SlackSimulator) -> str:
    return str(slack.ephemeral[-1]["blocks"])


async def test_set_show_and_clear_the_channel_rubric(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator
) -> None:
    await driver.slash("/rubric", "set cause stated; evidence cited")
    await _settled(bot)
    assert "This channel's rubric is now:\\n- cause stated\\n- evidence cited" in _said(slack)

    await driver.slash("/rubric", "show")
    await _settled(bot)
    assert "- cause stated\\n- evidence cited" in _said(slack)

    await driver.slash("/rubric", "clear")
    await driver.slash("/rubric", "show")
    await _settled(bot)
    assert "No rubric is set here and there is no default" in _said(slack)
    assert slack.ephemeral[-1]["user"] == "U_ONCALL"


async def test_the_channel_rubric_grades_the_next_answer_and_status_shows_it(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    await driver.slash("/rubric", "set cause stated")
    await _settled(bot)
    gemini.script(
        Reply.text("The deploy."),
        Reply.call(
            "SubmitVerdict",
            result="needs_revision",
            explanation="no evidence",
            criteria=[{"name": "cause stated", "passed": False, "gap": "name the cause"}],
        ),
        Reply.text("The deploy of 1.42.0 caused it."),
        Reply.call(
            "SubmitVerdict",
            result="satisfied",
            explanation="ok",
            criteria=[{"name": "cause stated", "passed": True}],
        ),
    )
    await driver.mention("why?", ts=ROOT)
    await _settled(bot)
    (answer,) = slack.thread("C1", ROOT)
    assert "rubric: satisfied after 1 revision" in str(answer.blocks)

    permalink = f"<https://sim.slack.com/archives/C1/p{ROOT.replace('.', '')}>"
    await driver.slash("/rubric", f"status {permalink}")
    await _settled(bot)
    status = _said(slack)
    assert "satisfied — pass 2 of 3" in status and ":white_check_mark: cause stated" in status

    await driver.slash("/rubric", "status")
    await _settled(bot)
    assert "satisfied — pass 2 of 3" in _said(slack)


async def test_status_of_a_thread_without_a_rubric_says_so(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator
) -> None:
    await driver.slash("/rubric", "status https://sim.slack.com/archives/C1/p1700000999000100")
    await _settled(bot)
    assert "No rubric is active for that thread" in _said(slack)


async def test_rubric_status_mentioned_in_a_thread_answers_for_that_thread(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.text("an answer"))
    await driver.mention("why?", ts=ROOT)
    await _settled(bot)
    await driver.mention("rubric status", ts="1700000050.000100", thread_ts=ROOT)
    await _settled(bot)

    assert len(gemini.requests) == 1  # not an investigation
    status = slack.thread("C1", ROOT)[-1]
    assert "No rubric is active for this thread" in str(status.blocks)


async def test_help_lists_every_subcommand(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator
) -> None:
    await driver.slash("/rubric", "")
    await _settled(bot)
    for verb in ("status", "set", "show", "clear"):
        assert f"/rubric {verb}" in _said(slack)


def test_permalinks_of_a_thread_or_a_reply_locate_the_thread() -> None:
    assert parse_permalink("https://x.slack.com/archives/C9/p1700000000000100") == (
        "C9",
        "1700000000.000100",
    )
    reply = "https://x.slack.com/archives/C9/p1700000050000100?thread_ts=1700000000.000100&cid=C9"
    assert parse_permalink(reply) == ("C9", "1700000000.000100")
    assert parse_permalink("not a link") is None


def test_a_checklist_may_be_given_on_one_line_with_semicolons() -> None:
    assert normalise_checklist("a; b ;c") == "- a\n- b\n- c"
    assert normalise_checklist("- a\n- b") == "- a\n- b"
