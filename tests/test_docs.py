"""docs/architecture.md names files, settings and symbols; they must exist."""

from __future__ import annotations

import re
from pathlib import Path

from bot.process.settings import Settings

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
    known = {field.upper() for field in Settings.model_fields}
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
