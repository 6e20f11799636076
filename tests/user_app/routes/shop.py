"""A user's router: a database read through the lifespan's state, url_for, an upload,
SSE, a stream, a crash, and a WebSocket behind a token dependency."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from app.custom import get_app_settings
from fastapi import APIRouter, Depends, File, HTTPException, Query, Request, UploadFile, WebSocket
from fastapi.responses import StreamingResponse

router = APIRouter(prefix="/shop", tags=["shop"])


@router.get("/items/{item_id}", name="shop_item")
async def item(item_id: int, request: Request) -> dict[str, object]:
    query = "SELECT name FROM items WHERE id = ?"
    async with request.state.db.execute(query, (item_id,)) as rows:
        row = await rows.fetchone()
    if row is None:
        raise HTTPException(status_code=404, detail="No such item")
    url = request.url_for("shop_item", item_id=item_id)
    return {"id": item_id, "name": row[0], "url": str(url),
            "page_size": get_app_settings().page_size}


@router.get("/catalog")
async def catalog() -> list[dict[str, object]]:
    return [{"id": number, "name": f"item {number}"} for number in range(100)]


@router.post("/upload")
async def upload(file: Annotated[UploadFile, File()]) -> dict[str, object]:
    data = await file.read()
    return {"name": file.filename, "size": len(data)}


@router.post("/echo")
async def echo(request: Request) -> dict[str, int]:
    return {"size": len(await request.body())}


@router.get("/events")
async def events(count: int = Query(3, le=1000)) -> StreamingResponse:
    async def stream() -> AsyncIterator[str]:
        for number in range(count):
            yield f"data: {number}\n\n"
            await asyncio.sleep(0.05)

    return StreamingResponse(stream(), media_type="text/event-stream")


@router.get("/boom")
async def boom() -> None:
    raise RuntimeError("the user's bug")


def token(token: str = Query("")) -> str:
    if token != "letmein":
        raise HTTPException(status_code=403, detail="Bad token")
    return token


@router.websocket("/ws")
async def ws(websocket: WebSocket, _: Annotated[str, Depends(token)]) -> None:
    await websocket.accept()
    async for text in websocket.iter_text():
        await websocket.send_text(text)
