"""Base for middleware that only adds headers to the response start."""

from __future__ import annotations

import abc

from starlette.types import ASGIApp, Receive, Scope, Send

from app.middleware.messages import Message, add_headers


class StartHeadersMiddleware(abc.ABC):
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    @abc.abstractmethod
    def response_headers(self, scope: Scope) -> list[tuple[bytes, bytes]]:
        """Headers for this request's response (may also record things in scope)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = self.response_headers(scope)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                add_headers(message, headers)
            await send(message)

        await self.app(scope, receive, send_with_headers)
