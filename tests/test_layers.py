"""The pipeline's layers, read from the source with ``ast``: parse → bundle → model → analysis →
tables (and verify, export) → figures → commands. A module may import its own stage and the stages before it; the
shared leaves (errors, ranges, console) may be imported by any."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fuseprof"
LEAVES = {"fuseprof", "fuseprof.errors", "fuseprof.ranges", "fuseprof.console", "fuseprof.builtin_cases",
          "fuseprof.output_paths"}
# stage -> the stages it may import (besides the leaves and itself)
ALLOWED = {
    "parse": set(),
    "bundle": {"parse"},
    "model": {"parse", "bundle"},
    "analysis": {"parse", "bundle", "model"},
    "tables": {"parse", "bundle", "model", "analysis"},
    # a trace's chains replayed and timed: reads the analysis, runs the capture's timing on cases
    "verify": {"parse", "bundle", "model", "analysis", "capture", "case"},
    # findings written back as traces and SQL: reads the analysis and its tables
    "export": {"parse", "bundle", "model", "analysis", "tables"},
}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "fuseprof" and len(parts) > 1 else None


@pytest.mark.parametrize("stage", sorted(ALLOWED))
def test_a_stage_imports_only_the_stages_before_it(stage: str) -> None:
    wrong = []
    for path in sorted((PACKAGE / stage).rglob("*.py")):
        for module in _imports(path):
            if not module.startswith("fuseprof") or module in LEAVES or module.startswith("fuseprof_kernels"):
                continue
            target = _stage(module)
            if target != stage and target not in ALLOWED[stage]:
                wrong.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_the_tool_imports_no_private_module_of_the_kernels() -> None:
    private = [f"{p.relative_to(PACKAGE)}: {m}" for p in PACKAGE.rglob("*.py") for m in _imports(p)
               if m.startswith("fuseprof_kernels.") and any(part.startswith("_") for part in m.split(".")[1:])]
    assert not private, private


def test_cli_is_only_the_table_reader_and_no_function_is_long() -> None:
    assert len((PACKAGE / "cli.py").read_text().splitlines()) <= 100
    long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                length = node.end_lineno - node.lineno + 1
                if length > 60:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({length} lines)")
    assert not long, long


def test_op_names_live_only_in_the_registry_data() -> None:
    """Op knowledge sits in the registry a user extends: no module but its data names an op (a quoted
    ``aten::`` name or pattern), so a new op is one row there, never an edit of a judgement."""
    import re

    named = re.compile(r"[\"']\^?aten::")
    where = [f"{p.relative_to(PACKAGE.parent)}:{i}" for base in (PACKAGE, PACKAGE.parent / "dashboards")
             for p in sorted(base.rglob("*.py")) if p.name != "registry_data.py"
             for i, line in enumerate(p.read_text().splitlines(), start=1) if named.search(line)]
    assert not where, where


def test_the_byte_model_and_the_replay_read_one_dataflow() -> None:
    """The fused-bytes model and the --verify replay link tensors through the same module."""
    for module in ("analysis/judgements/fusion.py", "verify/replay.py"):
        assert "fuseprof.model.dataflow" in _imports(PACKAGE / module), module


def _module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Every import between the package's modules, wherever it stands: at the top, inside a function, or under
    ``TYPE_CHECKING`` (a circle through type-only imports still ties the modules' meanings together)."""
    modules = {_module_of(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for name in _imports(path):
            # ``from fuseprof.x import y`` names a module when y is one, else x
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module and name != "fuseprof":
                targets.add(name)
        graph[module] = targets
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_at_run_time_or_for_types() -> None:
    assert not _circles(_import_graph())



# analysis/'s own layers, from the bottom: what happened, the dependency graph and its replays, what to make of
# it, and running it all (a layer imports its own and those below it; the result type is read by every layer)
ANALYSIS_LAYERS = ("facts", "paths", "judgements", "running")


def test_analysis_layers_import_only_downwards() -> None:
    wrong = []
    for path in sorted((PACKAGE / "analysis").rglob("*.py")):
        layer = path.relative_to(PACKAGE / "analysis").parts[0]
        if layer not in ANALYSIS_LAYERS:
            continue
        for module in _imports(path):
            parts = module.split(".")
            if parts[:2] == ["fuseprof", "analysis"] and len(parts) > 2 and parts[2] in ANALYSIS_LAYERS:
                if ANALYSIS_LAYERS.index(parts[2]) > ANALYSIS_LAYERS.index(layer):
                    wrong.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_every_package_folder_is_in_the_wheel() -> None:
    """pyproject.toml lists the packages by name (the kernels folder installs under another name), so a new
    folder left off the list is missing from every wheel while the editable checkout still imports it."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {_module_of(p) for p in PACKAGE.rglob("__init__.py")}
    assert folders <= listed, sorted(folders - listed)
