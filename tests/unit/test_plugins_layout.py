"""The layout of plugins/: the import graph of the collection's own Python has no cycle, every import of the
collection names a file that exists, the status code imports no role builder, and no file is over 600 lines
(DOCUMENTATION, EXAMPLES and RETURN not counted). Read statically, as ansible-core's module payload builder reads
the imports of a module."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "plugins"
PREFIX = "ansible_collections.gpuops.platform."
MAX_LINES = 600
DOC_STRINGS = {"DOCUMENTATION", "EXAMPLES", "RETURN"}
# Over the limit today, each split by its own change: the file and the most lines it may have until then (a file
# that grows past its figure fails, and so does an entry whose file is back under the limit).
OVER_LIMIT: dict[str, int] = {}
# The status code (readiness, cluster status, diagnosis) reads objects; the roles' builders import its predicates,
# never the other way.
BUILDERS = ("plugins.module_utils.network.", "plugins.module_utils.sriov.", "plugins.module_utils.monitoring.")
BUILDERS += ("plugins.module_utils.smoke.", "plugins.module_utils.inputs.")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PLUGINS.rglob("*.py"))}


def imports(path: Path, known: Mapping[str, Path]) -> tuple[set[str], list[str]]:
    """The collection's modules that ``path`` imports (module level or inside a function) and the imports that
    name no file."""
    deps: set[str] = set()
    missing: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if not node.module.startswith(PREFIX):
                continue
            base = node.module[len(PREFIX) :]
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    deps.add(f"{base}.{alias.name}")
                elif base in known:
                    deps.add(base)
                else:
                    missing.append(f"{node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX):
                    name = alias.name[len(PREFIX) :]
                    (deps.add(name) if name in known else missing.append(alias.name))
    return deps, missing


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, known)[0] for name, path in known.items()}


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module, or one that imports itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def lines(path: Path) -> int:
    """The file's lines less those of its DOCUMENTATION, EXAMPLES and RETURN strings."""
    text = path.read_text()
    doc = 0
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in DOC_STRINGS for t in node.targets):
            doc += (node.end_lineno or node.lineno) - node.lineno + 1
    return len(text.splitlines()) - doc


@pytest.mark.parametrize(
    ("edges", "found"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"a"}}, [["a"]]),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
    ],
)
def test_cycles_finds_every_cycle(edges, found):
    assert sorted(cycles(edges)) == found


def test_the_import_graph_is_read():
    edges = graph()
    # a sample of known edges: the reader follows module-level, grouped and function-level imports
    assert "plugins.module_utils.status._readiness" in edges["plugins.modules.gpu_cluster_status"]
    assert "plugins.module_utils.status._network_ready" in edges["plugins.module_utils.status._readiness"]
    assert "plugins.module_utils.status._network_ready" in edges["plugins.module_utils.network._network"]
    assert sum(len(d) for d in edges.values()) > 300


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_no_cycle_between_module_utils_packages():
    """Packages import one another one way (status never imports network, and so on). The files still at the top of
    module_utils are no package and are left out."""
    packages: dict[str, set[str]] = {}
    for name, deps in graph().items():
        parts = name.split(".")
        if parts[1] != "module_utils" or len(parts) < 4:
            continue
        packages.setdefault(parts[2], set()).update(
            d.split(".")[2] for d in deps if d.split(".")[1] == "module_utils" and len(d.split(".")) >= 4
        )
    assert {"common", "host", "k8s", "network", "sriov", "status"} <= set(packages)
    assert cycles({k: v - {k} for k, v in packages.items()}) == []


def test_every_import_names_a_file():
    known = modules()
    missing = {str(p.relative_to(REPO)): m for p in known.values() if (m := imports(p, known)[1])}
    assert missing == {}


def test_the_status_code_imports_no_builder():
    wrong = {
        name: sorted(d for d in deps if d.startswith(BUILDERS))
        for name, deps in graph().items()
        if name.startswith("plugins.module_utils.status.")
    }
    assert {k: v for k, v in wrong.items() if v} == {}


def test_no_file_over_600_lines():
    sizes = {str(p.relative_to(REPO)): lines(p) for p in sorted(PLUGINS.rglob("*.py"))}
    over = {path: n for path, n in sizes.items() if n > OVER_LIMIT.get(path, MAX_LINES)}
    assert over == {}
    stale = {path: sizes.get(path) for path in OVER_LIMIT if sizes.get(path, 0) <= MAX_LINES}
    assert stale == {}, "remove these entries of OVER_LIMIT"


def test_module_utils_packages_have_an_empty_init():
    packages = {p for p in (PLUGINS / "module_utils").rglob("*") if p.is_dir() and p.name != "__pycache__"}
    assert packages
    assert {str(p.relative_to(REPO)) for p in packages if not (p / "__init__.py").is_file()} == set()
    assert [str(p) for p in packages if (p / "__init__.py").read_text()] == []
