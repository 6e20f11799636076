"""A route shaped like the ones users add: a router of its own with a path parameter
and a dependency that reads a header, included after every template route, where a
router in app/routes/ stands. `bench app` measures it beside /health/; the ladder
builds it with each framework (bench/frameworks.py)."""

from __future__ import annotations

import importlib
from typing import Any

from app.core.framework import FRAMEWORK
from bench.route import Route

TOKEN = "bench-token"


def build_router(package: str = FRAMEWORK) -> Any:
    """The router, built with `package`'s names (fastapi or notslowapi)."""
    framework = importlib.import_module(package)

    async def caller(authorization: str = framework.Header(default="")) -> str:
        if authorization != f"Bearer {TOKEN}":
            raise framework.HTTPException(status_code=401, detail="Not authenticated")
        return "bench"

    router = framework.APIRouter(prefix="/bench-user-like", tags=["bench"],
                                 dependencies=[framework.Depends(caller)])

    @router.get("/items/{item_id}")
    async def read_item(item_id: int,
                        user: str = framework.Depends(caller)) -> dict[str, int | str]:
        return {"item_id": item_id, "user": user}

    return router


router = build_router()
ROUTE = Route("/bench-user-like/items/{item_id}", {"item_id": "42"},
              headers=(("Authorization", f"Bearer {TOKEN}"),))
