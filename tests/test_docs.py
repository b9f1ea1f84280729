"""The docs say what is true: docs/architecture.md names files, settings and symbols that
exist; docs/configuration.md is what the settings model generates; every relative link
resolves; the README is short and starts with the two commands; every command shown exists."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field, SecretStr, create_model

from bot.process.cli import main
from bot.process.demo import play
from bot.process.settings import (
    VARIABLES,
    KubernetesSettings,
    LogSettings,
    Settings,
    SlackSettings,
)
from bot.process.settings_docs import COMMAND, PAGE, render

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "architecture.md").read_text()


def test_every_file_the_architecture_doc_names_exists() -> None:
    paths = set(re.findall(r"`((?:bot|graph|gates|sandbox|tests|bench|scripts)/[\w/.-]*)`", DOC))
    assert paths, "the doc names no files: the pattern is wrong"
    missing = sorted(p for p in paths if not (ROOT / p.split(" ")[0]).exists())
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_every_setting_the_architecture_doc_names_is_a_setting() -> None:
    table = DOC.split("## Where each setting is read", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([A-Z][A-Z0-9_]+)(?:_\*)?`", table))
    known = set(VARIABLES)
    prefixes = {n for n in re.findall(r"`([A-Z][A-Z0-9_]+)_\*`", table)}
    unknown = sorted(n for n in named - prefixes if n not in known)
    assert not unknown, f"docs/architecture.md names settings that do not exist: {unknown}"
    undocumented = sorted(
        n for n in known if n not in named and not any(n.startswith(p + "_") for p in prefixes)
    )
    assert not undocumented, f"settings missing from docs/architecture.md: {undocumented}"


def test_every_function_the_architecture_doc_names_is_defined_where_it_says() -> None:
    # "`Class.method` (`path`)" and "(`function`, `path`)"; graph node names (`agent`) are
    # names in build.py, not functions, and are left out.
    pairs = re.findall(r"`([A-Za-z_][\w.]*)`(?: \(|, )`((?:bot|graph|gates)/[\w/]+\.py)`", DOC)
    symbols = [(s, p) for s, p in pairs if "." in s or s[0].isupper() or "_" in s.strip("_")]
    nodes = set(re.findall(r'add_node\("(\w+)"', (ROOT / "graph" / "build.py").read_text()))
    symbols = [(s, p) for s, p in symbols if s not in nodes]
    assert len(symbols) >= 5, f"the doc names few functions: the pattern is wrong ({symbols})"
    for symbol, path in symbols:
        source = (ROOT / path).read_text()
        for part in symbol.split("."):
            assert re.search(rf"\b(def|class)\s+{re.escape(part)}\b", source), (
                f"docs/architecture.md says {symbol} is in {path}; it is not"
            )


# --- docs/configuration.md: generated from the settings model -----------------------------


def test_the_configuration_page_is_what_the_settings_model_generates() -> None:
    page = (ROOT / PAGE).read_text()
    assert page == render(), f"{PAGE} is stale: run `{COMMAND}` and commit the page"


def test_make_docs_command_writes_the_page(tmp_path: Path) -> None:
    assert "tracegate config docs --out docs/configuration.md" in (ROOT / "Makefile").read_text()
    assert main(["config", "docs", "--out", str(tmp_path / "page.md")]) == 0
    assert (tmp_path / "page.md").read_text() == render()


def test_the_configuration_page_does_not_depend_on_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOOL_BUDGET", "99")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-from-the-environment")
    page = render()
    assert "| `TOOL_BUDGET` | whole number, ≥ 1 | `8` |" in page
    assert "xoxb-from-the-environment" not in page


def _with_group(attribute: str, group: type[BaseModel]) -> type[Settings]:
    """Settings with one group's model replaced (its Group, prefix and section kept)."""
    metadata = Settings.model_fields[attribute].metadata
    field = (Annotated[group, *metadata], Field(default_factory=group))
    return create_model("Changed", __base__=Settings, **{attribute: field})  # type: ignore[call-overload,no-any-return]


def test_a_secrets_default_is_never_written() -> None:
    class WithADefaultToken(SlackSettings):
        bot_token: SecretStr | None = Field(
            default=SecretStr("xoxb-default-leak"), description="A token."
        )

    page = render(_with_group("slack", WithADefaultToken))
    assert "xoxb-default-leak" not in page
    assert "| `SLACK_BOT_TOKEN` | secret | — |" in page


def test_a_setting_without_a_description_is_refused_by_name() -> None:
    class Undocumented(KubernetesSettings):
        thread_emoji: str = "eyes"

    with pytest.raises(ValueError, match=r"^THREAD_EMOJI has no description: add Field"):
        render(_with_group("kubernetes", Undocumented))


