"""Your tables, as SQLAlchemy models. After a change: `make migration NAME=what_changed`,
read the revision it writes in alembic/versions/, then `make migrate`. `Item` is an
example (the example routes use it): delete it with its revision when you have your own.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import DateTime, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    """Every model's base: Alembic compares the database with its metadata."""


class Item(Base):
    __tablename__ = "items"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=lambda: datetime.now(UTC))
