"""A route shaped like the ones users add: a router of its own with a path parameter
and a dependency that reads a header, included after every template route, where a
router in app/routes/ stands. `bench app` measures it beside /health/."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Header, HTTPException

from bench.route import Route

TOKEN = "bench-token"


async def caller(authorization: str = Header(default="")) -> str:
    if authorization != f"Bearer {TOKEN}":
        raise HTTPException(status_code=401, detail="Not authenticated")
    return "bench"


router = APIRouter(prefix="/bench-user-like", tags=["bench"], dependencies=[Depends(caller)])


@router.get("/items/{item_id}")
async def read_item(item_id: int, user: str = Depends(caller)) -> dict[str, int | str]:
    return {"item_id": item_id, "user": user}


ROUTE = Route("/bench-user-like/items/{item_id}", {"item_id": "42"},
              headers=(("Authorization", f"Bearer {TOKEN}"),))
