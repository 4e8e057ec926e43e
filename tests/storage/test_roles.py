"""The storage bundle of each backend: every role the contract names, each raising only
Workly's errors (workly/storage/interpret.py), and one set of connections behind them."""

from __future__ import annotations

import inspect

import pytest

from workly.errors import StorageError
from workly.storage.contract import Storage
from workly.storage.factory import open_storage

ROLES = (
    "database", "notifier", "tasks", "dispatch", "queues", "webhooks",
    "operations", "callbacks", "schedules", "upkeep", "history",
)  # fmt: skip


def public_coroutines(cls: type) -> list[str]:
    return [
        name
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and inspect.iscoroutinefunction(inspect.unwrap(member))
    ]


@pytest.mark.parametrize("role", ROLES)
async def test_every_method_of_every_role_translates_driver_errors(storage: Storage, role: str) -> None:
    part = getattr(storage, role)
    methods = public_coroutines(type(part))
    assert methods, f"{role} has no methods"
    untranslated = [name for name in methods if not hasattr(getattr(type(part), name), "__wrapped__")]
    assert not untranslated, f"{type(part).__name__}: {untranslated} may raise a driver's error"


async def test_opening_and_closing_translate_driver_errors(storage: Storage) -> None:
    assert hasattr(type(storage).open, "__wrapped__")
    assert hasattr(type(storage).close, "__wrapped__")


async def test_a_database_that_cannot_be_opened_is_a_storage_error() -> None:
    with pytest.raises(StorageError):
        await open_storage("postgresql://postgres@127.0.0.1:1/none", db_timeout=2)
