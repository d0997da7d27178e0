"""The package has no import circles: not between modules, not between its parts.

Every import counts: at module level, inside a function (a lazy import hides a
circle, it does not remove it) and under ``TYPE_CHECKING``. A circle means a
helper sits in the wrong module; the layers are listed in docs/design.md.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_evomemory"
NAME = PACKAGE.name


def _modules(package: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    modules = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = (path, is_package)
    return modules


@functools.cache
def _import_nodes(package: Path) -> Mapping[str, tuple[bool, tuple[ast.Import | ast.ImportFrom, ...]]]:
    """module -> (whether it is a package, every import statement in its code), the
    package parsed once per test process: each check below reads the same sources, and
    parsing them all was most of each check's second of CPU."""
    return {
        name: (is_package, tuple(
            node for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Import | ast.ImportFrom)
        ))
        for name, (path, is_package) in _modules(package).items()
    }


@functools.cache
def import_graph() -> Mapping[str, frozenset[str]]:
    """module -> the package's modules it imports, anywhere in its code."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (is_package, nodes) in _import_nodes(PACKAGE).items():
        base = name.split(".") if is_package else name.split(".")[:-1]
        for node in nodes:
            for target in _targets(node, base, modules):
                if target != name:
                    graph[name].add(target)
    return {name: frozenset(targets) for name, targets in graph.items()}


def _targets(node: ast.AST, base: list[str], modules: dict[str, tuple[Path, bool]]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names if alias.name in modules)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            parent = base[: len(base) - (node.level - 1)]
            module = ".".join([*parent, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        if not module.startswith(NAME):
            return
        for alias in node.names:
            submodule = f"{module}.{alias.name}"
            found = submodule if submodule in modules else module
            if found in modules:
                yield found


def cycles(graph: Mapping[str, AbstractSet[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def part_of(module: str) -> str:
    """``pytest_evomemory.memory.sqlite`` -> ``pytest_evomemory.memory``."""
    return ".".join(module.split(".")[:2])


def _explain(graph: Mapping[str, AbstractSet[str]], component: list[str]) -> str:
    inside = set(component)
    return "; ".join(f"{node} -> {sorted(graph[node] & inside)}" for node in component)


def test_no_module_imports_itself_through_others() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import circles: " + " | ".join(_explain(graph, component) for component in found)


def test_no_part_of_the_package_imports_itself_through_others() -> None:
    graph = import_graph()
    parts: dict[str, set[str]] = {}
    why: dict[tuple[str, str], str] = {}
    for module, imported in graph.items():
        for other in imported:
            source, target = part_of(module), part_of(other)
            if source != target:
                parts.setdefault(source, set()).add(target)
                why.setdefault((source, target), f"{module} -> {other}")
    found = cycles(parts)
    explained = [
        "; ".join(why[(a, b)] for a in component for b in component if (a, b) in why) for component in found
    ]
    assert not found, "circles between parts of the package: " + " | ".join(explained)


#: Parts that never import the parts above them (docs/design.md's layers): the
#: analysis computes from records alone (it reads no run directory); the run
#: directory's reader checks a finished run's records against its summary with the
#: analysis's counts, and knows no engine nor renderer; the engine computes with the analysis below
#: it and has its pages and tables written by the renderers through a protocol the
#: entry points fill (runtime/reports.py), never importing them.
#: The low parts (util, rundocs, core, config) import only the parts below them:
#: the helpers nothing, the run documents the helpers, the vocabulary both, the
#: config models those and the options' limits.
_COMPONENTS = ("evaluation", "memory", "models", "agents", "streams", "configs", "rundir", "testing", "schema")
ABOVE = {
    "util": ("rundocs", "core", "options", "config", *_COMPONENTS, "analysis", "runtime", "reporting", "plugin", "cli"),
    "rundocs": ("core", "options", "config", *_COMPONENTS, "analysis", "runtime", "reporting", "plugin", "cli"),
    "core": ("options", "config", *_COMPONENTS, "analysis", "runtime", "reporting", "plugin", "cli"),
    "config": (*_COMPONENTS, "analysis", "runtime", "reporting", "plugin", "cli"),
    "analysis": ("rundir", "reporting", "runtime", "plugin", "cli"),
    "rundir": ("runtime", "reporting", "plugin", "cli"),
    "runtime": ("reporting", "plugin", "cli"),
}


def imports_from_above(graph: Mapping[str, AbstractSet[str]], part: str) -> list[str]:
    """``module -> imported`` for each import of a part above ``part``."""
    above = {f"{NAME}.{name}" for name in ABOVE[part]}
    return sorted(
        f"{module} -> {other}"
        for module, imported in graph.items() if part_of(module) == f"{NAME}.{part}"
        for other in imported if part_of(other) in above
    )


@pytest.mark.parametrize(
    "part",
    [
        "util",
        "rundocs",
        "core",
        "config",
        "analysis",
        "rundir",
        "runtime",
    ],
)
def test_a_layer_imports_no_part_above_it(part: str) -> None:
    found = imports_from_above(import_graph(), part)
    assert not found, f"{part}/ imports a part above it: " + "; ".join(found)


def test_the_layer_check_sees_an_import_from_above() -> None:
    graph = {f"{NAME}.analysis.stats": {f"{NAME}.reporting.html", f"{NAME}.rundocs"}}
    assert imports_from_above(graph, "analysis") == [f"{NAME}.analysis.stats -> {NAME}.reporting.html"]


@pytest.mark.parametrize(
    "source",
    [
        "from .b import x\n",  # a module-level import
        "def f():\n    from .b import x\n",  # a lazy one hides a circle, it does not remove it
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import x\n",
    ],
)
def test_the_check_sees_every_kind_of_import(source: str) -> None:
    base = [NAME, "pkg"]
    modules = {f"{NAME}.pkg.a": (Path("a.py"), False), f"{NAME}.pkg.b": (Path("b.py"), False)}
    targets = {target for node in ast.walk(ast.parse(source)) for target in _targets(node, base, modules)}
    assert targets == {f"{NAME}.pkg.b"}
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def unresolved_imports(package: Path = PACKAGE) -> list[str]:
    """``module:line -> target`` for each import of the package (relative or absolute,
    lazy ones included) that names no module or package of it: a module moved without
    its lazy imports rewritten fails only when that function first runs."""
    modules = _modules(package)
    found = []
    for name, (is_package, nodes) in _import_nodes(package).items():
        base = name.split(".") if is_package else name.split(".")[:-1]
        for node in nodes:
            if isinstance(node, ast.ImportFrom) and node.level:
                parent = base[: len(base) - (node.level - 1)]
                target = ".".join([*parent, *([node.module] if node.module else [])])
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(NAME):
                target = node.module or ""
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names if alias.name.startswith(f"{NAME}.")]
                found += [f"{name}:{node.lineno} -> {t}" for t in targets if t not in modules]
                continue
            else:
                continue
            if target not in modules:
                found.append(f"{name}:{node.lineno} -> {target}")
    return found


def test_every_import_of_the_package_names_one_of_its_modules() -> None:
    assert not unresolved_imports()


def test_the_resolution_check_sees_a_lazy_import_of_a_moved_module(tmp_path: Path) -> None:
    package = tmp_path / NAME
    (package / "cli").mkdir(parents=True)
    (package / "rundir").mkdir()
    for init in (package, package / "cli", package / "rundir"):
        (init / "__init__.py").write_text("", encoding="utf-8")
    (package / "cli" / "run.py").write_text(
        "from ..rundir import RunWriter\n\ndef f() -> None:\n    from .rundir import RunWriter\n", encoding="utf-8"
    )
    assert unresolved_imports(package) == [f"{NAME}.cli.run:4 -> {NAME}.cli.rundir"]