def test_a_new_setting_lands_in_the_section_it_is_declared_in() -> None:
    class WithANewSetting(LogSettings):
        color: Literal["auto", "on", "off"] = Field(
            default="auto", description="Colour the log lines."
        )

    page = render(_with_group("logs", WithANewSetting))
    # Declared in the last group: in that group's section.
    logs = page.split("\n## Logs\n", 1)[1].split("\n## ", 1)[0]
    assert "| `LOG_COLOR` | `auto` or `on` or `off` | `auto` | Colour the log lines. |" in logs


def test_the_page_names_the_commands_that_need_a_setting() -> None:
    page = render()
    assert "| `TEMPO_URL` | text | — (required by `serve`, `worker`, `investigate`) |" in page
    assert "| `SLACK_SIGNING_SECRET` | secret | — (required by `serve`) |" in page


# --- links, size, the two commands ---------------------------------------------------------

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "BENCHMARKS.md", ROOT / "EVALS.md"]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _prose(text: str) -> str:
    """Markdown without its code blocks and code spans (links there are not links)."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings (`## Two modes, never mixed` → two-modes-…)."""
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", FENCE.sub("", text), re.M):
        slug = "".join(c for c in heading.lower() if c.isalnum() or c in " -_").replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:: not ours to check offline
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and (linked.suffix != ".md" or anchor not in _anchors(linked.read_text())):
            broken.append(f"{target} (no heading #{anchor} in {linked.name})")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_and_heading(page: Path) -> None:
    broken = _broken_links(page)
    assert not broken, f"{page.relative_to(ROOT)} links to what is not there: {broken}"


def test_the_link_check_sees_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\n## Real heading\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#real-heading) [file](gone.md) [heading](a.md#not-there) `[code](gone.md)`\n"
    )
    assert _broken_links(page) == [
        "gone.md (no such file)",
        "a.md#not-there (no heading #not-there in a.md)",
    ]


def test_the_readme_is_at_most_8_kb() -> None:
    size = len(README.read_bytes())
    assert size <= 8192, f"README.md is {size} bytes; move detail into docs/ (limit 8192)"


def test_the_readme_starts_with_the_two_commands() -> None:
    lines = [line for line in README.read_text().splitlines() if line.strip()]
    assert lines[0].startswith("# "), "README.md starts with its title"
    assert lines[1].startswith("```"), "the first thing under the title is a code block"
    commands = [line.split("#")[0].strip() for line in lines[2:4]]
    assert commands == ["make demo", "make test"], f"README.md starts with {lines[1:5]}"
    assert lines[4].startswith("```")


def _makefile_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))


def _cli_commands() -> set[str]:
    return set(re.findall(r'add_parser\(\s*"([\w-]+)"', (ROOT / "bot/process/cli.py").read_text()))


SHELL_BLOCK = re.compile(r"^```(?:sh|bash|console)\n(.*?)^```", re.S | re.M)
# A command line: environment assignments, then `make X` or `[path/]tracegate X`.
COMMAND_LINE = re.compile(
    r"^(?:\w+=\S* )*(?:make (?P<target>[a-z][\w-]*)|(?:\S*/)?tracegate (?P<command>[a-z][\w-]*))"
)


def _commands_shown(text: str) -> list[re.Match[str]]:
    """Each command line of a shell block, and each code span that is a command."""
    lines = [line for block in SHELL_BLOCK.findall(text) for line in block.splitlines()]
    spans = re.findall(r"`([^`\n]+)`", FENCE.sub("", text))
    matches = (COMMAND_LINE.match(line.strip()) for line in lines + spans)
    return [match for match in matches if match]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_make_target_and_tracegate_command_shown_exists(page: Path) -> None:
    targets, commands = _makefile_targets(), _cli_commands()
    wrong = [
        match.string
        for match in _commands_shown(page.read_text())
        if (match["target"] or "") not in targets | {""}
        or (match["command"] or "") not in commands | {""}
    ]
    assert not wrong, f"{page.relative_to(ROOT)} shows commands that do not exist: {wrong}"


# --- the README's transcript is what `make demo` prints ----------------------------------

# What changes from run to run: edit counts, timings, clock times.
_VARIES = [(re.compile(r"edited \d+×"), "edited N×"), (re.compile(r"\d+\.\d s\b"), "T s")]


def _steady(text: str) -> str:
    for pattern, stand_in in _VARIES:
        text = pattern.sub(stand_in, text)
    return text


def _readme_transcript() -> list[str]:
    """The README's transcript, in the pieces between its `…` marks."""
    block = next(b for b in FENCE.findall(README.read_text()) if "👤" in b)
    lines = block.splitlines()[1:-1]  # without the fences
    pieces = "\n".join(lines).split("\n    …\n")
    return [_steady(piece) for piece in pieces]


async def test_the_readme_transcript_is_what_the_demo_prints(tmp_path: Path) -> None:
    out = io.StringIO()
    await play(None, out, tmp_path, scenes=["bad-deploy"])
    printed = _steady(out.getvalue())
    at = 0
    for piece in _readme_transcript():
        found = printed.find(piece, at)
        assert found >= 0, (
            f"the demo no longer prints this part of README.md's transcript:\n{piece}"
        )
        at = found + len(piece)
