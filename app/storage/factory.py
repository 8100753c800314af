"""Build the storage backend from settings, once per process: the only module outside the two
backend packages that names them (app/storage/base.py says what a backend is).

`database_url` unset or sqlite:///... picks SQLite files; postgresql://... picks PostgreSQL
schemas (docs/postgres.md). An environment whose `requires` the backend does not provide is
refused here, with the reason. PostgreSQL's modules (and psycopg) are imported only when the
settings name it: a SQLite server never pays for them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from app.errors import BadRequest, StateGymError
from app.sdk.environment import Environment
from app.settings import Settings
from app.storage.backend import POSTGRES, backend_of
from app.storage.base import (
    ControlStore,
    ReadOnlyView,
    SessionBackend,
    Unsupported,
    check_requirements,
)
from app.storage.sqlite import backend as lite
from app.storage.sqlite.control import open_sqlite_control
from app.storage.sqlite.store import Store


def capabilities_of(settings: Settings):  # noqa: ANN201 - a Capabilities
    if backend_of(settings.database_url) == POSTGRES:
        from app.storage.postgres import backend as pg

        return pg.CAPABILITIES
    return lite.CAPABILITIES


def make_backend(settings: Settings, env: Environment) -> SessionBackend:
    """The session backend `settings.database_url` names, for `env` (Unsupported if unfit)."""
    check_requirements(env, capabilities_of(settings))
    if backend_of(settings.database_url) == POSTGRES:
        from app.storage.postgres import backend as pg

        return pg.PgBackend(settings, env)
    store = Store(
        settings.data_dir,
        env,
        snapshot_cache_size=settings.snapshot_cache_size,
        snapshot_cache_bytes=settings.snapshot_cache_mb * 2**20,
        max_session_bytes=settings.session_max_db_mb * 2**20,
    )
    control = open_sqlite_control(settings.data_dir / "control.sqlite")
    return lite.SqliteBackend(
        settings.data_dir, env, store, control, pack_closed=settings.pack_closed_sessions
    )


def prepare_shared(settings: Settings, env: Environment) -> None:
    """What `stategym serve` builds once before forking workers, so workers never race: the
    control database (file or schema) and the environment's template image; an earlier
    release's seed files removed."""
    check_requirements(env, capabilities_of(settings))
    if backend_of(settings.database_url) == POSTGRES:
        from app.storage.postgres.control import open_pg_control
        from app.storage.postgres.db import SchemaNames, make_engine

        engine = make_engine(settings.database_url or "", pool_size=1)
        try:
            open_pg_control(engine, SchemaNames(settings.pg_schema_prefix).control)
        finally:
            engine.dispose()
    else:
        open_sqlite_control(settings.data_dir / "control.sqlite").dispose()
    store = Store(settings.data_dir, env)
    store.template_image()
    store.remove_legacy_seed_files()


def retained_schema_upgrader(
    settings: Settings,
) -> Callable[[str, bool], list[tuple[str, str, str]]] | None:
    """On a backend whose sessions are not files (PostgreSQL), what `stategym migrate sessions`
    runs per environment: (schema, status, detail) per retained session. None: files, which
    the CLI walks itself."""
    if backend_of(settings.database_url) != POSTGRES:
        return None
    from app.storage.postgres import migrate as pg_migrate

    def upgrade(target: str, dry_run: bool) -> list[tuple[str, str, str]]:
        outcomes = pg_migrate.upgrade_retained_sessions(settings, target, dry_run=dry_run)
        return [(o.schema, o.status, o.detail) for o in outcomes]

    return upgrade


def pack_retained_sessions(
    settings: Settings, env: str, *, dry_run: bool
) -> list[tuple[str, int, int]]:
    """`stategym sessions pack`: the environment's closed plain session files packed (SQLite;
    app/storage/sqlite/packing.py): (file, bytes before, bytes after) each. PostgreSQL keeps
    kept sessions as archive rows, so there is nothing to pack."""
    from app.storage.sqlite.packing import pack_closed_files

    if backend_of(settings.database_url) == POSTGRES:
        raise Unsupported("sessions on PostgreSQL are archived at close, not files to pack")
    try:
        return pack_closed_files(settings.data_dir, env, dry_run=dry_run)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


@contextmanager
def open_inspection(settings: Settings) -> Iterator[tuple[ControlStore, ReadOnlyView]]:
    """The control store and a read-only view of every session, for `stategym sessions` and
    browse (the server's /admin uses its own backend's)."""
    if backend_of(settings.database_url) == POSTGRES:
        from app.storage.postgres import backend as pg
        from app.storage.postgres.control import PgControlDB
        from app.storage.postgres.db import SchemaNames, make_engine

        engine = make_engine(settings.database_url or "", pool_size=1)
        names = SchemaNames(settings.pg_schema_prefix)
        try:
            # Not prepared: inspection never creates the control schema.
            yield PgControlDB(engine, names.control), pg.PgView(engine, names)
        finally:
            engine.dispose()
        return
    control_path = settings.data_dir / "control.sqlite"
    if not control_path.is_file():
        raise StateGymError(f"no sessions in {settings.data_dir} (no control.sqlite)")
    control = open_sqlite_control(control_path)
    try:
        yield control, lite.SqliteView(settings.data_dir)
    finally:
        control.dispose()
