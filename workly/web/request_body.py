"""Reading a request body at the ASGI level, within a size limit, and handing it on."""

from __future__ import annotations

from starlette.types import Message, Receive


class BodyTooLarge(Exception):
    """The body grew past the limit; the rest was not read."""


async def read_body(receive: Receive, limit: int | None = None) -> bytes | None:
    """The whole body; None when the client disconnected before sending it all;
    BodyTooLarge as soon as more than ``limit`` bytes have arrived."""
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if limit is not None and size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes) -> Receive:
    """A receive that hands the already-read body to the next app, then waits as usual."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive
