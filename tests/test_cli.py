"""`tracegate investigate` wires settings to the graph (run as a real process, forked)."""

import asyncio
import os
import re
import sys
import tempfile
from pathlib import Path

import pytest

from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.kubernetes import KubernetesSimulator
from sandbox.plays import propose_rollback
from sandbox.prefork import run_forked
from sandbox.scenarios import Scenario
from tests.gates_fixtures import SAFE, write_kubeconfig


async def _tracegate(*args: str, env: dict[str, str], fresh: bool = False) -> tuple[int, str, str]:
    """`tracegate *args` with exactly `env`: forked from the fork server (sandbox/prefork.py),
    or `fresh`, a new interpreter (what start-up itself is tested with). Run outside the
    checkout so a developer's .env cannot leak into the test."""
    env = {"PATH": os.environ["PATH"], **env}
    if not fresh:
        return await run_forked(list(args), env, Path(tempfile.gettempdir()))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-P",  # not the working folder's modules first: /tmp holds anything
        "-m",
        "bot.process.cli",
        *args,
        env=env,
        cwd=tempfile.gettempdir(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def _sandbox_env(gemini: GeminiSimulator, tempo: TempoSimulator, redis_url: str) -> dict[str, str]:
    return {
        "GOOGLE_API_KEY": "sandbox-key",
        "GEMINI_BASE_URL": gemini.url,
        "LLM_MAX_RETRIES": "0",
        "TEMPO_URL": tempo.url,
        "REDIS_URL": redis_url,
        "DEFAULT_RUBRIC": "",  # no grader replies scripted here
    }


@pytest.fixture
def cluster_env(
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    kube: KubernetesSimulator,
    redis_url: str,
    tmp_path: Path,
) -> dict[str, str]:
    """The sandbox settings with a kubeconfig for the simulated cluster."""
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube.url)
    return {**_sandbox_env(gemini, tempo, redis_url), "KUBECONFIG": str(kubeconfig)}


async def test_investigate_answers_from_the_environment_configuration(
    gemini: GeminiSimulator, tempo: TempoSimulator, scenario: Scenario, redis_url: str
) -> None:
    real = scenario.error_trace_ids[0]
    gemini.script(Reply.text(f"payment-api 1.42.0 fails; see {real}."))
    env = _sandbox_env(gemini, tempo, redis_url)
    code, out, err = await _tracegate("investigate", "checkout 500s, why?", env=env)

    assert code == 0, err
    assert f"payment-api 1.42.0 fails; see {real}." in out
    assert "traces verified 1 / unverified 0 / removed 0" in out
    assert "sandbox-key" not in out + err


async def test_investigate_without_tempo_url_exits_2_naming_it(redis_url: str) -> None:
    env = {"GOOGLE_API_KEY": "k", "REDIS_URL": redis_url}
    code, _, err = await _tracegate("investigate", "why?", env=env)
    assert code == 2
    assert "TEMPO_URL: not set" in err


async def test_with_a_kubeconfig_the_agent_can_read_rollout_history(
    gemini: GeminiSimulator, cluster_env: dict[str, str]
) -> None:
    gemini.script(
        Reply.call("get_rollout_history", namespace="shop", deployment="payment-api"),
        Reply.text("payment-api moved to 1.42.0 an hour ago."),
    )
    code, out, err = await _tracegate("investigate", "what changed?", env=cluster_env)

    assert code == 0, err
    assert "current revision 3 (registry/payment-api:1.42.0)" in gemini.requests[1].text()
    assert "payment-api moved to 1.42.0 an hour ago." in out


async def test_serve_without_a_signing_secret_exits_naming_it(redis_url: str) -> None:
    env = {"SLACK_BOT_TOKEN": "xoxb-x", "GOOGLE_API_KEY": "k", "TEMPO_URL": "http://t:3200"}
    code, _, err = await _tracegate("serve", env={**env, "REDIS_URL": redis_url})
    assert code == 2
    assert "SLACK_SIGNING_SECRET: not set; copy it from the app's Basic Information page" in err


async def test_serve_reports_every_missing_setting_at_once(redis_url: str) -> None:
    code, _, err = await _tracegate("serve", env={"REDIS_URL": redis_url})
    assert code == 2
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "GOOGLE_API_KEY", "TEMPO_URL"):
        assert f"{name}: not set" in err


async def test_investigate_prints_each_proposed_action_and_its_stored_state(
    gemini: GeminiSimulator, cluster_env: dict[str, str]
) -> None:
    gemini.script(
        propose_rollback("payment-api", "5xx started with revision 3 (1.42.0)"),
        SAFE,  # the judge
        Reply.text("I proposed rolling payment-api back."),
    )
    code, out, err = await _tracegate("investigate", "roll payment-api back?", env=cluster_env)

    assert code == 0, err
    assert re.search(
        r"proposed action \S+: roll back shop/payment-api to revision 2 — "
        r"pending approval: nobody has approved it yet",
        out,
    ), out
