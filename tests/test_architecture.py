"""The import graph of workly/: imports point down the layers of docs/architecture.md,
adapters never import each other, only storage knows a database driver, no cycles; and
who may hold a whole ``Storage`` (the composition root) rather than one of its roles.

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
    "dispatch": {"foundation", "storage.contract"},  # the storage roles, never a backend
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
CONTRACT = "workly.storage.contract"
# Where a whole Storage (every role of one backend) may be named: what opens one and hands
# its roles out. Everything else takes the role it uses (workly/storage/contract).
HOLDS_STORAGE = {
    "workly.storage.factory",  # opens one from a URL
    "workly.service.assembly",  # the composition root: gives each part its role
    "workly.service.core",  # migrate_database, and the service's start and stop
    "workly.service.doctor",  # `workly doctor` and `workly recount` open one for themselves
}
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
    if "storage.contract" in ALLOWED[source] and target == "storage":
        return is_contract(imported)
    return target in ALLOWED[source]


def is_contract(module: str) -> bool:
    return module == CONTRACT or module.startswith(CONTRACT + ".")


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


def test_the_contract_names_no_backend() -> None:
    """The roles are what both backends implement: they import only the foundation and
    each other, so a consumer of a role never pulls a backend in."""
    wrong = sorted(
        f"{importer} imports {imported}"
        for importer, imported_modules in graph().items()
        if is_contract(importer)
        for imported in imported_modules
        if layer(imported) != "foundation" and not is_contract(imported)
    )
    assert not wrong, "\n".join(wrong)


def names_imported(path: Path, module: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == module:
            found.update(alias.name for alias in node.names)
    return found


def test_consumers_take_a_storage_role_not_the_whole_storage() -> None:
    holders = {
        module_name(path) for path in PACKAGE.rglob("*.py") if "Storage" in names_imported(path, CONTRACT)
    }
    assert holders <= HOLDS_STORAGE, sorted(holders - HOLDS_STORAGE)


def is_record(node: ast.ClassDef) -> bool:
    """A frozen dataclass without methods: fields only, nothing private to share."""
    frozen = any(
        isinstance(d, ast.Call)
        and ast.unparse(d.func).endswith("dataclass")
        and any(k.arg == "frozen" and ast.unparse(k.value) == "True" for k in d.keywords)
        for d in node.decorator_list
    )
    return frozen and not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in node.body)


def workly_classes(sources: dict[str, str]) -> dict[str, tuple[str, list[str], bool]]:
    """Each class defined in ``sources`` (module → text): its module, its bases' names, and
    whether it is a record."""
    classes: dict[str, tuple[str, list[str], bool]] = {}
    for module, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base).split("[")[0].split(".")[-1] for base in node.bases]
                classes[node.name] = (module, bases, is_record(node))
    return classes


def inherited_state(sources: dict[str, str], layers: tuple[str, ...]) -> list[str]:
    """Classes of ``layers`` that inherit from one of Workly's classes: a mixin or a base
    class shares private state with its subclasses. What may be inherited: protocols
    (structural, no state), records (fields only) and Workly's errors."""
    classes = workly_classes(sources)

    def is_protocol(name: str) -> bool:
        return name == "Protocol" or any(is_protocol(b) for b in classes.get(name, ("", [], False))[1])

    def may_inherit(base: str) -> bool:
        module, _, record = classes[base]
        return is_protocol(base) or record or module == "workly.errors"

    wrong = []
    for name, (module, bases, _) in sorted(classes.items()):
        if layer(module) not in layers:
            continue
        wrong += [
            f"{module}.{name} inherits {classes[b][0]}.{b}"
            for b in bases
            if b in classes and not may_inherit(b)
        ]
    return wrong


def test_no_class_in_storage_or_service_inherits_another_s_state() -> None:
    sources = {module_name(path): path.read_text("utf-8") for path in PACKAGE.rglob("*.py")}
    wrong = inherited_state(sources, ("storage", "service"))
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
    assert allowed("workly.dispatch.dispatcher", "workly.storage.contract")
    assert allowed("workly.dispatch.dispatcher", "workly.storage.contract.dispatch")
    assert not allowed("workly.dispatch.dispatcher", "workly.storage.postgres.dispatch")
    assert not allowed("workly.dispatch.dispatcher", "workly.storage.contractual")
    assert not allowed("workly.storage.sqlite", "workly.service.core")
    assert not allowed("workly.models", "workly.storage.contract")
    assert allowed("workly.app", "workly.ui.pages")
    mixins = {
        "workly.storage.contract.x": "class Role(Protocol): ...\nclass Bigger(Role, Protocol): ...",
        "workly.storage.pg.x": "class Part:\n    _pool = None\n"
        "class Whole(Part, Bigger): ...\nclass Ok(Bigger): ...",
        "workly.errors": "class WorklyError(Exception): ...",
        "workly.service.x": "class Refused(WorklyError): ...\nclass Node(ast.AST): ...\n"
        "@dataclass(frozen=True)\nclass Rec:\n    a: int\nclass Rec2(Rec): ...\n"
        "@dataclass(frozen=True)\nclass Meth:\n    def f(self): ...\nclass Meth2(Meth): ...",
    }
    assert inherited_state(mixins, ("storage", "service")) == [
        "workly.service.x.Meth2 inherits workly.service.x.Meth",
        "workly.storage.pg.x.Whole inherits workly.storage.pg.x.Part",
    ]
    assert [sorted(c) for c in strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"a"}}) if len(c) > 1] == [
        ["a", "b"]
    ]
