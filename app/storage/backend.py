"""Which storage backend `database_url` names: SQLite files (the default) or PostgreSQL schemas.

What a backend is: app/storage/base.py; building one: app/storage/factory.py.
"""

from __future__ import annotations

from app.settings import Settings

SQLITE = "sqlite"
POSTGRES = "postgres"

# Tools run synchronously in one worker-thread hop per call, so the hot path needs a sync
# driver: an asyncpg URL is accepted (it is what NeMo Gym users tend to have) and mapped to
# psycopg 3, which speaks the same server protocol.
_PG_PREFIXES = {
    "postgresql+psycopg://": "postgresql+psycopg://",
    "postgresql+asyncpg://": "postgresql+psycopg://",
    "postgresql://": "postgresql+psycopg://",
    "postgres://": "postgresql+psycopg://",
}


def backend_of(url: str | None) -> str:
    if not url or url.startswith("sqlite:"):
        return SQLITE
    if any(url.startswith(p) for p in _PG_PREFIXES):
        return POSTGRES
    raise ValueError(
        f"STATEGYM_DATABASE_URL must be sqlite:///... or postgresql+psycopg://..., got "
        f"{url.split('://', 1)[0]}://..."
    )


def sync_pg_url(url: str) -> str:
    """The psycopg (sync) form of a PostgreSQL URL."""
    for prefix, replacement in _PG_PREFIXES.items():
        if url.startswith(prefix):
            return replacement + url[len(prefix) :]
    raise ValueError("not a PostgreSQL URL")


def uses_postgres(settings: Settings) -> bool:
    return backend_of(settings.database_url) == POSTGRES
