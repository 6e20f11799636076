"""A route that waits, as a handler waiting on a database would (benchmarks, drain tests)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Query

router = APIRouter(prefix="/demo", tags=["demo"])


@router.get("/sleep")
async def sleep(ms: float = Query(default=10, ge=0, le=10_000)) -> dict[str, float]:
    await asyncio.sleep(ms / 1000)
    return {"slept_ms": ms}
