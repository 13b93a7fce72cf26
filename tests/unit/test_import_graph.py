"""No import circle among crossalign's modules, function-level imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import crossalign

ROOT = Path(crossalign.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """crossalign modules ``path`` imports anywhere (module level, functions, TYPE_CHECKING
    blocks excluded): for ``from a import b`` the module ``a.b`` when it is one, else ``a``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skipped = {
        id(node)
        for guard in ast.walk(tree)
        if isinstance(guard, ast.If) and "TYPE_CHECKING" in ast.unparse(guard.test)
        for stmt in guard.body
        for node in ast.walk(stmt)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in modules:
                    found.add(sub)
                elif base in modules:
                    found.add(base)
    found.discard(name)
    return found


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    modules = set(paths)
    return {name: _imports(path, name, modules) for name, path in paths.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (a module → imported modules map), or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_cycle_finder_sees_a_function_level_circle(tmp_path: Path) -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    code = "def f():\n    from crossalign.x import y\n"
    (tmp_path / "m.py").write_text(code, encoding="utf-8")
    assert _imports(tmp_path / "m.py", "m", {"crossalign.x", "crossalign.x.y"}) == {
        "crossalign.x.y"
    }


def test_no_import_circle_in_crossalign() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_data_objectives_and_evals_import_nothing_of_the_training_loop() -> None:
    """The training loop sits above what it drives: the data layer imports no objective and
    no training module, and objectives and evaluations import no training module (the
    held-out evaluation they share lives in ``evals.heldout``, ``ObjectiveSet`` in
    ``objectives``)."""
    above = {
        "crossalign.data": ("crossalign.objectives", "crossalign.training"),
        "crossalign.objectives": ("crossalign.training", "crossalign.evals"),
        "crossalign.evals": ("crossalign.training",),
    }
    graph = _graph()
    upward = sorted(
        f"{module} -> {imported}"
        for layer, forbidden in above.items()
        for module, imports in graph.items()
        if module == layer or module.startswith(layer + ".")
        for imported in imports
        if imported.startswith(forbidden)
    )
    assert not upward, "imports from a layer above: " + ", ".join(upward)


LIBRARY_ALLOWED_CLI = {"crossalign.__main__"}
"""Modules below the CLI that may import it: the entry point alone."""


def test_the_library_does_not_import_the_cli() -> None:
    offenders = {
        name: sorted(
            m for m in imported if m == "crossalign.cli" or m.startswith("crossalign.cli.")
        )
        for name, imported in _graph().items()
        if not name.startswith("crossalign.cli") and name not in LIBRARY_ALLOWED_CLI
    }
    assert {name: found for name, found in offenders.items() if found} == {}


FLOORS: list[tuple[str, ...]] = [
    ("cli", "__main__"),
    ("api",),
    ("study",),
    ("report",),
    ("training", "probes"),
    ("evals",),
    ("objectives", "objective_options"),
    ("align", "lexicon", "cooc"),
    ("models",),
    ("data",),
    ("config", "run_dir", "checkpoint", "tracking", "schedules", "hub", "stats", "languages",
     "extras"),
    ("options", "schema", "registry", "errors", "fileio", "checks"),
]  # fmt: skip
"""The floors of docs/architecture.md, top to bottom: a module imports only from its own floor
or the floors below it (top-level packages and modules of crossalign, by name)."""


def _floor(module: str) -> int | None:
    """The floor of a crossalign module (None: the package itself)."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    for i, names in enumerate(FLOORS):
        if parts[1] in names:
            return i
    raise AssertionError(f"{module} is on no floor: add it to FLOORS and docs/architecture.md")


def upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a floor to a floor above it, as ``a -> b``."""
    found = []
    for module, imported in sorted(graph.items()):
        low = _floor(module)
        for other in sorted(imported):
            high = _floor(other)
            if low is not None and high is not None and high < low:
                found.append(f"{module} -> {other}")
    return found


def test_the_floor_finder_sees_an_upward_arrow() -> None:
    graph = {
        "crossalign.data.x": {"crossalign.objectives.base"},
        "crossalign.cli.y": {"crossalign.data.x"},
    }
    assert upward_arrows(graph) == ["crossalign.data.x -> crossalign.objectives.base"]


def test_layers_point_down() -> None:
    found = upward_arrows(_graph())
    assert not found, "imports that point up a floor (docs/architecture.md):\n" + "\n".join(found)
