"""tracegate processes forked from an interpreter that has already imported tracegate.

A fresh `python -m bot.process.cli worker` spends about 4 s of CPU importing its libraries
(google-genai's types, langsmith, kubernetes_asyncio, langgraph) before it runs a line of
its own, and the tests start over a hundred such processes. `forked()` starts the same
command from multiprocessing's fork server instead, whose one interpreter imported them
once (`PRELOAD`). The process is as real: its own pid, killed by SIGKILL, stopped by
SIGSTOP, draining on SIGTERM, its exit status reported as `subprocess` reports it (-9 for
SIGKILL). It runs what the `tracegate` console script runs, `sys.exit(main(argv))`, with
exactly the environment, working folder and output it is given, and starts in
milliseconds.

What it does not go through is the interpreter's start and the imports themselves: the
tests of start-up (its log lines, its exit status on a bad setting, the console script)
start a fresh interpreter with `subprocess`, and so do the benchmarks.

Nothing here imports tracegate itself: the fork server imports `PRELOAD` by name, which
tests/test_layering.py reads as imports (this module's one listed exception).
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import os
import subprocess
import sys
import tempfile
from multiprocessing.context import ForkServerProcess
from pathlib import Path

# What `serve`, `worker`, `investigate` and `eval` import before they run (the CLI imports
# the runtime only once its settings are accepted), and the libraries their first turn
# imports on first use.
PRELOAD = (
    "bot.process.cli",
    "bot.process.server",
    "evals.cli",
    "langchain_google_genai",
    "google.genai",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.config",
    "sandbox.prefork",
)

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(list(PRELOAD))


class ForkedProcess:
    """The part of `subprocess.Popen` the fleet uses, for a process of the fork server."""

    def __init__(self, process: ForkServerProcess) -> None:
        self._process = process

    @property
    def pid(self) -> int:
        assert self._process.pid is not None
        return self._process.pid

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
        return code

    def send_signal(self, signum: int) -> None:
        if self._process.exitcode is None:  # as Popen: never a pid that may be reused
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self._process.kill()


def forked(
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    stdout: Path,
    stderr: Path | None = None,
    *,
    module: str = "bot.process.cli",
) -> ForkedProcess:
    """`module`'s `main(argv)` (by default the `tracegate` command) with exactly `env`, in
    `cwd`, its output appended to `stdout` (and `stderr`, or `stdout` too), forked from
    the fork server (started on first use)."""
    process = _context.Process(
        target=_run_main,
        args=(module, argv, env, str(cwd), str(stdout), str(stderr or stdout)),
        daemon=True,
    )
    process.start()
    return ForkedProcess(process)


async def run_forked(
    argv: list[str], env: dict[str, str], cwd: Path, *, module: str = "bot.process.cli"
) -> tuple[int, str, str]:
    """Run `forked(...)` to its end: its exit status, stdout and stderr."""
    with tempfile.TemporaryDirectory(prefix="tracegate-forked-") as folder:
        out, err = Path(folder, "stdout"), Path(folder, "stderr")
        process = forked(argv, env, cwd, out, err, module=module)
        code = await asyncio.to_thread(process.wait)
        return code, await asyncio.to_thread(out.read_text), await asyncio.to_thread(err.read_text)


def _run_main(
    module: str, argv: list[str], env: dict[str, str], cwd: str, stdout: str, stderr: str
) -> None:
    """In the forked process: what the `tracegate` console script does (`sys.exit(main())`),
    with this environment and output. Its `sys.exit` is the process's exit status."""
    for fd, path in ((1, stdout), (2, stderr)):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [module, *argv]
    sys.exit(importlib.import_module(module).main(argv))
