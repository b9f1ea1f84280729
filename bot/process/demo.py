"""`tracegate demo`: whole incidents on embedded defaults, through the real server.

Only the outside world is simulated (Slack, Tempo, Kubernetes, Prometheus, Loki and, without
GOOGLE_API_KEY, Gemini); the bot is the one `tracegate serve` runs. The Slack threads are
printed as a transcript and their Block Kit JSON written to a folder.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import aiohttp
import fakeredis
import redis.asyncio as aioredis
from langgraph.checkpoint.memory import InMemorySaver

from bot.outbound.transcript import render_blocks, render_message
from bot.process.server import RunningBot, running_bot
from bot.process.settings import Settings
from sandbox import GeminiSimulator, TempoSimulator
from sandbox.kubernetes import KubernetesSimulator, write_kubeconfig
from sandbox.loki import LokiSimulator
from sandbox.plays import (
    AGENT,
    GRADER,
    JUDGE,
    Play,
    alert_fires_play,
    bad_deploy_play,
    db_overload_play,
    hallucination_play,
    oom_loop_play,
    replay_agent,
    replay_grader,
    replay_judge,
)
from sandbox.prometheus import PrometheusSimulator
from sandbox.scenarios import (
    OomLoop,
    Scenario,
    bad_deploy,
    db_overload,
    load_checkout_errors,
    load_oom_loop,
)
from sandbox.slack import SlackDriver, SlackSimulator

SECRET = "demo-signing-secret"
TEAM = "TDEMO"
ONCALL, LEAD = "U_ONCALL", "U_LEAD"


@dataclass
class World:
    """The simulated outside world, and what the demo saw of the Slack side."""

    slack: SlackSimulator
    tempo: TempoSimulator
    kube: KubernetesSimulator
    gemini: GeminiSimulator | None
    checkout: Scenario
    orders: Scenario
    kubeconfig: Path
    prometheus: PrometheusSimulator
    loki: LokiSimulator
    oom: OomLoop


@asynccontextmanager
async def open_world(folder: Path, replay: bool) -> AsyncIterator[World]:
    checkout, orders = bad_deploy(), db_overload()
    kube = KubernetesSimulator()
    kube_images = [f"registry/payment-api:{v}" for v in ("1.40.2", "1.41.3", "1.42.0")]
    async with (
        SlackSimulator(bot_token="xoxb-demo") as slack,
        TempoSimulator(traces=checkout.traces + orders.traces) as tempo,
        kube,
        PrometheusSimulator() as prometheus,
        LokiSimulator() as loki,
    ):
        oom = load_oom_loop(kube, prometheus, loki)
        now = time.time()
        kube.add_deployment(
            "shop", "payment-api", kube_images, replicas=4, first_revision=40, now=now
        )
        load_checkout_errors(prometheus, now - PAYMENT_ROLLOUT_AGO_S, now)
        kube.add_deployment(
            "shop",
            "orders-api",
            ["registry/orders-api:2.6.0", "registry/orders-api:2.7.0"],
            replicas=6,
            first_revision=6,
            spacing_h=48,
        )
        kubeconfig = write_kubeconfig(folder / "kubeconfig.json", kube.url)
        async with GeminiSimulator() if replay else nullcontext() as gemini:
            yield World(
                slack, tempo, kube, gemini, checkout, orders, kubeconfig, prometheus, loki, oom
            )


ALERT_TOKEN = "demo-alert-token"  # the demo's Alertmanager and bot share it
ALERT_CHANNEL = "C0ALERTS"


def demo_settings(world: World, redis_url: str, api_key: str | None) -> Settings:
    values: dict[str, Any] = {
        "slack_bot_token": "xoxb-demo",
        "slack_signing_secret": SECRET,
        "slack_api_url": f"{world.slack.url}/api/",
        "tempo_url": world.tempo.url,
        "prometheus_url": world.prometheus.url,
        "loki_url": world.loki.url,
        "redis_url": redis_url,
        "redis_prefix": f"demo-{uuid.uuid4().hex[:12]}",  # runs never share keys
        "port": 0,
        "progress_interval": 0,
        "kubeconfig": str(world.kubeconfig),
        "actions_enabled": True,
        "action_approvers": LEAD,
        "grafana_url": "https://grafana.example.com",
        "alert_webhook_token": ALERT_TOKEN,
        "alert_channel": ALERT_CHANNEL,
    }
    if world.gemini is not None:
        values |= {
            "google_api_key": "replay",
            "gemini_base_url": world.gemini.url,
            "llm_model": f"google_genai:{AGENT}",
            "grader_model": f"google_genai:{GRADER}",
            "judge_model": f"google_genai:{JUDGE}",
            "llm_max_retries": 0,
        }
    else:
        values["google_api_key"] = api_key
    return Settings(_env_file=None, **values)


@dataclass
class Narrator:
    """Prints what a person in the channel would see, and keeps the Block Kit JSON."""

    out: TextIO
    folder: Path
    seen: dict[tuple[str, str], int] = field(default_factory=dict)
    ephemeral_seen: int = 0
    written: int = 0

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def user(self, who: str, text: str) -> None:
        self.say(f"👤 {who}: {text}")

    def clear(self) -> None:
        """Remove an earlier run's Block Kit files, so the folder holds only this run's
        (only files the demo names: `--out` may point at a folder holding other things)."""
        for old in [
            *self.folder.glob("*/[0-9][0-9]-*.json"),
            *self.folder.glob("*/[0-9][0-9]-chart-*.png"),
        ]:
            old.unlink()
        for scene in self.folder.glob("*/"):
            if not any(scene.iterdir()):
                scene.rmdir()

    def _next_file(self, scenario: str, name: str) -> Path:
        """The scene's next numbered file (`01-message.json`, `02-chart-metric.png`, ...)."""
        self.written += 1
        path = self.folder / scenario / f"{self.written:02d}-{name}"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _keep(self, scenario: str, kind: str, blocks: list[dict[str, Any]]) -> None:
        if blocks:
            self._next_file(scenario, f"{kind}.json").write_text(
                json.dumps({"blocks": blocks}, indent=2)
            )

    def _keep_files(
        self, slack: SlackSimulator, scenario: str, files: list[dict[str, Any]]
    ) -> None:
        """A chart the bot uploaded: named in the narration, its PNG kept beside the JSON."""
        for shared in files:
            upload = slack.uploads[shared["id"]]
            kind = upload.filename.split("-", 1)[0]
            self._next_file(scenario, f"chart-{kind}.png").write_bytes(upload.data or b"")
            self.say(f"🤖 tracegate uploaded a chart: {shared['title']}")

    def show(self, slack: SlackSimulator, channel: str, root: str, scenario: str) -> None:
        """Messages posted or changed since the last look."""
        for message in slack.thread(channel, root):
            key = (channel, message.ts)
            if self.seen.get(key) == message.edits:
                continue
            verb = "🤖 tracegate" if key not in self.seen else "🤖 tracegate (updated)"
            self.seen[key] = message.edits
            if message.files:
                self._keep_files(slack, scenario, message.files)
                continue
            tasks = list(message.tasks().values())
            self.say(render_message(verb, message.text, message.blocks, message.edits, tasks))
            self._keep(scenario, "message", message.blocks)
        for note in slack.ephemeral[self.ephemeral_seen :]:
            self.say(
                f"🔒 only @{note['user']} sees:\n"
                + render_blocks(note.get("blocks") or [], note["text"])
            )
            self._keep(scenario, "ephemeral", note.get("blocks") or [])
        self.ephemeral_seen = len(slack.ephemeral)


