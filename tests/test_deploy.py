"""The shipped deployment: the kustomization renders, every object is valid Kubernetes, and
the manifests agree with the code (settings, probe paths, shutdown grace, the Role)."""

import tomllib
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes_validate
import pytest
import yaml

from bot.process.server import SHUTDOWN_GRACE_S, RunningBot
from bot.process.settings import VARIABLES, Settings
from tests.gates_fixtures import REPOSITORY, shipped_roles
from tests.kustomize import render

DEPLOY = REPOSITORY / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.31.0"
KUSTOMIZATIONS = [DEPLOY / "base", DEPLOY / "target-namespace", DEPLOY / "overlays" / "example"]
SECRET_EXAMPLE = DEPLOY / "secret.example.yaml"


def _example() -> list[dict[str, Any]]:
    return render(DEPLOY / "overlays" / "example")


def _one(kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in _example() if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _containers() -> list[dict[str, Any]]:
    return [
        container
        for obj in _example()
        if obj["kind"] == "Deployment"
        for container in obj["spec"]["template"]["spec"]["containers"]
    ]


@pytest.mark.parametrize("folder", KUSTOMIZATIONS, ids=lambda p: p.name)
def test_every_rendered_object_is_valid_kubernetes(folder: Path) -> None:
    objects = render(folder)
    assert objects
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_secret_example_is_valid_and_holds_no_real_value() -> None:
    secret = yaml.safe_load(SECRET_EXAMPLE.read_text())
    kubernetes_validate.validate(secret, KUBERNETES_VERSION, strict=True)
    assert all("REPLACE-ME" in value for value in secret["stringData"].values())


def test_every_environment_name_in_the_manifests_is_a_setting() -> None:
    settings = set(VARIABLES)
    names = set(_one("ConfigMap", "tracegate")["data"])
    names |= set(yaml.safe_load(SECRET_EXAMPLE.read_text())["stringData"])
    names |= {env["name"] for container in _containers() for env in container.get("env", [])}
    compose = yaml.safe_load((REPOSITORY / "docker-compose.yml").read_text())
    names |= {
        name for service in compose["services"].values() for name in service.get("environment", {})
    }
    assert names - settings == set()


def test_the_config_map_parses_as_settings() -> None:
    data = _one("ConfigMap", "tracegate")["data"]
    settings = Settings(_env_file=None, **{k.lower(): v for k, v in data.items()})  # type: ignore[call-arg]
    assert (settings.turns.worker_mode, settings.logs.format) == ("queue", "json")


async def test_every_probe_path_is_served(bot: RunningBot) -> None:
    paths = {
        container[probe]["httpGet"]["path"]
        for container in _containers()
        for probe in ("livenessProbe", "readinessProbe", "startupProbe")
        if probe in container
    }
    assert paths == {"/livez", "/readyz"}
    async with aiohttp.ClientSession() as session:
        for path in paths:
            async with session.get(f"{bot.url}{path}") as response:
                assert response.status in (200, 503), path  # 404 would be a wrong path


def test_pods_get_longer_to_stop_than_the_bot_takes_to_shut_down() -> None:
    grace = float(_one("ConfigMap", "tracegate")["data"]["SHUTDOWN_GRACE"])
    for name in ("tracegate-serve", "tracegate-worker"):
        pod = _one("Deployment", name)["spec"]["template"]["spec"]
        assert pod["terminationGracePeriodSeconds"] > grace + SHUTDOWN_GRACE_S, name


@pytest.mark.parametrize("process", ["serve", "worker"])
def test_each_process_runs_as_its_own_account_bound_to_the_role_the_tests_enforce(
    process: str,
) -> None:
    name = f"tracegate-{process}"
    role = _one("Role", name)
    binding = _one("RoleBinding", name)
    account = _one("ServiceAccount", name)
    deployment = _one("Deployment", name)
    assert role["rules"] == shipped_roles()[name]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "shop"
    assert binding["roleRef"]["name"] == name
    (subject,) = binding["subjects"]
    assert (subject["name"], subject["namespace"]) == (
        account["metadata"]["name"],
        account["metadata"]["namespace"],
    )
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == name


def test_the_lock_file_pins_every_runtime_dependency() -> None:
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    lock = (REPOSITORY / "requirements.lock").read_text()
    pinned = {
        line.split("==")[0].lower().replace("_", "-")
        for line in lock.splitlines()
        if "==" in line and not line.startswith((" ", "#"))
    }
    for requirement in project["dependencies"]:
        name = requirement.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip()
        assert name.lower().replace("_", "-") in pinned, name


def test_the_image_gets_every_file_its_dockerfile_copies() -> None:
    """.dockerignore lets in only what the Dockerfile copies (above all, never a .env)."""
    allowed = {
        line.removeprefix("!").rstrip("/")
        for line in (REPOSITORY / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    copied = {
        source.removeprefix("./")
        for line in (REPOSITORY / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY ") and "--from=" not in line
        for source in line.split()[1:-1]
    }
    assert copied == allowed
