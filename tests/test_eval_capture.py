"""`tracegate eval capture`: a thread the real bot answered (Slack, Tempo, Kubernetes and
Gemini simulators, real Redis) becomes a redacted scenario the eval can run."""

import json
import time
import uuid
from pathlib import Path

import pytest

from bot.process.settings import Settings
from evals.capture import capture, capture_negative, parse_link, redact
from evals.run import run_once
from evals.spec import ScenarioError, load
from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.plays import look_into
from sandbox.scenarios import Scenario
from sandbox.slack import SlackDriver, SlackSimulator
from tests.slack_fixtures import SECRET, BotFactory, settled

ROOT = "1700000000.000100"
TEAM = "T1"  # the workspace auth.test names
SECRETS = ("alice@example.com", "xoxb-1234-abcdef", "10.2.3.4", "bob@corp.example")


def _bot_settings(
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    redis_url: str,
    prefix: str,
    kubeconfig: Path | None = None,
) -> Settings:
    return Settings(
        _env_file=None,
        slack_bot_token="xoxb-sandbox",
        slack_api_url=f"{slack.url}/api/",
        tempo_url=tempo.url,
        redis_url=redis_url,
        redis_prefix=prefix,
        kubeconfig=str(kubeconfig) if kubeconfig else None,
        google_api_key="sandbox-key",
        gemini_base_url=gemini.url,
    )


def test_a_link_to_a_reply_names_its_thread() -> None:
    link = "https://acme.slack.com/archives/C0PAY/p1700000123000200?thread_ts=1700000000.000100&cid=C0PAY"
    assert parse_link(link).thread_ts == "1700000000.000100"
    assert parse_link("https://acme.slack.com/archives/C0PAY/p1700000000000100").channel == "C0PAY"
    with pytest.raises(ValueError, match="not a Slack message link"):
        parse_link("https://example.com/thread/1")


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("token xoxb-1234-abcdef and xapp-1-A0-99", "token [token] and [token]"),
        (
            "Authorization: Bearer eyJhbGciOi.eyJzdWIiOiIx.c2lnbmF0dXJl",
            "Authorization: Bearer [token]",
        ),
        ("password=hunter2, api_key: AIza" + "x" * 35, "password=[token], api_key: [token]"),
        ("mail alice@example.com", "mail [email]"),
        ("from 10.2.3.4:5432 and fe80::1ff:fe23:4567:890a", "from [ip]:5432 and [ip]"),
        ("payment-api 1.42.0 at 14:02:11 on node-b1", "payment-api 1.42.0 at 14:02:11 on node-b1"),
    ],
)
def test_redaction_removes_secrets_and_addresses_and_keeps_the_evidence(
    text: str, kept: str
) -> None:
    assert redact(text) == kept


async def test_an_answered_thread_becomes_a_redacted_scenario_the_eval_can_run(
    bot_for: BotFactory,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    scenario: Scenario,
    redis_url: str,
    tmp_path: Path,
) -> None:
    prefix = f"capture-{uuid.uuid4().hex[:8]}"
    failing = scenario.error_trace_ids[2]
    gemini.script(
        *look_into("payment-api", failing),
        Reply.text(f"payment-api 1.42.0 throws NullPointerException; see {failing}."),
    )
    slack.post_as(
        "C1", f"checkout broke; ping {SECRETS[0]}, token {SECRETS[1]}", ts=ROOT, user="U_SRE"
    )
    async with bot_for(redis_prefix=prefix) as bot:
        driver = SlackDriver(bot.url, SECRET, team=TEAM, slack=slack)
        await driver.mention(
            f"why? db at {SECRETS[2]}, mail {SECRETS[3]}", ts="1700000000.000200", thread_ts=ROOT
        )
        await settled(bot)
    # The bot's own settings: its Slack, Redis prefix, Tempo and kubeconfig (bot_for's).
    settings = _bot_settings(slack, gemini, tempo, redis_url, prefix, tmp_path / "kubeconfig")

    path = await capture(
        settings, f"https://t.slack.com/archives/C1/p{ROOT.replace('.', '')}", "cap", tmp_path
    )

    written = path.read_text()
    assert [s for s in SECRETS if s in written] == []
    document = json.loads(written)
    assert document["question"] == "why? db at [ip], mail [email]"
    recorded = document["recorded"]
    assert recorded["thread"][0]["text"] == "checkout broke; ping [email], token [token]"
    assert [c["tool"] for c in recorded["tool_calls"]] == [
        "query_tempo_traces",
        "get_trace",
        "get_rollout_history",
    ]
    assert failing in {t["trace_id"] for t in recorded["traces"]}
    assert [d["name"] for d in recorded["deployments"]] == ["payment-api"]
    assert "NullPointerException" in recorded["answer"]
    with pytest.raises(ScenarioError, match="captured scenario without its truth"):
        load("cap", tmp_path)

    document["truth"] = {
        "root_cause": ["payment-api", "1.42.0"],
        "chain": ["payment-api", "checkout"],
        "evidence": ["NullPointerException in ChargeHandler.applyDiscount"],
        "action": {"action": "rollout_undo", "deployment": "payment-api"},
    }
    path.write_text(json.dumps(document))
    record = await run_once(load("cap", tmp_path), 1, time.time(), redis_url=redis_url)
    assert record.score["f1"] == 1.0, record.answer
    assert all(record.reachable.values()) and record.harmed is False


async def test_capture_negative_takes_each_thread_with_a_thumbs_down_once(
    bot_for: BotFactory,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    redis_url: str,
    tmp_path: Path,
    scenario: Scenario,
) -> None:
    prefix = f"capture-{uuid.uuid4().hex[:8]}"
    # A capture needs an investigation (tool calls) in the thread's own checkpoint: before
    # checkpoints were under REDIS_PREFIX, this test found the previous test's, whose
    # thread had the same id.
    gemini.script(
        *look_into("payment-api", scenario.error_trace_ids[2]),
        Reply.text("It looks like a bad deploy."),
        Reply.text("Also a deploy."),
    )
    async with bot_for(redis_prefix=prefix) as bot:
        driver = SlackDriver(bot.url, SECRET, team=TEAM, slack=slack)
        for root in (ROOT, "1700000100.000100"):
            await driver.mention("why?", ts=root)
            await settled(bot)
        (answer,) = slack.thread("C1", ROOT)
        (block,) = [b for b in answer.blocks if b["type"] == "context_actions"]
        bad = block["elements"][0]["negative_button"]["value"]
        await driver.feedback(bad, user="U_ONCALL", channel="C1", message_ts=answer.ts)
        await settled(bot)
    settings = _bot_settings(slack, gemini, tempo, redis_url, prefix)

    first = await capture_negative(settings, tmp_path)
    again = await capture_negative(settings, tmp_path)

    assert [p.parent.name for p in first] == [f"feedback-c1-{ROOT.replace('.', '')}"]
    assert again == []
    assert json.loads(first[0].read_text())["recorded"]["answer"] == "It looks like a bad deploy."
