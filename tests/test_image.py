"""The image works as shipped: the package built from exactly the files the Dockerfile copies,
installed with `--no-deps` over the lock's packages, starts every command a pod runs. And
`make image` builds the Dockerfile with docker or podman, and says so plainly when there is
neither.

The image's virtualenv is stood in for by a fresh one (no container engine needed): the wheel
built from the Dockerfile's `COPY` sources is its only project code, and the locked
dependencies come from this checkout's virtualenv (installed from requirements.lock by
`make install`), put on its path by a `.pth` line; that virtualenv's own `.pth` files (the
editable install of this checkout among them) are not run from there, so nothing outside the
copied files can be imported as tracegate.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parent.parent
UV = Path(sys.executable).parent / "uv"  # a dev tool of the project's virtualenv


def dockerfile_sources(dockerfile: Path) -> list[str]:
    """The build context's paths the Dockerfile's `COPY` lines take (not `COPY --from`)."""
    sources = []
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from=") for w in words):
            sources += [w.removeprefix("./").rstrip("/") for w in words[1:-1]]
    return sources


@dataclass(frozen=True)
class Image:
    tracegate: Path
    wheel: Path
    workdir: Path  # the image's WORKDIR stand-in: no .env in it

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        # An empty environment, as a pod with no settings has (the image sets only PATH and
        # its own PYTHON* variables).
        return subprocess.run(
            [str(self.tracegate), *args],
            env={},
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    root = tmp_path_factory.mktemp("image")
    context = root / "src"
    context.mkdir()
    for source in dockerfile_sources(REPOSITORY / "Dockerfile"):
        origin = REPOSITORY / source
        if origin.is_dir():  # .dockerignore keeps these out
            shutil.copytree(
                origin, context / source, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            shutil.copy2(origin, context / source)
    dist = root / "dist"
    subprocess.run(
        [str(UV), "build", "--wheel", "--quiet", "--out-dir", str(dist), str(context)],
        check=True,
        timeout=120,
    )
    (wheel,) = dist.glob("tracegate-*.whl")
    venv = root / "venv"
    subprocess.run(
        [str(UV), "venv", "--quiet", "--python", sys.executable, str(venv)],
        check=True,
        timeout=60,
    )
    (site,) = venv.glob("lib/python*/site-packages")
    locked = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "locked-dependencies.pth").write_text("".join(f"{path}\n" for path in locked))
    subprocess.run(
        [str(UV), "pip", "install", "--quiet", "--no-deps", "--python", str(venv), str(wheel)],
        check=True,
        timeout=60,
    )
    workdir = root / "workdir"
    workdir.mkdir()
    return Image(venv / "bin" / "tracegate", wheel, workdir)


def test_the_image_carries_the_product_and_the_demo_but_not_the_evals(image: Image) -> None:
    with zipfile.ZipFile(image.wheel) as wheel:
        packages = {name.split("/")[0] for name in wheel.namelist() if name.endswith(".py")}
    assert packages == {"bot", "graph", "gates", "sandbox"}


def test_help_runs_in_the_image(image: Image) -> None:
    done = image.run("--help")
    assert done.returncode == 0, done.stderr
    commands = re.search(r"\{([a-z,-]+)\}", done.stdout)
    assert commands, done.stdout
    assert {"investigate", "serve", "worker", "demo", "eval"} <= set(commands[1].split(","))


@pytest.mark.parametrize(
    ("command", "missing"),
    [
        ("serve", ["SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "GOOGLE_API_KEY", "TEMPO_URL"]),
        ("worker", ["SLACK_BOT_TOKEN", "GOOGLE_API_KEY", "TEMPO_URL"]),
    ],
)
def test_a_command_of_a_pod_without_settings_names_each_missing_one_and_exits_2(
    image: Image, command: str, missing: list[str]
) -> None:
    done = image.run(command)
    assert done.returncode == 2, done.stderr
    first, *problems = done.stderr.splitlines()
    assert first == "tracegate: configuration error"
    assert [line.split(":")[0] for line in problems] == missing


def test_the_demo_plays_in_the_image(image: Image) -> None:
    done = image.run("demo", "--scene", "bad-deploy", "--out", str(image.workdir / "blocks"))
    assert done.returncode == 0, done.stderr
    assert "embedded in-memory store" in done.stdout  # no REDIS_URL: nothing else to reach
    assert "━━━ bad-deploy:" in done.stdout
    assert "Cluster now: shop/payment-api runs registry/payment-api:1.41.3." in done.stdout
    assert list((image.workdir / "blocks" / "bad-deploy").glob("*-message.json"))


def test_eval_in_the_image_says_the_evals_are_not_there_and_exits_2(image: Image) -> None:
    done = image.run("eval")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "tracegate eval: the evals package is not installed (the image leaves it out); "
        "run `tracegate eval` from a checkout of the repository (make install)"
    ]


def test_make_image_without_docker_or_podman_fails_with_one_line_naming_both(
    tmp_path: Path,
) -> None:
    make = shutil.which("make")
    assert make is not None, "make runs the tests: it is installed"
    # A PATH with nothing on it: no docker, no podman (make's recipes run /bin/sh by path).
    done = subprocess.run(
        [make, "--no-print-directory", "-C", str(REPOSITORY), "image"],
        env={"PATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert done.stdout == ""
    first, *rest = done.stderr.splitlines()
    assert first == (
        "make image: neither docker nor podman is installed; install one of them "
        "(or set ENGINE=...)"
    )
    assert all(line.startswith("make: ***") for line in rest), rest  # make's own exit line


def test_make_image_builds_the_dockerfile_with_the_engine_found(tmp_path: Path) -> None:
    make = shutil.which("make")
    assert make is not None
    engine = tmp_path / "podman"  # a stand-in that records how it was called
    engine.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/called\n')
    engine.chmod(0o755)
    done = subprocess.run(
        [make, "--no-print-directory", "-C", str(REPOSITORY), "image", "IMAGE=tracegate:test"],
        env={"PATH": str(tmp_path)},  # the stand-in only: no docker found first
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "called").read_text().split() == ["build", "-t", "tracegate:test", "."]
