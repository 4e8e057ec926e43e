"""Media types: which content types count as JSON."""

from __future__ import annotations


def is_json_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def header_value(headers: dict[str, str], name: str) -> str | None:
    """A header's value by case-insensitive name."""
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None
