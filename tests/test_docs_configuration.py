"""docs/configuration.md documents every setting, with the code's default.

The field list and the defaults come from ``Settings.model_fields``. The page's table has one
row per variable: ``| `WORKLY_NAME` | default | unit | meaning |``, where the default is the
code's value in backticks, written as it would be set (``true``/``false`` for booleans), or
``unset`` when the code's default is None.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from workly.config import Settings

PAGE = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
PREFIX = str(Settings.model_config.get("env_prefix", ""))
ROW = re.compile(r"^\|\s*`(?P<name>WORKLY_[A-Z0-9_]+)`\s*\|(?P<default>[^|]*)\|")


def documented_default(value: Any) -> str:
    """How the page writes a default: ``unset`` for None, else the value in backticks."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    return f"`{value}`"


def env_name(field: str) -> str:
    return (PREFIX + field).upper()


def code_defaults() -> dict[str, Any]:
    return {env_name(name): field.default for name, field in Settings.model_fields.items()}


def documented_rows() -> dict[str, str]:
    """Variable → the default cell, for every table row that starts with a variable."""
    rows: dict[str, str] = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            name = match["name"]
            assert name not in rows, f"{name} has two rows in {PAGE.name}"
            rows[name] = match["default"].strip()
    return rows


def test_the_settings_have_fields_and_the_page_has_rows() -> None:
    assert PREFIX == "WORKLY_"
    assert len(code_defaults()) >= 20
    assert len(documented_rows()) >= 20


@pytest.mark.parametrize("variable", sorted(code_defaults()))
def test_every_setting_is_documented_with_its_default(variable: str) -> None:
    rows = documented_rows()
    assert variable in rows, f"{variable} is a Settings field but has no row in docs/configuration.md"
    expected = documented_default(code_defaults()[variable])
    assert rows[variable] == expected, (
        f"docs/configuration.md gives {variable} the default {rows[variable]!r}; the code's is {expected!r}"
    )


def test_the_page_documents_no_variable_that_settings_does_not_read() -> None:
    unknown = sorted(set(documented_rows()) - set(code_defaults()))
    assert not unknown, f"docs/configuration.md documents variables Settings does not have: {unknown}"


def test_each_documented_default_read_from_the_environment_is_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The page's way of writing each default, set as the variable, gives the code's value."""
    defaults = code_defaults()
    for variable in defaults:
        monkeypatch.delenv(variable, raising=False)
    for variable, cell in documented_rows().items():
        if variable in defaults and cell != "unset":
            monkeypatch.setenv(variable, cell.strip("`"))
    settings = Settings()
    for name in Settings.model_fields:
        assert getattr(settings, name) == defaults[env_name(name)], env_name(name)
