"""Your database's models (models.py) and the code that reads and writes them (items.py,
an example to replace). Alembic's migrations (alembic/) follow models.py."""
