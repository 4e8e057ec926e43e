"""List pages of the newer routes (endpoints, events): ``limit`` (default 50, at most 500)
and an opaque ``cursor``; a cursor this API did not hand out is a 400 ``bad-cursor``
problem, as for task lists."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, TypeVar

from fastapi import Query

from workly.web import representation as rep
from workly.web.problems import problem
from workly.web.responses import JSONResponse

Limit = Annotated[int, Query(ge=1, le=500)]
Cursor = Annotated[str | None, Query(max_length=64)]
Item = TypeVar("Item")
BAD_CURSOR = "The cursor is invalid: pass next_cursor from a previous page."


async def page(
    plural: str,
    cursor: str | None,
    fetch: Callable[[int | None], Awaitable[tuple[Sequence[Item], int | None]]],
    render: Callable[[Item], dict[str, Any]],
) -> JSONResponse:
    """``{plural: [...], "next_cursor": ...}``: the page ``fetch`` finds before the cursor's
    seq (from the newest without one), each item rendered."""
    try:
        before = None if cursor is None else rep.decode_cursor(cursor)
    except ValueError:
        return problem(400, BAD_CURSOR, "bad-cursor")
    items, next_seq = await fetch(before)
    return JSONResponse(
        {plural: [render(item) for item in items], "next_cursor": rep.encode_cursor(next_seq)}
    )
