"""Alembic environment of the xe2t_* tables; optuna's tables in the same database are ignored.

Run through :func:`xe2tune.db.migrate_database`, which passes an open connection (already inside
a write transaction) in ``config.attributes["connection"]``.
"""

from __future__ import annotations

from alembic import context

from xe2tune.db import _campaign_models  # noqa: F401  (registers the campaign tables on Base)
from xe2tune.db._migrate import VERSION_TABLE, include_name
from xe2tune.db._models import Base


def run_migrations_online() -> None:
    """Migrate on the connection handed over by ``migrate_database``."""
    connection = context.config.attributes["connection"]
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        include_name=include_name,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
