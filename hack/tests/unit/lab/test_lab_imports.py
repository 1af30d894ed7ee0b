"""The lab's imports go one way: no module of hack/gpuops_lab imports, directly or through others, a module that
imports it back. Imports inside functions count (they run the other module all the same), and so do the shims'
`_OnFirstUse("name")` stand-ins, which import their sibling module on first use."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LAB = Path(__file__).resolve().parents[3] / "gpuops_lab"


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same tree it imports (a submodule named in `from . import x` is the edge, not
    its package, whose __init__ Python runs first for every submodule anyway)."""
    mods = _modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", "") == "_OnFirstUse"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                targets = [f"{package}.{node.args[0].value}"]
            graph[name] |= {t for t in targets if t in mods and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": set()}, []),
    ],
)
def test_cycles_finds_each_loop(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(graph) == expected


def test_the_graph_sees_lazy_and_first_use_imports() -> None:
    graph = import_graph(LAB)
    assert "gpuops_lab.hostsim.kernel" in graph["gpuops_lab.hostsim.shims"]  # _OnFirstUse("kernel")
    assert "gpuops_lab.hostsim.kernel" in graph["gpuops_lab.hostsim.services"]  # imported inside a function
    assert "gpuops_lab.hostsim.tree" in graph["gpuops_lab.hostsim.power"]


def test_the_lab_has_no_import_cycle() -> None:
    assert cycles(import_graph(LAB)) == []
