"""`make image` builds the Dockerfile with docker or podman, and says so plainly when there is
neither."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent


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