@dataclass
class Stage:
    """One incident being played: the bot, Slack's side, and the narration."""

    world: World
    bot: RunningBot
    driver: SlackDriver
    narrator: Narrator
    name: str
    channel: str
    root: str = ""
    _clock: int = 0

    def _ts(self) -> str:
        self._clock += 1
        return f"{int(time.time())}.{self._clock:06d}"

    async def settle(self, timeout_s: float = 120) -> None:
        """Wait until every turn asked so far is finished: the job queue alone can look
        empty for a moment while the queue's sweep retries a job."""
        services = self.bot.services
        try:
            async with asyncio.timeout(timeout_s):
                await services.jobs.join()
                while await services.turns.unfinished(time.time()):
                    await asyncio.sleep(0.05)
                    await services.jobs.join()
        except TimeoutError:
            self.narrator.say(f"(still working after {timeout_s:.0f} s; the demo goes on)")
        self.narrator.show(self.world.slack, self.channel, self.root, self.name)

    async def ask(self, text: str, who: str = ONCALL) -> None:
        self.narrator.user(who, f"@tracegate {text}" if not self.root else text)
        ts = self._ts()
        if not self.root:
            self.root = ts
            await self.driver.mention(text, user=who, channel=self.channel, ts=ts)
        else:
            await self.driver.reply(
                text, user=who, channel=self.channel, ts=ts, thread_ts=self.root
            )
        await self.settle()

    def buttons(self, action_id: str) -> list[tuple[str, str]]:
        """(value, message ts) of each `action_id` button in the thread, oldest first: a
        pending card's request id and ts for `approve_action`."""
        return [
            (element["value"], message.ts)
            for message in self.world.slack.thread(self.channel, self.root)
            for block in message.blocks
            if block.get("type") == "actions"
            for element in block["elements"]
            if element.get("action_id") == action_id
        ]

    async def click(self, action_id: str, value: str, message_ts: str, who: str) -> None:
        label = {"approve_action": "Approve", "reject_action": "Reject", "show_steps": "Steps"}
        self.narrator.user(who, f"clicks [{label[action_id]}]")
        await self.driver.click(
            action_id, value, user=who, channel=self.channel, message_ts=message_ts
        )
        await self.settle()

    async def steps(self, who: str = ONCALL) -> None:
        """Click Steps under the latest answer."""
        if buttons := self.buttons("show_steps"):
            await self.click("show_steps", *buttons[-1], who)

    async def slash(self, text: str, who: str = ONCALL) -> None:
        self.narrator.user(who, f"/rubric {text}")
        await self.driver.slash("/rubric", text, user=who, channel=self.channel)
        await self.settle()


