"""Headers every answer carries unless it set its own: ``x-content-type-options: nosniff`` (a
browser never reads a JSON answer or a problem as HTML or script) and ``cache-control:
no-store`` (tasks, secrets and payloads are not kept by a browser or a proxy). Outermost, so
that the guards' refusals carry them too; an answer that says how it may be cached (the
dashboard's stylesheet, /docs assets) keeps its own."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

_DEFAULTS = ((b"x-content-type-options", b"nosniff"), (b"cache-control", b"no-store"))


class AnswerHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_with_defaults(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers.extend((name, value) for name, value in _DEFAULTS if name not in present)
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, send_with_defaults)
