"""The Slack bot end to end: the real server over HTTP, signed requests, every simulator."""

import time

from bot.process.server import RunningBot
from sandbox import GeminiSimulator, Reply
from sandbox.scenarios import Scenario
from sandbox.slack import SlackDriver, SlackSimulator
from tests.slack_fixtures import GRAFANA, BotFactory, settled

ROOT = "1700000000.000100"  # threads stay apart across tests: each test has its own team id


async def test_a_mention_gets_a_placeholder_then_the_answer_in_the_thread(
    bot: RunningBot,
    driver: SlackDriver,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    scenario: Scenario,
) -> None:
    real = scenario.error_trace_ids[0]
    gemini.script(
        Reply.call("query_tempo_traces", traceql="{ status = error }"),
        Reply.text(f"payment-api 1.42.0 throws NullPointerException; see {real}."),
    )
    status, _ = await driver.mention("checkout is throwing 500s, why?", ts=ROOT)
    await settled(bot)

    assert status == 200
    (answer,) = slack.thread("C1", ROOT)
    first_post = slack.calls_to("chat.postMessage")[0].args
    assert first_post["thread_ts"] == ROOT and "Looking into it" in first_post["text"]
    assert answer.edits >= 2  # progress, then the final answer
    body = answer.blocks[0]["text"]["text"]
    assert f"{GRAFANA}/explore?schemaVersion=1&panes=" in body and f"|{real}>" in body
    footer = [b["elements"][0]["text"] for b in answer.blocks if b["type"] == "context"]
    assert any("traces: 1 verified, 0 unverified, 0 removed" in text for text in footer)


async def test_an_answer_s_slack_calls_share_open_connections(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.text("one answer"))
    await driver.mention("why?", ts=ROOT)
    await settled(bot)

    turn_calls = [c for c in slack.calls if c.method != "auth.test"]
    # Reaction, placeholder, progress, answer: over HTTPS each new connection is a TLS
    # handshake.
    assert len(turn_calls) >= 4
    assert len({c.connection for c in turn_calls}) <= 2


async def test_an_event_delivered_three_times_is_answered_once(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.text("one answer"), Reply.text("a second answer that must not happen"))
    for retry in range(3):
        status, _ = await driver.mention("why?", ts=ROOT, event_id="EvSame", retry=retry)
        assert status == 200
    await settled(bot)

    assert len(gemini.requests) == 1
    assert len(slack.thread("C1", ROOT)) == 1