def _script(world: World, play: Play) -> None:
    """The scene's Gemini replies, when Gemini is replayed (a real one needs none)."""
    if world.gemini is None:
        return
    world.gemini.script(*play.agent, model=AGENT)
    world.gemini.script(*play.grader, model=GRADER)
    world.gemini.script(*play.judge, model=JUDGE)


Scene = Callable[[Stage], Awaitable[None]]
SCENES: list[tuple[str, str, str, Scene]] = []  # name, channel, title, scene: in playing order


def scene(name: str, channel: str, title: str) -> Callable[[Scene], Scene]:
    def add(played: Scene) -> Scene:
        SCENES.append((name, channel, title, played))
        return played

    return add


PAYMENT_ROLLOUT_AGO_S = 3600  # revision 42 (KubernetesSimulator: one hour a revision)
ALERT_AFTER_ROLLOUT_S = 180  # "5xx above 5% for 2 minutes": it fires soon after


def _firing(scenario: Scenario) -> dict[str, Any]:
    """The notification Alertmanager sends when checkout's error rate alert fires."""
    at = time.time() - PAYMENT_ROLLOUT_AGO_S + ALERT_AFTER_ROLLOUT_S
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
    labels = {
        "alertname": "CheckoutErrorRate",
        "severity": "critical",
        "service": "checkout",
        "namespace": "shop",
    }
    return {
        "version": "4",
        "groupKey": '{}:{alertname="CheckoutErrorRate"}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "tracegate",
        "groupLabels": {"alertname": "CheckoutErrorRate"},
        "commonLabels": labels,
        "commonAnnotations": {"summary": "checkout: 5xx above 5% for 2 minutes"},
        "externalURL": "https://alertmanager.example.com",
        "alerts": [
            {
                "status": "firing",
                "labels": labels,
                "annotations": {"summary": "checkout: 5xx above 5% for 2 minutes"},
                "startsAt": started,
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "https://prometheus.example.com/graph?g0.expr=checkout_5xx",
                "fingerprint": "c0ffee0123456789",
            }
        ],
    }


