"""The floors import downwards only: `gates` ← `graph` ← `bot`, with `sandbox` apart.

Read from the source with `ast` (every `import` and `from … import`, lazy ones inside
functions included, and a module of ours named in a string: `importlib.import_module`,
`__import__`, a fork server's preload list), so a new import that breaks the layering fails
here, not in review.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = ("gates", "graph", "bot", "sandbox", "evals", "bench")

# What each package may import from the others (itself always).
ALLOWED: dict[str, set[str]] = {
    "gates": set(),
    "graph": {"gates"},
    "bot": {"gates", "graph"},
    "sandbox": set(),
    "evals": {"gates", "graph", "bot", "sandbox"},
    "bench": {"gates", "graph", "bot", "sandbox", "evals"},  # measures it all, imported by none
}
# The only modules allowed a way out of those rules, and what for.
EXCEPTIONS: dict[str, set[str]] = {
    "bot.process.demo": {"sandbox"},  # the demo plays whole incidents on the simulators
    "bot.process.cli": {"evals"},  # `tracegate eval`, imported when that command runs
    # forks tracegate processes from an interpreter that imported them (by name: the fork
    # server's preload); it speaks no wire protocol, and no product module imports it
    "sandbox.prefork": {"bot", "evals"},
}
# Inside bot: how an event arrives is known to the process that wires it, nobody else.
BOT_INTERNAL_FORBIDDEN: dict[str, set[str]] = {
    "bot.turn": {"bot.inbound"},
    "bot.outbound": {"bot.inbound"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_our_module(name: str) -> bool:
    parts = name.split(".")
    if parts[0] not in OURS or not all(part.isidentifier() for part in parts):
        return False
    where = ROOT.joinpath(*parts)
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def imports_of(path: Path) -> set[str]:
    """Every absolute module named by an import in the file, or by a string that is the
    name of one of our modules (imported by name: importlib, `__import__`, a preload)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    # `[python, "-m", "bot.process.cli"]` starts a process of its own: a command, not an import
    commands = {
        id(after)
        for node in ast.walk(tree)
        if isinstance(node, (ast.List, ast.Tuple))
        for before, after in zip(node.elts, node.elts[1:], strict=False)
        if isinstance(before, ast.Constant) and before.value == "-m"
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in commands and _is_our_module(node.value):
                found.add(node.value)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_the_floors_below_it(package: str) -> None:
    broken = []
    for path in modules(package):
        name = _module_name(path)
        allowed = ALLOWED[package] | {package} | EXCEPTIONS.get(name, set())
        for imported in imports_of(path):
            top = imported.split(".")[0]
            if top in OURS and top not in allowed:
                broken.append(f"{name} imports {imported}")
    assert not broken, "\n".join(sorted(set(broken)))


def test_only_the_process_knows_how_events_arrive() -> None:
    broken = []
    for path in modules("bot"):
        name = _module_name(path)
        for prefix, forbidden in BOT_INTERNAL_FORBIDDEN.items():
            if name == prefix or name.startswith(prefix + "."):
                broken += [
                    f"{name} imports {imported}"
                    for imported in imports_of(path)
                    for bad in forbidden
                    if imported == bad or imported.startswith(bad + ".")
                ]
    assert not broken, "\n".join(sorted(set(broken)))


def test_bot_is_grouped_by_the_flow() -> None:
    """No module sits loose in bot/: each belongs to inbound, turn, outbound or process."""
    loose = sorted(p.name for p in (ROOT / "bot").glob("*.py") if p.name != "__init__.py")
    assert loose == []
    assert {p.name for p in (ROOT / "bot").iterdir() if (p / "__init__.py").exists()} == {
        "inbound",
        "turn",
        "outbound",
        "process",
    }


def test_the_checker_sees_a_lazy_import(tmp_path: Path) -> None:
    """The check reads imports inside functions too (where the lazy ones hide)."""
    source = tmp_path / "lazy.py"
    source.write_text(
        "def f():\n    from bot.turn.worker import TurnRunner\n    import graph.model\n"
    )
    assert {"bot.turn.worker", "bot.turn.worker.TurnRunner", "graph.model"} <= imports_of(source)


def test_the_checker_sees_a_module_imported_by_name(tmp_path: Path) -> None:
    """A module named in a string counts: how sandbox/prefork.py's fork server imports."""
    source = tmp_path / "by_name.py"
    source.write_text(
        "import importlib\nPRELOAD = ('bot.process.cli', 'json')\n"
        "def f():\n    return importlib.import_module('graph.model'), __import__('gates')\n"
    )
    assert imports_of(source) >= {"bot.process.cli", "graph.model", "gates"}
    assert "json" not in imports_of(source) and "bot.process.nope" not in imports_of(source)
    started = tmp_path / "starts.py"
    started.write_text("ARGV = ['python', '-m', 'bot.process.cli', 'worker']\n")
    assert imports_of(started) == set()  # a process started, not a module imported


def test_every_package_of_ours_has_its_rules() -> None:
    # a package added to the repository without rules of its own fails here
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()} - {"tests"}
    assert packages == set(OURS) == set(ALLOWED)
