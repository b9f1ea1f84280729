"""A real Alertmanager per test (sandbox/alertmanager.py), stopped at teardown whatever the
test did. `make test` fetches the binary first (scripts/fetch-alertmanager)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from sandbox.alertmanager import Alertmanager

StartAlertmanager = Callable[..., Awaitable[Alertmanager]]


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
