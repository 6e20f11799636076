"""WEBSERVER_WEBSOCKETS=false where the engine has no switch of its own (gunicorn's
asgi worker): a WebSocket upgrade is refused, closed before it is accepted (gunicorn
then answers 403). uvicorn (`ws="none"`) and granian (`websockets=False`) answer 404."""

from __future__ import annotations

from app.core.asgi import ASGIApp, Receive, Scope, Send


class WebSocketsOff:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1000})
            return
        await self.app(scope, receive, send)
