"""Alembic wiring: one version branch per environment, one for the control database, and one
for the tables the framework adds to every environment's database (`framework`).

Branch labels are the target names (`control`, `retail`, ...); an environment's scripts live in
its package (`Environment.migrations_path`), the control and framework branches' in
`migrations/versions/` (`app/migrations/` in a wheel; no alembic.ini is needed at runtime). An
environment's branch reaches the framework branch through `depends_on`, so the answer and
conversation tables are created by one revision each, not one per environment. A new database is
built with `create_all` and stamped at the head; migrations upgrade databases that exist. The step
log survives: a migration's writes are no step, an upgrade to the head puts its triggers back,
and no undo goes back before a migration (app/storage/step_triggers.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, MetaData, create_engine, event
from sqlalchemy.pool import NullPool

from app.registry import environment_names, load_environment
from app.sdk.answer import answer_table
from app.sdk.tool import make_metadata
from app.sdk.user import user_tables
from app.storage.control_schema import control_metadata
from app.storage.log_changes import MIGRATED
from app.storage.meta import write_meta
from app.storage.step_triggers import (
    forget_changes_after,
    last_logged_change,
    mark_migrated,
    remake_step_triggers,
)
from app.storage.steplog import has_step_log


def _alembic_folder() -> Path:
    """Alembic's folder (env.py, script.py.mako, the control branch in versions/control/):
    `app/migrations/` of an installed wheel (setup.py ships the repository's top-level
    migrations/ under that name), else the top-level `migrations/` of this checkout (an
    editable install, PYTHONPATH on the repository)."""
    installed = files("app") / "migrations"
    if installed.is_dir():
        return Path(str(installed))
    return Path(__file__).resolve().parents[2] / "migrations"


CONTROL = "control"
# The branch of the tables the framework adds to every environment's database (the answer and
# conversation tables); each environment's branch reaches its head through `depends_on`.
FRAMEWORK = "framework"
MIGRATIONS_DIR = _alembic_folder()
VERSION_TABLE = "alembic_version"
# Tables the framework keeps inside environment databases; never part of a model.
FRAMEWORK_TABLES = {"_stategym_meta", VERSION_TABLE}


def targets() -> list[str]:
    return [CONTROL, *environment_names()]


def branches() -> list[str]:
    """Every branch: the framework tables' and each target's."""
    return [FRAMEWORK, *targets()]


def metadata_for(target: str) -> MetaData:
    if target == CONTROL:
        return control_metadata
    if target == FRAMEWORK:
        return framework_metadata()
    return load_environment(target).metadata


def framework_metadata() -> MetaData:
    """The framework's tables alone, as every environment's MetaData has them: what the
    framework branch's revisions are compared with."""
    metadata = make_metadata()
    answer_table(metadata)
    user_tables(metadata)
    return metadata


def version_location(target: str) -> Path:
    """Where a target's migration branch lives: the environment's own `migrations_path` (inside
    its package, the shipped five's too), else `migrations/versions/<target>/` of this
    repository (the control database's)."""
    if target not in (CONTROL, FRAMEWORK):
        own = load_environment(target).migrations_path
        if own is not None:
            return own
    return MIGRATIONS_DIR / "versions" / target


def version_locations() -> list[Path]:
    """Every branch's directory: the framework's, the control database's, each environment's.
    One that does not exist yet (an environment with no revision) is left out: Alembic refuses
    a missing version location."""
    every = [version_location(t) for t in branches()]
    return [p for p in every if p.is_dir()]


def alembic_config(target: str | None = None) -> Config:
    """The configuration StateGym's own commands and server migrate with, built here rather
    than read from alembic.ini (which a wheel install has not got; it serves the plain `alembic`
    command in the repository): Alembic's folder, and every registered target's branch."""
    cfg = Config()
    _set(cfg, "script_location", str(MIGRATIONS_DIR))
    _set(cfg, "path_separator", "space")
    _set(cfg, "version_locations", " ".join(str(p) for p in version_locations()))
    _set(cfg, "recursive_version_locations", "true")  # as alembic.ini has it
    if target:
        cfg.attributes["target"] = target
    return cfg


def _set(cfg: Config, name: str, value: str) -> None:
    # Alembic's options are ConfigParser values: a `%` in a path would read as interpolation.
    cfg.set_main_option(name, value.replace("%", "%%"))


@lru_cache
def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


