"""Routes to measure and to test against: one that waits as a handler waiting on a
database would, one with a path parameter, one that reads a body, and a stream of
server-sent events that ends with a last event when the server stops."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import anyio

from app.core.framework import APIRouter, Query, Request, StreamingResponse
from app.core.stopping import server_stopping

router = APIRouter(prefix="/demo", tags=["demo"])
LOGGER = logging.getLogger(__name__)


@router.get("/sleep")
async def sleep(ms: float = Query(default=10, ge=0, le=10_000)) -> dict[str, float]:
    # AnyIO's sleep, not asyncio's: it runs on every loop, trio included.
    await anyio.sleep(ms / 1000)
    return {"slept_ms": ms}


@router.get("/items/{item_id}")
async def item(item_id: int) -> dict[str, int]:
    return {"item_id": item_id}


@router.post("/echo")
async def echo_body(request: Request) -> dict[str, int]:
    received = len(await request.body())
    # A record of the app's own: it carries this request's id (and trace id) in
    # WEBSERVER_LOG_FORMAT=json (app/core/logs.py). Shown at WEBSERVER_LOG_LEVEL=debug.
    LOGGER.debug("echo received %d bytes", received)
    return {"received_bytes": received}


EVENT_STREAM = {200: {"description": "Server-sent events: `tick` events, then `bye`",
                     "content": {"text/event-stream": {"schema": {"type": "string"}}}}}


@router.get("/events", response_class=StreamingResponse, responses=EVENT_STREAM)
async def events(every: float = Query(default=1.0, gt=0, le=60)) -> StreamingResponse:
    """A tick every `every` seconds until the server stops, then a last event: a client
    reconnects, to a worker that goes on serving (app/core/stopping.py)."""
    async def ticks() -> AsyncIterator[str]:
        count = 0
        while not server_stopping.is_set():
            yield f"event: tick\ndata: {count}\n\n"
            count += 1
            await server_stopping.wait(timeout=every)
        yield "event: bye\ndata: the server is stopping; reconnect\n\n"

    return StreamingResponse(ticks(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store"})
