"""The part every simulator shares: an aiohttp server on 127.0.0.1, port chosen by the OS."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Self

from aiohttp import web


class SimulatorServer:
    """Base class: subclasses add routes in `routes()`; use as `async with Sim() as sim`."""

    def __init__(self) -> None:
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        # Set on stop so handlers that simulate a hang return and the server can shut down.
        self.stopping = asyncio.Event()

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    @property
    def url(self) -> str:
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://127.0.0.1:{self._port}"

    async def start(self) -> Self:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        self.stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
