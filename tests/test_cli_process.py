"""`tracegate` as a process: what it loads, and a demo scene that does not exist."""

import subprocess
import sys
import tempfile
from pathlib import Path

from bot.process.demo import SCENES


def test_the_cli_does_not_load_the_simulators_or_fakeredis() -> None:
    # `tracegate serve` runs `bot.process.cli`: the demo's parts must not come with it.
    probe = (
        "import bot.process.cli, sys; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'sandbox', 'fakeredis'}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"


def test_an_unknown_scene_exits_2_naming_the_scenes(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-P",  # not the working folder's modules first: /tmp holds anything
            "-m",
            "bot.process.cli",
            "demo",
            "--scene",
            "nosuch",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    names = ", ".join(name for name, *_ in SCENES)
    assert done.returncode == 2
    assert done.stderr == f"tracegate demo: no scene 'nosuch'; the scenes are {names}\n"
    assert done.stdout == ""
