"""A real server binary the tests run on loopback (Alertmanager, Prometheus): started in a
temporary directory of its own on a free port (again on another if that one was taken before
it bound it), ready when `GET /-/ready` answers 200, stopped with SIGTERM then SIGKILL after a
bound, its directory removed. Subclasses say how to write its configuration and start it."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import aiohttp

from sandbox.fleet import free_port

START_ATTEMPTS = 3


class LoopbackDaemon:
    name = "the daemon"  # for messages: "Alertmanager", "Prometheus"
    log_name = "daemon.log"

    def __init__(self, ready_timeout_s: float, stop_timeout_s: float) -> None:
        self.ready_timeout_s = ready_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.dir: Path | None = None
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError(f"{self.name} is not started")
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        if self.dir is None:
            raise RuntimeError(f"{self.name} is not started")
        return self.dir / self.log_name

    def log(self) -> str:
        """What it logged so far."""
        if self.dir is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")

    def prepare(self) -> Path:
        """Write its configuration into `self.dir`; the file to start it with."""
        raise NotImplementedError

    def spawn(self, config: Path) -> subprocess.Popen[bytes]:
        """Start it on `self.port` with `config`, its output into `self.log_path`."""
        raise NotImplementedError

    def run(self, command: list[str], cwd: Path) -> subprocess.Popen[bytes]:
        with self.log_path.open("ab") as log:
            return subprocess.Popen(
                command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )

    async def start(self) -> Self:
        self.dir = Path(tempfile.mkdtemp(prefix=f"tracegate-{self.name.lower()}-"))
        try:
            config = self.prepare()
            # A port picked here may be taken by another test's process before this one binds
            # it: then it exits at once ("address already in use") and is started again.
            for attempt in range(1, START_ATTEMPTS + 1):
                self.port = free_port()
                self.process = self.spawn(config)
                if await self._ready():
                    break
                if attempt == START_ATTEMPTS:
                    raise RuntimeError(f"{self.name}: its port was taken {attempt} times")
        except BaseException:
            await self.close()
            raise
        return self

    async def _ready(self) -> bool:
        """True once ready; False when its port was taken (start again); raises otherwise."""
        process = self.process
        assert process is not None
        deadline = time.monotonic() + self.ready_timeout_s
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while time.monotonic() < deadline:
                if process.poll() is not None:
                    log = self.log()
                    if "address already in use" in log:
                        return False
                    raise RuntimeError(
                        f"{self.name} exited ({process.returncode}) at start:\n{log}"
                    )
                try:
                    async with session.get(f"{self.url}/-/ready") as response:
                        if response.status == 200:
                            return True
                except (aiohttp.ClientError, TimeoutError):
                    pass
                await asyncio.sleep(0.05)
        raise TimeoutError(f"{self.name} not ready in {self.ready_timeout_s}s:\n{self.log()}")

    async def close(self) -> None:
        """SIGTERM, SIGKILL after `stop_timeout_s`; then its directory is removed."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(process.wait, self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                await asyncio.to_thread(process.wait, self.stop_timeout_s)
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
