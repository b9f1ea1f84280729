"""Listener work that runs after the ack (clicks, commands), kept so a shutdown waits for it.

Bolt keeps no reference to the tasks it starts; these are kept, named, and drained.
`join` also waits for the turns to be answered, counting those left.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)


class Jobs:
    def __init__(self, queued_turns: Callable[[], Awaitable[int]]) -> None:
        self._running: set[asyncio.Task[Any]] = set()
        self._queued_turns = queued_turns

    def submit(self, job: Coroutine[Any, Any, object], name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(job, name=name)
        self._running.add(task)
        task.add_done_callback(self._done)
        return task

    def adopt_current(self) -> None:
        """Track the running task (a Bolt listener, which Bolt itself does not keep).

        Call it before the listener's first await: the task is then registered before
        Slack (or a test) can see the acknowledgement.
        """
        task = asyncio.current_task()
        if task is not None and task not in self._running:
            self._running.add(task)
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("job %s failed", task.get_name(), exc_info=task.exception())

    @property
    def running(self) -> int:
        return len(self._running)

    async def join(self, timeout_s: float | None = None, *, turns: bool = True) -> bool:
        """Wait for every job (also ones submitted meanwhile) and, with `turns`, every
        queued turn; False on timeout."""
        try:
            async with asyncio.timeout(timeout_s):
                while self._running or (turns and await self._queued_turns()):
                    if self._running:
                        await asyncio.gather(*self._running, return_exceptions=True)
                    else:
                        await asyncio.sleep(0.05)
        except TimeoutError:
            return False
        return True