@lru_cache
def head_revision(target: str) -> str | None:
    """The newest revision of the target's branch (None: the branch has no migration yet)."""
    script = _script()
    try:
        return script.get_revision(f"{target}@head").revision  # type: ignore[union-attr,unused-ignore]
    except Exception:  # noqa: BLE001 - alembic raises several types for an unknown branch
        return None


@lru_cache
def branch_revisions(target: str) -> tuple[str, ...]:
    """The target's own revisions, newest first (not the framework revisions it depends on)."""
    head = head_revision(target)
    if head is None:
        return ()
    return tuple(
        r.revision for r in _script().iterate_revisions(head, "base") if target in r.branch_labels
    )


def known_revisions(target: str) -> frozenset[str]:
    """Revisions a database of the target may sit at: its branch's and those its branch
    `depends_on` (a downgraded environment keeps the framework branch's row too)."""
    head = head_revision(target)
    if head is None:
        return frozenset()
    return frozenset(r.revision for r in _script().iterate_revisions(head, "base"))


def stamp_new_database(conn: sqlite3.Connection, target: str) -> None:
    """Record the head revision in a database just built with create_all."""
    head = head_revision(target)
    if head is None:
        return
    stamp_revision(conn, head)


def stamp_revision(conn: sqlite3.Connection, *revisions: str) -> None:
    """Record `revisions` (one, but for a scratch database) as the database's Alembic revision."""
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version_num VARCHAR(32) NOT NULL, "
        f"CONSTRAINT {VERSION_TABLE}_pkc PRIMARY KEY (version_num))"
    )
    conn.execute(f"DELETE FROM {VERSION_TABLE}")
    for revision in revisions:
        conn.execute(f"INSERT INTO {VERSION_TABLE} (version_num) VALUES (?)", (revision,))


def revision_of(conn: sqlite3.Connection) -> str | None:
    try:
        rows = conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchall()
    except sqlite3.OperationalError:
        return None
    return database_revision([r[0] for r in rows])


def database_revision(rows: list[str]) -> str | None:
    """A database's revision from its version rows: the one row, or, when an environment's
    branch was downgraded below its `depends_on` (Alembic keeps the framework branch's row
    beside it, the framework's tables being still there), the environment's row."""
    if len(rows) > 1:
        framework = set(branch_revisions(FRAMEWORK))
        rows = [r for r in rows if r not in framework] or rows
    return rows[0] if rows else None


def _sqlite_engine(path: Path):
    engine = create_engine(f"sqlite:///{path}", poolclass=NullPool)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy/Alembic own BEGIN, so DDL is transactional (the SQLite recipe).
        dbapi_conn.isolation_level = None
        dbapi_conn.execute("PRAGMA busy_timeout=10000")

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


@contextmanager
def connection_to(path: Path) -> Iterator[Connection]:
    engine = _sqlite_engine(path)
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def _migrate(conn: Connection, target: str, destination: str, *, down: bool = False) -> None:
    """Run migrations on an open connection in ONE transaction (SQLite has transactional DDL
    once BEGIN is ours), without Alembic's command/env.py layer so it can nest anywhere."""
    script = _script()

    def steps(revision: Any, _context: Any) -> Any:
        if down:
            return script._downgrade_revs(destination, revision)
        return script._upgrade_revs(destination, revision)

    context = MigrationContext.configure(
        connection=conn,
        opts={
            "fn": steps,
            "script": script,
            "render_as_batch": True,
            "transactional_ddl": True,
            "target_metadata": metadata_for(target),
        },
    )
    with Operations.context(context), context.begin_transaction():
        raw = conn.connection.driver_connection
        assert isinstance(raw, sqlite3.Connection)
        revision, logged = revision_of(raw), has_step_log(raw)
        last = last_logged_change(raw) if logged else 0
        context.run_migrations()
        if not logged:
            return
        forget_changes_after(raw, last)  # the migration's own writes are no step
        moved = revision_of(raw)
        if moved == revision:
            return
        mark_migrated(raw)  # the log's images so far predate the migration: no undo past them
        # Its writes are in no log: change tracking read from the log no longer covers them.
        write_meta(raw, {MIGRATED: moved or "base"})
        # At the head, the models describe the database: its step log as a snapshot's.
        if moved == head_revision(target):
            remake_step_triggers(raw, metadata_for(target))


