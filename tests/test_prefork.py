"""The processes the fault tests fork (sandbox/prefork.py) start as a fresh one would: with
exactly the environment, folder and output they are given, and ending as `subprocess`
reports a process's end (a signal: its negative number)."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from sandbox.prefork import forked, run_forked

PROBE = "tests.prefork_probe"


async def test_a_forked_process_sees_exactly_its_environment_and_folder(tmp_path: Path) -> None:
    code, out, err = await run_forked(["env"], {"ONLY": "this"}, tmp_path, module=PROBE)

    assert code == 0
    assert json.loads(out) == {"ONLY": "this"}  # nothing of the fork server's own
    assert err.strip() == str(tmp_path)


async def test_its_exit_status_is_what_main_returned(tmp_path: Path) -> None:
    code, _, _ = await run_forked(["exit", "3"], {}, tmp_path, module=PROBE)
    assert code == 3


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
async def test_a_signal_ends_it_as_a_fresh_process_ends(tmp_path: Path, signum: int) -> None:
    log = tmp_path / "log"
    process = forked(["wait"], {}, tmp_path, log, module=PROBE)
    for _ in range(200):  # bounded: 10 s
        if log.exists() and "waiting" in log.read_text():
            break
        await asyncio.sleep(0.05)
    assert process.poll() is None

    process.send_signal(signum)

    assert await asyncio.to_thread(process.wait, 10) == -signum
