"""Reads and writes of `Item` (an example repository): what a route calls with its
session, so the route holds no SQL."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Item


async def add_item(session: AsyncSession, name: str) -> Item:
    item = Item(name=name)
    session.add(item)
    await session.commit()
    return item


async def get_item(session: AsyncSession, item_id: int) -> Item | None:
    return await session.get(Item, item_id)


async def latest_items(session: AsyncSession, limit: int) -> list[Item]:
    rows = await session.scalars(select(Item).order_by(Item.id.desc()).limit(limit))
    return list(rows)
