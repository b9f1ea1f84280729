"""`/rubric` and "rubric status" in a thread."""

import redis.asyncio as aioredis

from bot.outbound.rubric import normalise_checklist, parse_permalink
from bot.process.server import RunningBot
from sandbox import GeminiSimulator, Reply
from sandbox.slack import SlackDriver, SlackSimulator
from tests.gates_fixtures import APPROVER, OUTSIDER
from tests.slack_fixtures import SECRET, BotFactory, settled
from tests.slack_markup import smuggled
from tests.verdicts import verdict

ROOT = "1700000000.000100"
PRIVATE = "CPRIVATE"


def _said(slack: SlackSimulator) -> str:
    return str(slack.ephemeral[-1]["blocks"])


async def test_set_show_and_clear_the_channel_rubric(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator
) -> None:
    await driver.slash("/rubric", "set cause stated; evidence cited", user=APPROVER)
    await settled(bot)
    assert "This channel's rubric is now:\\n- cause stated\\n- evidence cited" in _said(slack)

    await driver.slash("/rubric", "show")
    await settled(bot)
    assert "- cause stated\\n- evidence cited" in _said(slack)

    await driver.slash("/rubric", "clear", user=APPROVER)
    await settled(bot)
    await driver.slash("/rubric", "show")
    await settled(bot)
    assert "No rubric is set here and there is no default" in _said(slack)
    assert slack.ephemeral[-1]["user"] == "U_ONCALL"


