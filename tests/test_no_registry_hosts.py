"""The repository names no package-registry host: `make lock`, `make install`, the image and
`scripts/with-redis` use the tools' defaults and the machine's own configured sources (pip's
and uv's configuration, apt's sources.list), so they work behind any mirror a machine uses.

Every tracked file is scanned, this one too: its examples of what is refused are built from
parts (`_` joins them), so the repository never holds one literally.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIPPED = (".venv/", ".git/", ".cache/", "demo-blocks/")

REGISTRY_HOSTS = re.compile(
    "|".join(
        [
            r"pypi\.(?:org|python\.org|io)",  # the Python Package Index, its test instance
            r"pythonhosted\.org",  # its file host
            r"(?:deb|security|archive|ftp|httpredir)\.debian\.org",  # Debian's archives
            r"(?:archive|security|ports)\.ubuntu\.com",
            r"registry\.npmjs\.org|registry\.yarnpkg\.com",
            r"proxy\.golang\.org",
            r"crates\.io|static\.rust-lang\.org",
            r"https?://[^/\s\"']*mirror",  # any mirror host
            r"(?:extra[-_])?index[-_]url",  # pip/uv options and variables naming an index
            r"PIP_(?:EXTRA_)?INDEX|UV_(?:DEFAULT_)?INDEX",
            r"tool\.uv\.index",
            r"find[-_]links",
            # an apt source line or deb822 URIs naming a host (a variable is fine)
            r"^\s*(?:echo\s+[\"']?)?deb(?:-src)?\s+(?:\[[^\]]*\]\s+)?(?:https?|ftp)://",
            r"^\s*URIs:\s*(?:https?|ftp)://",
        ]
    ),
    re.I | re.M,
)


def tracked_files() -> list[Path]:
    """The files git tracks (the working tree's, when this is not a git checkout)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout.decode()
        names = [name for name in listed.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()]
    return [ROOT / name for name in names if not name.startswith(SKIPPED)]


def registry_hosts_in(text: str) -> list[str]:
    return [match.group(0).strip() for match in REGISTRY_HOSTS.finditer(text)]


def test_no_tracked_file_names_a_package_registry_host() -> None:
    found = []
    for path in tracked_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # binary, or deleted in the working tree
        found += [f"{path.relative_to(ROOT)}: {hit}" for hit in registry_hosts_in(text)]
    assert not found, "package-registry hosts named in the repository:\n" + "\n".join(found)


def _(*parts: str) -> str:
    """An example of what is refused, from parts: this file holds none literally."""
    return "".join(parts)


@pytest.mark.parametrize(
    "line",
    [
        _("\t$(BIN)/uv pip compile pyproject.toml --index", "-url https://example.org/simple"),
        _("RUN pip install --extra-index", "-url https://example.org/simple -r requirements.lock"),
        _('echo "deb [signed-by=/k.gpg] http:', '//deb.example.org/debian bookworm main" >x'),
        _("URIs: http:", "//mirror.example.org/debian"),
        _("PIP_IN", "DEX_URL=https://example.org/simple"),
        _("see https://files.python", "hosted.org/packages/"),
    ],
    ids=["uv-index", "pip-extra-index", "apt-source", "deb822-uris", "pip-variable", "file-host"],
)
def test_the_check_sees_a_registry_host_or_index_option(line: str) -> None:
    assert registry_hosts_in(line)


def test_the_check_lets_a_source_line_from_the_machines_own_sources_through() -> None:
    # scripts/with-redis: the archive comes from this machine's apt sources, in a variable.
    line = 'echo "deb [signed-by=/usr/share/keyrings/x.gpg] $security bullseye-security main"'
    assert registry_hosts_in(line) == []
