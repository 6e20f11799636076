"""Routes to measure and to test against: one that waits as a handler waiting on a
database would, one with a path parameter, one that reads a body."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Query, Request

router = APIRouter(prefix="/demo", tags=["demo"])


@router.get("/sleep")
async def sleep(ms: float = Query(default=10, ge=0, le=10_000)) -> dict[str, float]:
    await asyncio.sleep(ms / 1000)
    return {"slept_ms": ms}


@router.get("/items/{item_id}")
async def item(item_id: int) -> dict[str, int]:
    return {"item_id": item_id}


@router.post("/echo")
async def echo_body(request: Request) -> dict[str, int]:
    return {"received_bytes": len(await request.body())}
