"""Shared fixtures: real Redis (from `make test`), simulators on free ports, real clients."""

from __future__ import annotations

import functools
import inspect
import os
import re
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from types import ModuleType
from typing import Any

import pytest
import redis.asyncio as aioredis

from gates.pipeline import ActionPipeline
from graph.config import GraphLimits, ModelSpec, TempoSpec
from graph.runner import Investigator, open_investigator
from sandbox import GeminiSimulator, TempoSimulator
from sandbox.scenarios import Scenario, bad_deploy
from tests.shared_redis import PREFIX

MODEL = "gemini-3.8-flash"

pytest_plugins = [
    "tests.gates_fixtures",
    "tests.slack_fixtures",
    "tests.fleet_fixtures",
    "tests.redis_fixtures",
    "tests.sentinel_fixtures",
    "tests.alertmanager_fixtures",
]


# What a test that starts processes of its own says (tracegate, fresh or forked; Redis;
# make; Alertmanager), in its own body or in a helper of its module it calls; or the
# fixtures that start them.
_STARTS_PROCESSES = re.compile(
    r"create_subprocess_exec|subprocess\.(run|Popen)"
    r"|\b(fleet_for|kill_mid_approval|forked|run_forked)\b|\b(Alertmanager|PrometheusServer)\("
)
_PROCESS_FIXTURES = frozenset(
    {
        "fleet_for",
        "redis_server",
        "plain_redis",
        "empty_redis_stack",
        "redis_ha",
        "redis_pair",
        "evicting_redis_stack",
        "alertmanager_for",
        "prometheus_for",
    }
)


@functools.cache
def _source(function: Callable[..., Any]) -> str:
    """Once per function: the fixtures of a thousand tests are a few hundred functions, and
    each `getsource` searches every loaded module (every pytest worker collects)."""
    return inspect.getsource(function)


@functools.cache
def _process_helpers(module: ModuleType) -> re.Pattern[str]:
    """Calls of the functions in the module's namespace (its own and imported) that start
    processes, directly or through one another."""
    functions = {
        name: _source(value)
        for name, value in vars(module).items()
        if inspect.isfunction(value) and not name.startswith("test_")
    }
    found: set[str] = set()
    while True:
        calls = re.compile(r"\b(" + "|".join(map(re.escape, sorted(found))) + r")\(")
        more = {
            name
            for name, source in functions.items()
            if name not in found
            and (_STARTS_PROCESSES.search(source) or (found and calls.search(source)))
        }
        if not more:
            return calls if found else re.compile(r"(?!)")
        found |= more


def _starts_processes(item: pytest.Function) -> bool:
    if _PROCESS_FIXTURES & set(item.fixturenames):
        return True
    helpers = _process_helpers(item.module)
    fixtures = [d.func for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs]
    for function in (item.function, *fixtures):
        source = _source(function)
        if _STARTS_PROCESSES.search(source) or helpers.search(source):
            return True
    return False


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` runs the tests side by side (pytest-xdist, `--dist loadgroup`). The tests
    that start real processes (SIGKILL, SIGTERM, Redis stopped and started, the CLI) run in
    TEST_PROCESS_LANES lanes (default 3), one at a time in each: their processes run turns
    against deadlines (leases, recovery, grace), and many fleets at once on a small machine
    would starve the ones whose recovery is being measured. They are dealt to the lanes in
    turn, so a module of long fault tests is spread over all of them. Everything else (real
    Redis, simulators, the bot in-process) runs in any lane; each test keeps its keys apart
    (its own prefix, thread ids and team) — Redis databases other than 0 cannot hold
    RediSearch indexes."""
    lanes = int(os.environ.get("TEST_PROCESS_LANES", "3"))
    starting = [i for i in items if isinstance(i, pytest.Function) and _starts_processes(i)]
    for n, item in enumerate(starting):
        item.add_marker(pytest.mark.xdist_group(f"processes-{n % lanes}"))


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
    model_spec: ModelSpec, tempo_spec: TempoSpec, redis_client: aioredis.Redis
) -> OpenInvestigator:
    """Open a fully wired investigator; keyword arguments override GraphLimits fields."""

    def open_with(**limits: Any) -> AbstractAsyncContextManager[Investigator]:
        return open_investigator(
            model_spec, tempo_spec, GraphLimits(**limits), redis_client, prefix=PREFIX
        )

    return open_with


@pytest.fixture
async def investigator(investigator_for: OpenInvestigator) -> AsyncIterator[Investigator]:
    async with investigator_for() as opened:
        yield opened


@pytest.fixture
async def agent(
    model_spec: ModelSpec,
    tempo_spec: TempoSpec,
    redis_client: aioredis.Redis,
    pipeline: ActionPipeline,
) -> AsyncIterator[Investigator]:
    """An investigator that may propose actions through the action pipeline."""
    async with open_investigator(
        model_spec, tempo_spec, GraphLimits(), redis_client, prefix=PREFIX, actions=pipeline
    ) as investigator:
        yield investigator