def upgrade_file(path: Path, target: str, revision: str = "head") -> None:
    """Upgrade one database file in one transaction (a failure leaves the file as it was)."""
    with connection_to(path) as conn:
        _migrate(conn, target, revision if "@" in revision else f"{target}@{revision}")


def downgrade_file(path: Path, target: str, revision: str) -> None:
    with connection_to(path) as conn:
        _migrate(conn, target, revision, down=True)


def schema_differences(target: str) -> list[Any]:
    """Autogenerate's comparison of the models with an empty database upgraded to head."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "check.sqlite"
        sqlite3.connect(path).close()
        upgrade_file(path, target)
        with connection_to(path) as conn:
            ctx = MigrationContext.configure(
                conn, opts={"compare_type": True, "include_name": include_name}
            )
            return compare_metadata(ctx, metadata_for(target))


def include_name(name: str | None, type_: str, _parent: Any) -> bool:
    return not (type_ == "table" and name in FRAMEWORK_TABLES)


def schema_state(conn: sqlite3.Connection, target: str) -> str:
    """'current', 'older' (upgradable), or raises SessionUnavailable (unknown / newer revision)."""
    from app.errors import SessionUnavailable

    head = head_revision(target)
    revision = revision_of(conn)
    if revision == head:
        return "current"
    if revision is not None and revision in known_revisions(target):
        return "older"
    raise SessionUnavailable(
        f"database is at schema revision {revision!r}, which this StateGym does not know "
        f"(its {target} head is {head!r}); it was built by a newer version or is not a "
        f"{target} database",
        hint="Open it with the StateGym version that made it, or inspect it read-only.",
    )


def retained_session_files(sessions_dir: Path) -> list[Path]:
    """An environment's retained session databases: plain files and packs (packing.py)."""
    from app.storage.sqlite.packing import PACK_SUFFIX

    plain = sessions_dir.glob("*.sqlite")
    return sorted([*plain, *sessions_dir.glob(f"*.sqlite{PACK_SUFFIX}")])


def file_revision(path: Path) -> str | None:
    """The migration revision of a database file or of a pack's image."""
    from app.storage.sqlite.db import as_legacy_image
    from app.storage.sqlite.packing import PACK_SUFFIX, pack_image

    if path.name.endswith(PACK_SUFFIX):
        try:
            image = pack_image(path)
        except ValueError as exc:
            raise sqlite3.DatabaseError(f"a pack that cannot be read: {exc}") from None
        conn = sqlite3.connect(":memory:")
        conn.deserialize(as_legacy_image(image))
    else:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return revision_of(conn)
    finally:
        conn.close()


@contextmanager
def editable_file(path: Path) -> Iterator[Path]:
    """A database file to change in place: `path` itself, or a pack's image written back as
    its plain file and packed again after the block (on an error the pack stays as it was)."""
    from app.storage.sqlite.packing import PACK_SUFFIX, unpacked

    if not path.name.endswith(PACK_SUFFIX):
        yield path
        return
    with unpacked(path) as plain:
        yield plain


def upgrade_retained(path: Path, target: str) -> None:
    from app.errors import SessionUnavailable

    try:
        upgrade_file(path, target)
    except Exception as exc:  # noqa: BLE001 - any migration failure leaves the file as it was
        raise SessionUnavailable(
            f"database {path.name} could not be upgraded to {target}@head: {exc}",
            hint="Run `stategym migrate sessions --env NAME --dry-run` to see what fails.",
        ) from exc


def prepare_control_database(engine: Any, path: Path) -> None:
    """A new control database is created at head; an older one is upgraded in place."""
    with engine.begin() as conn:
        dbapi = conn.connection.driver_connection
        if revision_of(dbapi) is None:
            control_metadata.create_all(conn)
            stamp_new_database(dbapi, CONTROL)
            return
        state = schema_state(dbapi, CONTROL)
    if state == "older":
        upgrade_file(path, CONTROL)


def framework_missing(target: str) -> str | None:
    """The framework branch's head when an environment's branch does not reach it yet (a new
    environment, or a framework revision newer than its head): its next revision `depends_on`
    it. None for the control database and for a branch that reaches it."""
    framework = head_revision(FRAMEWORK)
    if target == CONTROL or framework is None:
        return None
    return None if framework in known_revisions(target) else framework