@scene(
    "alert-fires",
    ALERT_CHANNEL,
    "an alert fires and the answer is in its thread before anyone asks",
)
async def alert_scene(stage: Stage) -> None:
    """Alertmanager calls the webhook; the answer is in the alert's thread before anyone
    asks."""
    _script(stage.world, alert_fires_play(stage.world.checkout))
    stage.world.slack.channels.add(stage.channel)
    stage.narrator.say("🔔 Alertmanager → POST /alerts/alertmanager (CheckoutErrorRate, critical)")
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{stage.bot.url}/alerts/alertmanager",
            json=_firing(stage.world.checkout),
            headers={"Authorization": f"Bearer {ALERT_TOKEN}"},
        ) as response,
    ):
        stage.narrator.say(f"   tracegate answers {response.status}; nobody has asked anything")
    await stage.bot.services.jobs.join(30)  # the alert's message is posted
    posted = [
        m
        for m in stage.world.slack.messages.values()
        if m.channel == stage.channel and m.thread_ts is None
    ]
    stage.root = posted[0].ts if posted else ""
    await stage.settle()


@scene("bad-deploy", "C0CHECKOUT", "checkout returns 5xx after payment-api revision 42")
async def bad_deploy_scene(stage: Stage) -> None:
    _script(stage.world, bad_deploy_play(stage.world.checkout))
    await stage.ask("checkout is throwing 500s since a few minutes, why?")
    await stage.ask("can we roll payment-api back?")
    for request_id, card_ts in stage.buttons("approve_action"):
        await stage.click("approve_action", request_id, card_ts, LEAD)
    permalink = f"https://demo.slack.com/archives/{stage.channel}/p{stage.root.replace('.', '')}"
    await stage.slash(f"status {permalink}")


@scene("not-a-deploy", "C0ORDERS", "orders-api fails because Postgres is out of connections")
async def db_overload_scene(stage: Stage) -> None:
    _script(stage.world, db_overload_play(stage.world.orders))
    await stage.ask("orders-api is returning 503s, roll it back?")


@scene(
    "oom-loop",
    "C0PAYOPS",
    "payment-api is OOM-killed in a loop after a deploy: in pods, events and memory, not in traces",
)
async def oom_loop_scene(stage: Stage) -> None:
    _script(stage.world, oom_loop_play(stage.world.oom))
    await stage.ask("payment-api in payments has been failing since the last deploy, why?")


@scene(
    "hallucination",
    "C0PAYMENTS",
    "the model cites a trace that does not exist, then a version no tool showed",
)
async def hallucination_scene(stage: Stage) -> None:
    _script(stage.world, hallucination_play(stage.world.checkout))
    await stage.ask("which trace shows the payment failure?")
    await stage.steps()  # how the guard sent the first draft back


