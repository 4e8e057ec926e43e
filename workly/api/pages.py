"""List pages of the newer routes (endpoints, events): ``limit`` (default 50, at most 500)
and an opaque ``cursor``; a cursor this API did not hand out is a 400."""

from __future__ import annotations

from typing import Annotated

from fastapi import HTTPException, Query

from workly.web import representation as rep

Limit = Annotated[int, Query(ge=1, le=500)]
Cursor = Annotated[str | None, Query(max_length=64)]


def page_start(cursor: str | None) -> int | None:
    """The seq a page continues before; None for the first page."""
    if cursor is None:
        return None
    try:
        return rep.decode_cursor(cursor)
    except ValueError:
        raise HTTPException(400, "The cursor is invalid: pass next_cursor from a previous page.") from None
