"""No test sleeps for a fixed time to let something happen: it waits on what it can observe
(a polling loop on state, an event, a condition) or moves a virtual clock.

A sleep with a non-zero duration may stand only inside a loop (a poll between looks at
state) or where the duration is the scenario itself, marked ``# a stall, not a wait`` on
its line or the line above (a process kept stopped, a loop kept busy, a slow receiver).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
MARK = "a stall, not a wait"


def fixed_sleeps(source: str) -> list[int]:
    """Lines of sleep calls with a non-zero duration outside any loop and unmarked."""
    tree = ast.parse(source)
    lines = source.splitlines()
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args and ast.unparse(node.func).endswith("sleep")):
            continue
        duration = node.args[0]
        if isinstance(duration, ast.Constant) and duration.value == 0:
            continue
        if not _in_loop(node, parents) and not _marked(lines, node.lineno):
            found.append(node.lineno)
    return sorted(found)


def _marked(lines: list[str], lineno: int) -> bool:
    """The mark on the call's line, or on a comment line right above it."""
    above = lines[lineno - 2].strip() if lineno >= 2 else ""
    return MARK in lines[lineno - 1] or (above.startswith("#") and MARK in above)


def _in_loop(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.While, ast.For, ast.AsyncFor)):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
    return False


def test_no_test_sleeps_a_fixed_time() -> None:
    wrong = [
        f"{path.relative_to(TESTS.parent)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        for line in fixed_sleeps(path.read_text("utf-8"))
    ]
    assert not wrong, "sleeps that should wait on state or virtual time:\n" + "\n".join(wrong)


def test_the_check_catches_what_it_is_for() -> None:
    source = """
async def f():
    await asyncio.sleep(0.5)
    await asyncio.sleep(0)
    while not done():
        await asyncio.sleep(0.01)
    # a stall, not a wait: kept stopped
    time.sleep(2)
    time.sleep(1)  # a stall, not a wait: blocked
    time.sleep(delay)
"""
    assert fixed_sleeps(source) == [3, 10]