async def test_a_bad_signature_or_a_stale_timestamp_is_refused_and_nothing_runs(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    forged = SlackDriver(bot.url, "not-the-secret", team=driver.team)
    status_forged, _ = await forged.mention("why?", ts=ROOT)
    status_stale, _ = await driver.event(
        {"type": "app_mention", "user": "U1", "text": "<@UBOT> why?", "ts": ROOT, "channel": "C1"},
        timestamp=int(time.time()) - 6 * 60,
    )
    await settled(bot)

    assert (status_forged, status_stale) == (401, 401)
    assert gemini.requests == []
    assert slack.calls_to("chat.postMessage") == []


async def test_a_reply_in_the_thread_continues_the_conversation_without_a_mention(
    bot: RunningBot, driver: SlackDriver, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.text("The deploy of payment-api."), Reply.text("Roll it back."))
    await driver.mention("why are checkouts failing?", ts=ROOT)
    await settled(bot)
    await driver.reply("what should we do?", ts="1700000100.000100", thread_ts=ROOT)
    await settled(bot)

    follow_up = gemini.requests[1].text()
    assert "why are checkouts failing?" in follow_up and "The deploy of payment-api." in follow_up


async def test_replies_in_threads_the_bot_is_not_in_are_ignored(
    bot: RunningBot, driver: SlackDriver, gemini: GeminiSimulator
) -> None:
    await driver.reply("chatter", ts="1700000200.000100", thread_ts="1699999999.000100")
    await settled(bot)
    assert gemini.requests == []


async def test_two_mentions_in_one_thread_are_both_answered_in_order(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    first = Reply(parts=({"text": "first answer"},), delay_s=0.3)
    gemini.script(first, Reply.text("second answer"))
    await driver.mention("first question", ts=ROOT)
    await gemini.wait_for_request("gemini-3.8-flash")  # the first holds the thread now
    await driver.mention("second question", ts="1700000001.000100", thread_ts=ROOT)
    await settled(bot)

    first_post, second_post = slack.calls_to("chat.postMessage")
    assert "Looking into it" in first_post.args["text"]
    assert "Queued behind the question before yours" in second_post.args["text"]
    answers = [m.blocks[0]["text"]["text"] for m in slack.thread("C1", ROOT)]
    assert answers == ["first answer", "second answer"]
    second_request = gemini.requests[1].text()
    assert "first question" in second_request and "first answer" in second_request


async def test_a_failure_ends_as_a_short_plain_message(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.error(500, "internal detail that must not leak"))
    await driver.mention("why?", ts=ROOT)
    await settled(bot)

    (message,) = slack.thread("C1", ROOT)
    assert message.text.startswith(":x: The language model did not answer. Try again")
    assert "internal detail" not in message.text and "Traceback" not in message.text


async def test_a_429_on_post_message_is_retried_and_the_message_arrives_once(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.rate_limit("chat.postMessage", times=1, retry_after=1)
    gemini.script(Reply.text("answer"))
    await driver.mention("why?", ts=ROOT)
    await settled(bot)

    assert len(slack.calls_to("chat.postMessage")) == 2  # the 429, then the retry
    assert len(slack.thread("C1", ROOT)) == 1


async def test_a_20000_character_answer_is_posted_as_valid_block_kit(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    long_answer = "\n\n".join(f"Paragraph {i}: " + "evidence " * 120 for i in range(20))
    assert len(long_answer) > 20_000
    gemini.script(Reply.text(long_answer))
    await driver.mention("explain everything", ts=ROOT)
    await settled(bot)

    (message,) = slack.thread("C1", ROOT)
    sections = [b["text"]["text"] for b in message.blocks if b["type"] == "section"]
    assert len(sections) > 6 and all(len(s) <= 3000 for s in sections)
    assert "".join(sections).count("Paragraph") == 20


async def test_model_output_cannot_ping_the_channel(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.text("<!channel> everyone look <https://evil.example|here>"))
    await driver.mention("why?", ts=ROOT)
    await settled(bot)

    body = slack.thread("C1", ROOT)[0].blocks[0]["text"]["text"]
    assert "<!channel>" not in body and "&lt;!channel&gt;" in body


async def test_the_steps_button_shows_the_run_to_whoever_clicks(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(
        Reply.call("query_tempo_traces", traceql="{ status = error }"), Reply.text("done")
    )
    await driver.mention("why?", ts=ROOT)
    await settled(bot)
    (answer,) = slack.thread("C1", ROOT)
    steps_button = answer.blocks[-1]["elements"][0]

    await driver.click(
        "show_steps", steps_button["value"], user="U_CURIOUS", channel="C1", message_ts=answer.ts
    )
    (shown,) = slack.ephemeral
    text = shown["blocks"][0]["text"]["text"]
    assert shown["user"] == "U_CURIOUS"
    assert "tool query_tempo_traces started" in text and "trace guard:" in text


async def test_a_missing_signing_secret_stops_start_up_naming_it(bot_for: BotFactory) -> None:
    from bot.process.settings import SettingsError

    try:
        async with bot_for(slack_signing_secret=None):
            raise AssertionError("the bot must not start without SLACK_SIGNING_SECRET")
    except SettingsError as exc:
        assert "SLACK_SIGNING_SECRET: not set" in str(exc)


async def test_with_an_app_token_events_arrive_over_socket_mode(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.text("answered over Socket Mode"))
    async with bot_for(slack_app_token="xapp-sandbox", slack_signing_secret=None) as running:
        driver = SlackDriver(
            running.url, "no-signatures-in-socket-mode", team="TSOCKET", slack=slack
        )
        mention = {
            "type": "app_mention",
            "user": "U_ONCALL",
            "text": "<@UBOT> why?",
            "ts": ROOT,
            "channel": "C1",
            "event_ts": ROOT,
        }
        ack = await slack.socket_send("events_api", driver.envelope(mention))
        await settled(running)

    (answer,) = slack.thread("C1", ROOT)
    assert ack["envelope_id"]
    assert answer.blocks[0]["text"]["text"] == "answered over Socket Mode"
    assert slack.calls_to("apps.connections.open")


async def _answered(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, channel: str, root: str
) -> tuple[str, str]:
    """A thread answered in `channel`: (its Steps button's value, the answer's ts)."""
    await driver.mention("why?", ts=root, channel=channel)
    await settled(bot)
    (answer,) = slack.thread(channel, root)
    return str(answer.blocks[-1]["elements"][0]["value"]), answer.ts


async def test_steps_of_an_answer_in_another_channel_are_not_shown(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.text("Private detail: card-gateway creds rotated"), Reply.text("ok"))
    private_steps, _ = await _answered(bot, driver, slack, "CPRIVATE", ROOT)
    _, here = await _answered(bot, driver, slack, "C1", ROOT)

    await driver.click("show_steps", private_steps, user="U_CURIOUS", channel="C1", message_ts=here)
    await settled(bot)
    (shown,) = slack.ephemeral
    assert shown["blocks"] == [
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": "That answer is in another channel: ask in that channel.",
            },
        }
    ]


async def test_steps_are_shown_only_under_the_answer_they_belong_to(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.text("first"), Reply.text("second"))
    first_steps, _ = await _answered(bot, driver, slack, "C1", ROOT)
    _, second_answer = await _answered(bot, driver, slack, "C1", "1700000500.000100")

    await driver.click(
        "show_steps", first_steps, user="U_CURIOUS", channel="C1", message_ts=second_answer
    )
    await settled(bot)
    (shown,) = slack.ephemeral
    assert "belong to another answer" in shown["text"] + str(shown["blocks"])
    assert "trace guard" not in str(shown["blocks"])
