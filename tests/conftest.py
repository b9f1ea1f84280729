"""Shared fixtures: real Redis (from `make test`), simulators on free ports, real clients."""

from __future__ import annotations

import functools
import os
import re
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from gates.pipeline import ActionPipeline
from graph.config import GraphLimits, ModelSpec, TempoSpec
from graph.runner import Investigator, open_investigator
from sandbox import GeminiSimulator, TempoSimulator
from sandbox.scenarios import Scenario, bad_deploy

MODEL = "gemini-3.8-flash"

pytest_plugins = [
    "tests.gates_fixtures",
    "tests.slack_fixtures",
    "tests.fleet_fixtures",
    "tests.redis_fixtures",
]


# What a module that starts processes of its own says (tracegate, Redis, make): see below.
_STARTS_PROCESSES = re.compile(
    r"create_subprocess_exec|subprocess\.(run|Popen)|\b(fleet_for|redis_server|plain_redis"
    r"|empty_redis_stack|kill_mid_approval)\b"
)


@functools.cache
def _starts_processes(module: Path) -> bool:
    return bool(_STARTS_PROCESSES.search(module.read_text()))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` runs the tests side by side (pytest-xdist, `--dist loadgroup`). The modules
    whose tests start real processes (SIGKILL, SIGTERM, Redis stopped and started, the CLI)
    run one test at a time, in one lane, as before: each new process costs seconds of CPU
    to start, and several starting at once on a small machine would stretch the recovery
    times those tests assert. Everything else (real Redis, simulators, the bot in-process)
    runs in the other lanes; each test keeps its keys apart (its own prefix, thread ids and
    team) — Redis databases other than 0 cannot hold RediSearch indexes."""
    lanes = int(os.environ.get("TEST_PROCESS_LANES", "1"))
    modules: dict[Path, list[pytest.Item]] = {}
    for item in items:
        if _starts_processes(item.path):
            modules.setdefault(item.path, []).append(item)
    # Whole modules to the lane with the fewest process tests so far, the largest first.
    load = [0] * lanes
    for module in sorted(modules, key=lambda m: -len(modules[m])):
        lane = load.index(min(load))
        load[lane] += len(modules[module])
        for item in modules[module]:
            item.add_marker(pytest.mark.xdist_group(f"processes-{lane}"))


@pytest.fixture(scope="session")
def redis_url() -> str:
    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.exit(
            "REDIS_URL is not set: run the tests with `make test`, which starts Redis Stack, "
            "or point REDIS_URL at a Redis 8 / Redis Stack server.",
            returncode=2,
        )
    return url


@pytest.fixture
def scenario() -> Scenario:
    return bad_deploy()


@pytest.fixture
async def tempo(scenario: Scenario) -> AsyncIterator[TempoSimulator]:
    async with TempoSimulator(traces=scenario.traces) as sim:
        yield sim


@pytest.fixture
async def gemini() -> AsyncIterator[GeminiSimulator]:
    async with GeminiSimulator() as sim:
        yield sim


@pytest.fixture
def thread_id() -> str:
    return f"T1:C1:{uuid.uuid4().hex}"


@pytest.fixture
def model_spec(gemini: GeminiSimulator) -> ModelSpec:
    return ModelSpec(
        model=f"google_genai:{MODEL}",
        api_key="sandbox-key",
        base_url=gemini.url,
        timeout_s=10,
        max_retries=0,
    )


@pytest.fixture
def tempo_spec(tempo: TempoSimulator) -> TempoSpec:
    return TempoSpec(url=tempo.url, timeout_s=1.0)


OpenInvestigator = Callable[..., AbstractAsyncContextManager[Investigator]]


@pytest.fixture
def investigator_for(
    model_spec: ModelSpec, tempo_spec: TempoSpec, redis_url: str
) -> OpenInvestigator:
    """Open a fully wired investigator; keyword arguments override GraphLimits fields."""

    def open_with(**limits: Any) -> AbstractAsyncContextManager[Investigator]:
        return open_investigator(model_spec, tempo_spec, GraphLimits(**limits), redis_url)

    return open_with


@pytest.fixture
async def investigator(investigator_for: OpenInvestigator) -> AsyncIterator[Investigator]:
    async with investigator_for() as opened:
        yield opened


@pytest.fixture
async def agent(
    model_spec: ModelSpec, tempo_spec: TempoSpec, redis_url: str, pipeline: ActionPipeline
) -> AsyncIterator[Investigator]:
    """An investigator that may propose actions through the action pipeline."""
    async with open_investigator(
        model_spec, tempo_spec, GraphLimits(), redis_url, actions=pipeline
    ) as investigator:
        yield investigator
