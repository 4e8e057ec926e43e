"""The import graph of workly/: imports point down the layers of docs/architecture.md,
adapters never import each other, only storage knows a database driver, no cycles.

Every import counts, also one inside a function or under TYPE_CHECKING: a lazy import
is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workly"

# Each layer, and the layers it may import (itself always included). Modules directly in
# workly/ (models, errors, config, clock, …) are the foundation everyone stands on.
ALLOWED: dict[str, set[str]] = {
    "foundation": set(),
    "storage": {"foundation"},
    "dispatch": {"foundation", "storage.base"},  # the Storage contract, never a backend
    "service": {"foundation", "storage", "dispatch"},
    "web": {"foundation", "service"},
    "api": {"foundation", "service", "web"},
    "ui": {"foundation", "service", "web"},
    "client": {"foundation"},
    "loadtest": {"foundation", "dispatch"},  # a tool: Workly's HTTP client against a server
    "app": {"foundation", "service", "web", "api", "ui"},  # the composition root
    "cli": {"foundation", "service", "client", "app", "loadtest"},
}
ADAPTERS = ("api", "ui", "client", "cli", "loadtest")
DRIVERS = ("asyncpg", "sqlite3")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    """A subpackage is its own layer; of the modules directly in workly/, app.py is the
    composition root, cli.py and __main__.py the command line, the rest the foundation."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    if top in ("cli", "__main__"):
        return "cli"
    if top == "app" or ((PACKAGE / top).is_dir() and top in ALLOWED):
        return top
    return "foundation"


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            assert node.level == 0, f"{path}: relative import"
            found.add(node.module)
            # "from workly.storage import rows" imports the module workly.storage.rows
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {name: {m for m in imports_of(path) if m in modules} for name, path in modules.items()}


def allowed(importer: str, imported: str) -> bool:
    source, target = layer(importer), layer(imported)
    if source == target:
        return True
    if "storage.base" in ALLOWED[source] and imported in ("workly.storage.base", "workly.storage"):
        return imported == "workly.storage.base"
    return target in ALLOWED[source]


def test_every_layer_is_known() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages - {"migrations"} <= set(ALLOWED)


def test_imports_point_down_the_layers() -> None:
    wrong = sorted(
        f"{importer} ({layer(importer)}) imports {imported} ({layer(imported)})"
        for importer, imported_modules in graph().items()
        for imported in imported_modules
        if not allowed(importer, imported)
    )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_adapters_do_not_import_each_other(adapter: str) -> None:
    # The command line is where the client commands and the load test are reached from.
    others = set(ADAPTERS) - {adapter} - ({"client", "loadtest"} if adapter == "cli" else set())
    wrong = [
        f"{importer} imports {imported}"
        for importer, imported_modules in graph().items()
        if layer(importer) == adapter
        for imported in imported_modules
        if layer(imported) in others
    ]
    assert not wrong


def test_only_the_storage_imports_a_database_driver() -> None:
    wrong = sorted(
        f"{module_name(path)} imports {name}"
        for path in PACKAGE.rglob("*.py")
        if layer(module_name(path)) != "storage"
        for name in imports_of(path)
        if name.split(".")[0] in DRIVERS
    )
    assert not wrong, "\n".join(wrong)


def test_there_is_no_import_cycle() -> None:
    edges = graph()
    cycles = [component for component in strongly_connected(edges) if len(component) > 1]
    assert not cycles, cycles


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
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
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components


def test_the_checks_catch_what_they_are_for() -> None:
    """The rules themselves, on made-up modules: a test that cannot fail checks nothing."""
    assert not allowed("workly.api.tasks", "workly.ui.pages")
    assert not allowed("workly.ui.pages", "workly.api.schemas")
    assert not allowed("workly.api.tasks", "workly.storage.postgres")
    assert not allowed("workly.dispatch.dispatcher", "workly.storage.postgres")
    assert allowed("workly.dispatch.dispatcher", "workly.storage.base")
    assert not allowed("workly.storage.sqlite", "workly.service.core")
    assert not allowed("workly.models", "workly.storage.base")
    assert allowed("workly.app", "workly.ui.pages")
    assert [sorted(c) for c in strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"a"}}) if len(c) > 1] == [
        ["a", "b"]
    ]