async def play(
    redis_url: str | None,
    out: TextIO,
    folder: Path,
    *,
    api_key: str | None = None,
    scenes: list[str] | None = None,
    interactive: bool = False,
) -> tuple[World, Narrator]:
    """Play the scenarios (or an interactive session); returns what happened, for tests.

    Without `redis_url` the bot runs on an embedded store: fakeredis for its own keys and
    LangGraph's in-memory checkpointer; nothing outlives the demo.
    """
    narrator = Narrator(out, folder)
    narrator.clear()
    redis: aioredis.Redis | None = None
    saver: InMemorySaver | None = None
    if redis_url is None:
        redis, saver = fakeredis.FakeAsyncRedis(), InMemorySaver()
        store = "embedded in-memory store (no Redis found; nothing persists after the demo)"
    else:
        store = f"Redis Stack at {redis_url}"
    with tempfile.TemporaryDirectory() as scratch:
        async with open_world(Path(scratch), replay=api_key is None) as world:
            settings = demo_settings(world, redis_url or "redis://embedded.invalid/0", api_key)
            mode = (
                "Gemini replies are a scripted replay of each scenario (no GOOGLE_API_KEY set)"
                if world.gemini is not None
                else f"Gemini is real ({settings.model.model}); "
                "Slack, Tempo, Kubernetes, Prometheus and Loki are simulated"
            )
            narrator.say(f"tracegate demo — {mode}.")
            narrator.say(f"Conversations: {store}. Block Kit JSON: {folder}/")
            async with running_bot(settings, host="127.0.0.1", redis=redis, saver=saver) as bot:
                # A team of the run's own: its threads' checkpoints (keyed by thread, not by
                # REDIS_PREFIX) never meet those of another run on the same Redis.
                team = f"{TEAM}{uuid.uuid4().hex[:6].upper()}"
                driver = SlackDriver(bot.url, SECRET, team=team, slack=world.slack)
                if interactive:
                    if world.gemini is not None:
                        world.gemini.script(*[replay_agent] * 500, model=AGENT)
                        world.gemini.script(*[replay_grader] * 500, model=GRADER)
                        world.gemini.script(*[replay_judge] * 100, model=JUDGE)
                    await interact(Stage(world, bot, driver, narrator, "interactive", "C0DEMO"))
                    return world, narrator
                for name, channel, title, scene in SCENES:
                    if scenes and name not in scenes:
                        continue
                    narrator.say(f"\n━━━ {name}: {title} (#{channel.lower()}) ━━━")
                    await scene(Stage(world, bot, driver, narrator, name, channel))
            kube = world.kube.deployments[("shop", "payment-api")]
            image = kube["spec"]["template"]["spec"]["containers"][0]["image"]
            narrator.say(f"\nCluster now: shop/payment-api runs {image}.")
            return world, narrator


def typed_lines() -> asyncio.Queue[str]:
    """Lines from stdin ("" at its end), read by a daemon thread: a thread of the loop's
    executor blocked in `readline` would keep Ctrl-C from ending the demo."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str] = asyncio.Queue()

    def read() -> None:
        line = None
        while line != "":
            line = sys.stdin.readline()
            try:
                loop.call_soon_threadsafe(lines.put_nowait, line)
            except RuntimeError:  # the demo has ended; nobody reads on
                return

    threading.Thread(target=read, name="demo-stdin", daemon=True).start()
    return lines


async def interact(stage: Stage) -> None:
    """Questions typed at the prompt; `approve`, `reject`, `/rubric …`, `quit`."""
    stage.narrator.say(
        "Type a question for @tracegate. `approve` / `reject` act on the newest card, "
        "`/rubric …` runs the command, `quit` ends."
    )
    lines = typed_lines()
    while True:
        line = (await lines.get()).strip()
        if not line or line in ("quit", "exit"):
            return
        if line.startswith("/rubric"):
            await stage.slash(line.removeprefix("/rubric").strip())
        elif line in ("approve", "reject"):
            cards = stage.buttons("approve_action")
            if not cards:
                stage.narrator.say("(no card is waiting for approval)")
                continue
            request_id, card_ts = cards[-1]
            await stage.click(f"{line}_action", request_id, card_ts, LEAD)
        else:
            await stage.ask(line)
