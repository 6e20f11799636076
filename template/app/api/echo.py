"""A WebSocket echo: the smallest route that proves the upgrade works on an engine."""

from __future__ import annotations

from app.core.framework import APIRouter, WebSocket

router = APIRouter()


@router.websocket("/ws/echo")
async def echo(websocket: WebSocket) -> None:
    """Text comes back as text, bytes as bytes; the client's close ends the loop."""
    await websocket.accept()
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        if message.get("bytes") is not None:
            await websocket.send_bytes(message["bytes"])
        else:
            await websocket.send_text(message.get("text") or "")
