"""A real Alertmanager per test (sandbox/alertmanager.py), and a real Prometheus that sends
it alerts (sandbox/prometheus_server.py), stopped at teardown whatever the test did.
`make test` fetches the binaries first (scripts/fetch-alertmanager)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web

from sandbox.alertmanager import Alertmanager
from sandbox.prometheus_server import AlertRule, PrometheusServer

StartAlertmanager = Callable[..., Awaitable[Alertmanager]]
StartPrometheus = Callable[..., Awaitable[PrometheusServer]]


@dataclass
class Notification:
    at: float  # monotonic
    authorization: str | None
    body: dict[str, Any]
    answered: int


class WebhookReceiver:
    """A webhook on 127.0.0.1 that records each POST and answers the next status of
    `statuses` (200 once they are used up), or 401 to a wrong bearer token when `token` is
    set."""

    def __init__(self, statuses: list[int] | None = None, token: str | None = None) -> None:
        self.statuses = list(statuses or [])
        self.token = token
        self.notifications: list[Notification] = []
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def _hook(self, request: web.Request) -> web.Response:
        authorization = request.headers.get("Authorization")
        if self.token is not None and authorization != f"Bearer {self.token}":
            status = 401
        else:
            status = self.statuses.pop(0) if self.statuses else 200
        body = await request.json()
        self.notifications.append(Notification(time.monotonic(), authorization, body, status))
        return web.json_response({"status": status}, status=status)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/alerts/alertmanager", self._hook)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/alerts/alertmanager"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def received(self, count: int, timeout_s: float = 15.0) -> list[Notification]:
        """The first `count` notifications, once they are in (fails after `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        while len(self.notifications) < count:
            assert time.monotonic() < deadline, (
                f"{len(self.notifications)} of {count} notifications in {timeout_s}s: "
                f"{[n.body.get('groupKey') for n in self.notifications]}"
            )
            await asyncio.sleep(0.02)
        return self.notifications[:count]

    async def nothing_more(self, count: int, for_s: float) -> None:
        """Still only `count` notifications after `for_s` seconds."""
        await asyncio.sleep(for_s)
        extra = [(n.body["groupKey"], n.body["status"]) for n in self.notifications[count:]]
        assert not extra, f"unexpected notifications: {extra}"


async def started_receiver(
    statuses: list[int] | None = None, token: str | None = None
) -> WebhookReceiver:
    receiver = WebhookReceiver(statuses, token)
    await receiver.start()
    return receiver


@pytest.fixture
async def webhook_receiver() -> AsyncIterator[WebhookReceiver]:
    hook = await started_receiver()
    try:
        yield hook
    finally:
        await hook.stop()


@pytest.fixture
async def alertmanager_for() -> AsyncIterator[StartAlertmanager]:
    """`am = await alertmanager_for(webhook_url, token, group_wait=1, ...)`: a started
    Alertmanager whose one route sends every alert to `webhook_url` with
    `Authorization: Bearer <token>` (none when `token` is None); keyword arguments are
    `Alertmanager`'s (group_by, group_wait, group_interval, repeat_interval, ...). Each call
    starts a process of its own on its own loopback port; all are stopped at teardown."""
    started: list[Alertmanager] = []

    async def start(webhook_url: str, token: str | None, **timing: Any) -> Alertmanager:
        alertmanager = Alertmanager(webhook_url, token, **timing)
        started.append(alertmanager)
        return await alertmanager.start()

    try:
        yield start
    finally:
        for alertmanager in started:
            await alertmanager.close()


@pytest.fixture
async def prometheus_for() -> AsyncIterator[StartPrometheus]:
    """`prom = await prometheus_for(alertmanager_url, [target.address], [AlertRule(...)])`: a
    started Prometheus scraping the targets every second, evaluating the rules every second
    and sending their alerts to the Alertmanager; keyword arguments are `PrometheusServer`'s.
    All are stopped at teardown."""
    started: list[PrometheusServer] = []

    async def start(
        alertmanager_url: str, targets: list[str], rules: list[AlertRule], **options: Any
    ) -> PrometheusServer:
        prometheus = PrometheusServer(alertmanager_url, targets, rules, **options)
        started.append(prometheus)
        return await prometheus.start()

    try:
        yield start
    finally:
        for prometheus in started:
            await prometheus.close()