async def test_the_channel_rubric_grades_the_next_answer_and_status_shows_it(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    await driver.slash("/rubric", "set cause stated", user=APPROVER)
    await settled(bot)
    gemini.script(
        Reply.text("The deploy."),
        verdict("needs_revision", ("cause stated", False, "name the cause"), why="no evidence"),
        Reply.text("The deploy caused it."),
        verdict("satisfied", ("cause stated", True, None), why="ok"),
    )
    await driver.mention("why?", ts=ROOT)
    await settled(bot)
    (answer,) = slack.thread("C1", ROOT)
    assert "rubric: satisfied after 1 revision" in str(answer.blocks)

    permalink = f"<https://sim.slack.com/archives/C1/p{ROOT.replace('.', '')}>"
    await driver.slash("/rubric", f"status {permalink}")
    await settled(bot)
    status = _said(slack)
    assert "satisfied — pass 2 of 3" in status and ":white_check_mark: cause stated" in status

    await driver.slash("/rubric", "status")
    await settled(bot)
    assert "satisfied — pass 2 of 3" in _said(slack)


async def test_status_of_a_thread_without_a_rubric_says_so(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator
) -> None:
    await driver.slash("/rubric", "status https://sim.slack.com/archives/C1/p1700000999000100")
    await settled(bot)
    assert "No rubric is active for that thread" in _said(slack)


async def test_rubric_status_mentioned_in_a_thread_answers_for_that_thread(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.text("an answer"))
    await driver.mention("why?", ts=ROOT)
    await settled(bot)
    await driver.mention("rubric status", ts="1700000050.000100", thread_ts=ROOT)
    await settled(bot)

    assert len(gemini.requests) == 1  # not an investigation
    status = slack.thread("C1", ROOT)[-1]
    assert "No rubric is active for this thread" in str(status.blocks)


async def test_help_lists_every_subcommand(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator
) -> None:
    await driver.slash("/rubric", "")
    await settled(bot)
    for verb in ("status", "set", "show", "clear"):
        assert f"/rubric {verb}" in _said(slack)
    assert smuggled(slack.responses) == []  # placeholders like <thread link> are escaped


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


async def _graded_thread_in(
    channel: str, bot: RunningBot, driver: SlackDriver, gemini: GeminiSimulator
) -> str:
    """A thread of `channel` graded with a confidential explanation; its permalink."""
    await driver.slash("/rubric", "set cause stated", user=APPROVER, channel=channel)
    await settled(bot)
    gemini.script(
        Reply.text("The card gateway."),
        verdict(
            "satisfied",
            ("cause stated", True, None),
            why="Private detail: card-gateway creds rotated",
        ),
    )
    await driver.mention("why?", ts=ROOT, channel=channel)
    await settled(bot)
    return f"<https://sim.slack.com/archives/{channel}/p{ROOT.replace('.', '')}>"


async def test_status_of_a_thread_in_another_channel_says_ask_there_and_shows_nothing_of_it(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    permalink = await _graded_thread_in(PRIVATE, bot, driver, gemini)
    await driver.slash("/rubric", f"status {permalink}", user=OUTSIDER, channel="C1")
    await settled(bot)

    reply = slack.ephemeral[-1]
    assert "ask in that channel" in reply["text"]
    assert "Private detail" not in str(reply) and "satisfied" not in str(reply)


async def test_status_of_a_thread_in_its_own_channel_shows_its_grading(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    permalink = await _graded_thread_in(PRIVATE, bot, driver, gemini)
    await driver.slash("/rubric", f"status {permalink}", channel=PRIVATE)
    await settled(bot)
    assert "Private detail: card-gateway creds rotated" in _said(slack)


async def test_replies_go_through_the_response_url_even_where_the_bot_is_not_a_member(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator
) -> None:
    slack.outside.add("C_ELSEWHERE")
    await driver.slash("/rubric", "help", user=OUTSIDER, channel="C_ELSEWHERE")
    await settled(bot)

    (reply,) = slack.responses
    assert (reply["channel"], reply["user"], reply["response_type"]) == (
        "C_ELSEWHERE",
        OUTSIDER,
        "ephemeral",
    )
    assert "/rubric status" in reply["text"]
    assert slack.calls_to("chat.postEphemeral") == []


async def test_someone_who_is_not_an_editor_can_neither_set_nor_clear_the_rubric(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator
) -> None:
    await driver.slash("/rubric", "set cause stated", user=APPROVER)
    await settled(bot)
    await driver.slash("/rubric", "set always pass everything", user=OUTSIDER)
    await settled(bot)
    assert "RUBRIC_EDITORS" in slack.ephemeral[-1]["text"]
    await driver.slash("/rubric", "clear", user=OUTSIDER)
    await settled(bot)

    assert "RUBRIC_EDITORS" in slack.ephemeral[-1]["text"]
    assert await bot.services.memory.channel_rubric(driver.team, "C1") == "- cause stated"


async def test_every_rubric_change_and_refusal_is_audited_with_its_actor(
    bot: RunningBot, driver: SlackDriver, redis_client: aioredis.Redis
) -> None:
    for text, user in (("set cause stated", APPROVER), ("clear", OUTSIDER), ("clear", APPROVER)):
        await driver.slash("/rubric", text, user=user)
        await settled(bot)  # one at a time: commands are handled after their ack

    entries = await redis_client.xrange(f"{bot.services.memory.prefix}:audit")
    audited = [
        (f[b"event"].decode(), f[b"actor"].decode(), f[b"target"].decode(), f[b"note"].decode())
        for _, f in entries
    ]
    where = f"channel {driver.team}/C1"
    assert audited == [
        ("rubric_set", APPROVER, where, "- cause stated"),
        ("rubric_clear_denied", OUTSIDER, where, ""),
        ("rubric_cleared", APPROVER, where, ""),
    ]


async def test_rubric_editors_listed_by_id_replace_the_approvers(
    bot_for: BotFactory, slack: SlackSimulator
) -> None:
    async with bot_for(rubric_editors="U_EDITOR") as running:
        driver = SlackDriver(running.url, SECRET, team="TEDITORS", slack=slack)
        await driver.slash("/rubric", "set from the editor", user="U_EDITOR")
        await settled(running)
        await driver.slash("/rubric", "set from an approver", user=APPROVER)
        await settled(running)
        rubric = await running.services.memory.channel_rubric("TEDITORS", "C1")
    assert rubric == "- from the editor"


async def test_a_star_lets_anyone_edit_the_rubric(
    bot_for: BotFactory, slack: SlackSimulator
) -> None:
    async with bot_for(rubric_editors="*") as running:
        driver = SlackDriver(running.url, SECRET, team="TANYONE", slack=slack)
        await driver.slash("/rubric", "set anyone may", user=OUTSIDER)
        await settled(running)
        rubric = await running.services.memory.channel_rubric("TANYONE", "C1")
    assert rubric == "- anyone may"


async def test_a_checklist_is_stored_without_control_or_bidi_characters_or_slack_markup(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator
) -> None:
    hostile = (
        "cause\x00 stated\x07\x1b[31m; <!channel> ping <@U999ADMIN>; "
        "see <https://evil.example/login|Grafana>; \u202eevil"
    )
    await driver.slash("/rubric", f"set {hostile}", user=APPROVER)
    await settled(bot)

    stored = await bot.services.memory.channel_rubric(driver.team, "C1")
    assert stored == (
        "- cause stated[31m\n- !channel ping @U999ADMIN\n- see https://evil.example/login Grafana"
        "\n- evil"
    )
    shown = str(slack.ephemeral[-1])
    assert "<!channel>" not in shown and "<@U999ADMIN>" not in shown and "\u202e" not in shown


async def test_a_rubric_over_the_limit_is_refused_naming_rubric_max_chars(
    bot_for: BotFactory, slack: SlackSimulator
) -> None:
    async with bot_for(rubric_max_chars=40) as running:
        driver = SlackDriver(running.url, SECRET, team="TLIMIT", slack=slack)
        await driver.slash("/rubric", "set " + "evidence cited; " * 10, user=APPROVER)
        await settled(running)
        rubric = await running.services.memory.channel_rubric("TLIMIT", "C1")
    assert rubric is None
    assert "the limit is 40 (RUBRIC_MAX_CHARS)" in slack.ephemeral[-1]["text"]


async def test_rubric_status_mentioned_in_a_graded_thread_reports_that_threads_passes(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    await driver.slash("/rubric", "set cause stated", user=APPROVER)
    assert await bot.services.jobs.join(15)
    criteria = [{"name": "cause stated", "passed": True}]
    verdict = Reply.call("SubmitVerdict", result="satisfied", explanation="ok", criteria=criteria)
    gemini.script(Reply.text("It was the deploy."), verdict)
    await driver.mention("why?", ts=ROOT)
    assert await bot.services.jobs.join(15)
    await driver.mention("rubric status", ts="1700000050.000100", thread_ts=ROOT)
    assert await bot.services.jobs.join(15)

    status = str(slack.thread("C1", ROOT)[-1].blocks)
    assert "satisfied — pass 1 of 3" in status and ":white_check_mark: cause stated" in status