def new_revision(target: str, message: str, *, ruff: bool = True) -> Path:
    """Write the target's next revision by comparing its models with its branch head (the first
    one starts the branch, labelled with the target's name); returns the script's path. An
    environment's revision `depends_on` the framework branch's head when its branch does not
    reach it yet, and leaves the framework's tables to that branch.

    With `ruff` (and ruff installed: `revision_formatter_missing`), Alembic's post-write hooks
    format the script, so a generated file passes the same format check as a hand-written one.
    """
    import tempfile

    from alembic import command

    head = head_revision(target)
    framework = framework_missing(target)
    version_path = version_location(target)
    version_path.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "autogen.sqlite"
        sqlite3.connect(path).close()
        if head:
            upgrade_file(path, target)
        if framework:  # its tables are the framework branch's: compared as there, not written
            upgrade_file(path, target, f"{FRAMEWORK}@head")
        # Autogenerate insists the database sits at every head of the script directory (those
        # no other revision reaches), so record the other branches' too: their tables are not
        # compared.
        conn = sqlite3.connect(path)
        stamp_revision(conn, *(r.revision for r in _script().get_revisions("heads") if r))
        conn.commit()
        conn.close()
        with connection_to(path) as connection:
            cfg = alembic_config(target)
            locations = cfg.get_main_option("version_locations") or ""
            if str(version_path) not in locations.split():
                _set(cfg, "version_locations", f"{locations} {version_path}".strip())
            cfg.attributes["connection"] = connection
            if ruff and revision_formatter_missing() is None:
                for name, value in REVISION_HOOKS.items():
                    cfg.set_section_option("post_write_hooks", name, value)
            script = command.revision(
                cfg,
                message=message,
                autogenerate=True,
                head=f"{target}@head" if head else "base",
                branch_label=None if head else target,
                version_path=str(version_path),
                depends_on=framework,
            )
    _forget_scripts()
    return Path(script.path)  # type: ignore[union-attr]


# How a written revision is formatted: Alembic's post-write hooks, ruff run as `python -m ruff`
# by the interpreter that writes the revision. alembic.ini's [post_write_hooks] section is this
# table for the plain `alembic revision` (tests/storage/test_migrations.py keeps the two equal).
REVISION_HOOKS = {
    "hooks": "ruff_format, ruff_imports",
    "ruff_format.type": "module",
    "ruff_format.module": "ruff",
    "ruff_format.options": "format --quiet REVISION_SCRIPT_FILENAME",
    "ruff_imports.type": "module",
    "ruff_imports.module": "ruff",
    "ruff_imports.options": "check --quiet --fix --select I,F401 REVISION_SCRIPT_FILENAME",
}


def revision_formatter_missing(module: str = "ruff") -> str | None:
    """None when the post-write hooks can run, else why a revision is left as Alembic wrote it
    (Alembic's `module` hook fails on a module the interpreter cannot import)."""
    import sys
    from importlib.util import find_spec

    if find_spec(module) is None:
        return f"no {module} installed for {sys.executable}"
    return None


class NotReplaceable(ValueError):
    """`--initial` asked of a branch that has grown past its initial revision."""


def replace_initial_revision(target: str, message: str, *, ruff: bool = True) -> Path:
    """Write the target's initial revision again from its models, replacing the only one the
    branch has (a scaffold's, before anything was served: no database is stamped at it).

    A branch with later revisions is refused (NotReplaceable): databases may sit at any of
    them. If writing the new revision fails, the old one is put back."""
    import shutil
    import tempfile

    revisions = branch_revisions(target)
    if len(revisions) > 1:
        raise NotReplaceable(
            f"{target}'s migration branch has {len(revisions)} revisions "
            f"({' <- '.join(revisions)}): --initial replaces a branch's only revision; write a "
            f"revision for the change instead (stategym migrate revision --env {target} -m MSG)"
        )
    if not revisions:
        return new_revision(target, message, ruff=ruff)
    old = Path(_script().get_revision(revisions[0]).path)
    with tempfile.TemporaryDirectory() as tmp:
        aside = Path(tmp) / old.name
        shutil.move(old, aside)
        _forget_scripts()
        try:
            return new_revision(target, message, ruff=ruff)
        except BaseException:
            shutil.move(aside, old)
            _forget_scripts()
            raise


def revision_path(revision: str) -> Path:
    """The script file of one revision."""
    return Path(_script().get_revision(revision).path)


def _forget_scripts() -> None:
    _script.cache_clear()
    head_revision.cache_clear()
    branch_revisions.cache_clear()
