"""Routes to measure and to test against: one that waits as a handler waiting on a
database would, one with a path parameter, one that reads a body."""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, Query, Request

router = APIRouter(prefix="/demo", tags=["demo"])
LOGGER = logging.getLogger(__name__)


@router.get("/sleep")
async def sleep(ms: float = Query(default=10, ge=0, le=10_000)) -> dict[str, float]:
    await asyncio.sleep(ms / 1000)
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
