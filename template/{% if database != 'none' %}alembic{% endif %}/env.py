"""Alembic's environment: the URL from the project's settings, the tables from
app/db/models.py, the migrations run through SQLAlchemy's asyncio engine once the
database answers (WEBSERVER_DATABASE_STARTUP_TIMEOUT, as `serve` waits)."""

from __future__ import annotations

import asyncio
from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from app.core.database import prepare, shown, startup_problem, url
from app.core.settings import get_settings
from app.db.models import Base

if context.config.config_file_name is not None:
    fileConfig(context.config.config_file_name)
METADATA = Base.metadata


def migrate(connection: Connection) -> None:
    # SQLite alters a table by copying it: Alembic's batch mode does that.
    context.configure(connection=connection, target_metadata=METADATA,
                      render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


async def migrate_online() -> None:
    address = url()
    prepare(address)
    engine = create_async_engine(address, poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(migrate)
    finally:
        await engine.dispose()


if context.is_offline_mode():  # `alembic upgrade head --sql`: the SQL, not run
    context.configure(url=url(), target_metadata=METADATA, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    # One sentence, not a traceback, when the database cannot be reached.
    problem = startup_problem(get_settings(), workers=False)
    if problem:
        raise SystemExit(f"Cannot migrate: {problem}")
    try:
        asyncio.run(migrate_online())
    except (OSError, TimeoutError) as error:  # unreachable; its SQL's errors stay as they are
        raise SystemExit(f"Cannot migrate: the database at {shown(url())} did not answer "
                         f"({type(error).__name__}: {error}).") from None
