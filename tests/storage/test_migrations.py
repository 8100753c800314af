"""Alembic branches per environment and the framework branch they depend on: schema parity, round
trips, databases at every older revision, retained-session upgrades."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.registry import ENVIRONMENTS, load_environment
from app.storage.migrations import (
    FRAMEWORK,
    branch_revisions,
    branches,
    downgrade_file,
    framework_missing,
    head_revision,
    metadata_for,
    revision_of,
    revision_path,
    schema_differences,
    targets,
    upgrade_file,
    version_location,
)
from tests.conftest import REPO
from tests.support.rollouts import gold_answer, load_tasks, run_rollout

RETAIL = load_environment("retail")
TASK = next(t for t in load_tasks(RETAIL.tasks_path) if t["family"] == "cancel")


@pytest.mark.parametrize("target", branches())
def test_upgrade_from_empty_gives_exactly_the_model_schema(target):
    """Each target's branch gives its models; the framework's gives the SDK's tables alone."""
    assert head_revision(target), f"{target} has no migrations (scripts/new_migration.py)"
    assert schema_differences(target) == []


SHIPPED = [t for t in targets() if t != "control" and ENVIRONMENTS[t].startswith("envs.")]


@pytest.mark.parametrize("target", SHIPPED)
def test_every_shipped_environment_has_an_upgrade_to_exercise(target):
    """This repository's own environments each carry an upgrade past their initial revision,
    so the upgrade paths (templates, retained sessions, step logs) run on every schema. The
    environment contract asks a new environment only for its initial revision."""
    assert len(branch_revisions(target)) >= 2, (
        f"{target} has only its initial revision: the shipped environments keep an upgrade to "
        "exercise (docs/migrations.md)"
    )


FRAMEWORK_TABLES = ("stategym_answer", "stategym_user", "stategym_conversation")


@pytest.mark.parametrize("target", SHIPPED)
def test_the_framework_tables_come_from_the_framework_branch_alone(target):
    """An environment's branch creates none of the framework's tables: its head `depends_on`
    the framework branch's head, whose revisions create them once for every environment."""
    assert framework_missing(target) is None
    for revision in branch_revisions(target):
        script = revision_path(revision).read_text()
        assert not any(f'"{table}"' in script for table in FRAMEWORK_TABLES), revision


def _versions(path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return sorted(r[0] for r in conn.execute("SELECT version_num FROM alembic_version"))
    finally:
        conn.close()


def _schema(path) -> list[tuple]:
    """Tables, indexes and their columns and constraints (a batch copy may list them in
    another order)."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name != 'alembic_version'"
        ).fetchall()
    finally:
        conn.close()
    parts = [
        (kind, name, sorted(x.strip(" ,)") for x in (sql or "").split("\n")))
        for kind, name, sql in rows
    ]
    return sorted(parts)


@pytest.mark.parametrize("target", SHIPPED)
def test_a_database_at_any_older_revision_upgrades_to_the_head(target, tmp_path):
    """Every revision id an older StateGym stamped still resolves and still means one row: the
    revisions that used to create the framework's tables in each branch stay, empty, with
    `depends_on` the framework revision that now creates them. Upgrading from each one ends
    at the head with exactly the schema a database built at the head has."""
    head = tmp_path / "head.sqlite"
    sqlite3.connect(head).close()
    upgrade_file(head, target)
    assert _versions(head) == [head_revision(target)]
    for revision in branch_revisions(target):
        path = tmp_path / f"{revision}.sqlite"
        sqlite3.connect(path).close()
        upgrade_file(path, target, revision)
        assert _versions(path) == [revision]
        upgrade_file(path, target)
        assert _versions(path) == [head_revision(target)]
        assert _schema(path) == _schema(head), revision


def test_the_framework_revisions_keep_tables_an_environment_made_itself(tmp_path):
    """A plugin whose own initial revision created the framework's tables (written before the
    framework branch existed) can adopt the branch: its revisions leave existing tables be."""
    path = tmp_path / "plugin.sqlite"
    conn = sqlite3.connect(path)
    conn.close()
    from sqlalchemy import create_engine

    engine = create_engine(f"sqlite:///{path}")
    tables = [metadata_for("retail").tables[t] for t in FRAMEWORK_TABLES]
    metadata_for("retail").create_all(engine, tables=tables)
    engine.dispose()
    upgrade_file(path, "retail", f"{FRAMEWORK}@head")
    assert _versions(path) == [head_revision(FRAMEWORK)]


def _rows(path, table: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()
    finally:
        conn.close()


def _columns(path, table: str) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    finally:
        conn.close()


async def _played_session(client_factory, settings):
    # A plain file to migrate (packs are migrated through it:
    # tests/storage/test_packed_sessions.py).
    plain = settings.model_copy(update={"pack_closed_sessions": False})
    async with client_factory(RETAIL, plain) as client:
        verdict = await run_rollout(client, TASK, TASK["ground_truth"], gold_answer(TASK))
        store = client.app.state.protocol.sessions.backend.store
        return store.session_path(verdict["session_id"]), verdict


async def test_downgrade_then_upgrade_keeps_the_data(client_factory, settings):
    path, _ = await _played_session(client_factory, settings)
    orders_before = _rows(path, "orders")
    downgrade_file(path, "retail", "retail@-3")
    assert "slug" not in _columns(path, "products")
    assert _rows(path, "orders") == orders_before
    # Retail's branch went below its `depends_on`; the framework branch stays where it was
    # (its tables, its row beside retail's), and the database's revision is retail's.
    initial = branch_revisions("retail")[-1]
    assert _versions(path) == sorted([initial, head_revision(FRAMEWORK)])
    conn = sqlite3.connect(path)
    assert revision_of(conn) == initial
    conn.close()
    assert _columns(path, "stategym_answer")
    upgrade_file(path, "retail")
    assert _versions(path) == [head_revision("retail")]
    assert "slug" in _columns(path, "products")
    assert _rows(path, "orders") == orders_before
    conn = sqlite3.connect(path)
    assert revision_of(conn) == head_revision("retail")
    assert conn.execute("SELECT slug FROM products WHERE name = 'E-Reader'").fetchone() == (
        "e-reader",
    )
    conn.close()


async def test_session_at_previous_revision_is_upgraded_and_verifies_the_same(
    client_factory, settings
):
    async with client_factory(RETAIL) as client:
        client.cookies.clear()
        assert (await client.post("/seed_session", json=TASK)).status_code == 200
        for call in TASK["ground_truth"]:
            await client.post(f"/{call['name']}", json=call["arguments"])
        body = {
            **TASK,
            "response": {
                "output": [
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": gold_answer(TASK)}],
                    }
                ]
            },
        }
        first = (await client.post("/verify", json=body)).json()
        sessions = client.app.state.protocol.sessions
        session_id = first["session_id"]
        # Forget the open connection and take the file back one revision, as an old run left it.
        handle = sessions._open.pop(session_id)
        handle.close()
        path = sessions.backend.store.session_path(session_id)
        downgrade_file(path, "retail", "retail@-3")
        again = (await client.post("/verify", json=body)).json()
    assert first["reward"] == again["reward"] == 1.0
    conn = sqlite3.connect(path)
    assert revision_of(conn) == head_revision("retail")
    conn.close()


async def test_unknown_revision_is_refused_with_a_clear_error(client_factory):
    async with client_factory(RETAIL) as client:
        client.cookies.clear()
        session_id = (await client.post("/seed_session", json=TASK)).json()["session_id"]
        sessions = client.app.state.protocol.sessions
        path = sessions.backend.store.session_path(session_id)
        conn = sqlite3.connect(path)
        conn.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")
        conn.commit()
        conn.close()
        r = await client.post("/get_order_details", json={"order_number": "#W0000001"})
    assert r.status_code == 409
    assert "does not know" in r.json()["error"]["message"]


async def test_bulk_session_upgrade_reports_counts_and_a_corrupt_file_fails_alone(
    client_factory, settings
):
    path, _ = await _played_session(client_factory, settings)
    folder = path.parent
    for i in range(6):
        shutil.copy(path, folder / f"{i:032x}.sqlite")
    for i in range(3):
        downgrade_file(folder / f"{i:032x}.sqlite", "retail", "retail@-3")
    corrupt = folder / f"{99:032x}.sqlite"
    corrupt.write_bytes(b"this is not a database" * 100)
    runner = CliRunner()
    dry = runner.invoke(
        cli,
        [
            "migrate",
            "sessions",
            "--env",
            "retail",
            "--dry-run",
            "--data-dir",
            str(settings.data_dir),
            "--json",
        ],
    )
    assert '"would_upgrade": 3' in dry.output
    result = runner.invoke(
        cli,
        ["migrate", "sessions", "--env", "retail", "--data-dir", str(settings.data_dir), "--json"],
    )
    assert result.exit_code == 1  # one file failed
    assert '"upgraded": 3' in result.output and '"current": 4' in result.output
    assert '"failed": 1' in result.output
    assert corrupt.read_bytes() == b"this is not a database" * 100


def test_migrate_check_and_history_commands():
    runner = CliRunner()
    assert runner.invoke(cli, ["migrate", "check", "--env", "retail"]).exit_code == 0
    history = runner.invoke(cli, ["migrate", "history", "--env", "retail", "--json"])
    assert head_revision("retail") in history.output


def test_plain_alembic_upgrade_heads(tmp_path):
    from app.storage.sqlite.store import Store

    Store(tmp_path, RETAIL).template_image()
    template = Store(tmp_path, RETAIL).template_path
    downgrade_file(template, "retail", "retail@-3")
    env = {**os.environ, "STATEGYM_DATA_DIR": str(tmp_path)}
    subprocess.run(
        [sys.executable, "-m", "alembic", "upgrade", "heads"],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    conn = sqlite3.connect(template)
    assert revision_of(conn) == head_revision("retail")
    conn.close()


async def test_failed_upgrade_leaves_the_file_as_it_was(client_factory, settings):
    path, _ = await _played_session(client_factory, settings)
    downgrade_file(path, "retail", "retail@-3")
    conn = sqlite3.connect(path)
    # Two names whose slugs collide: the backfill violates the new unique constraint.
    conn.execute("UPDATE products SET name = 'Zq Item' WHERE id = 1")
    conn.execute("UPDATE products SET name = 'zq item' WHERE id = 2")
    conn.commit()
    before = list(conn.iterdump())
    conn.close()
    with pytest.raises(Exception, match="UNIQUE"):
        upgrade_file(path, "retail")
    conn = sqlite3.connect(path)
    assert list(conn.iterdump()) == before
    assert revision_of(conn) == branch_revisions("retail")[3]  # before products.slug
    conn.close()


def test_alembic_ini_formats_revisions_as_stategym_does() -> None:
    """The plain `alembic revision` and `stategym migrate revision` run the same post-write
    hooks."""
    from configparser import ConfigParser

    from app.storage.migrations import REVISION_HOOKS

    ini = ConfigParser(defaults={"here": str(REPO)})
    ini.read(REPO / "alembic.ini")
    hooks = {k: v for k, v in ini["post_write_hooks"].items() if k != "here"}
    assert hooks == REVISION_HOOKS


@pytest.mark.parametrize(
    "branch",
    [
        pytest.param(FRAMEWORK, marks=pytest.mark.slow),
        pytest.param("control", marks=pytest.mark.slow),
        "retail",
    ],
)
def test_the_plain_alembic_revision_writes_into_a_branch_and_formats_it(branch, tmp_path) -> None:
    """`alembic revision --head BRANCH@head` writes into the branch's own folder (alembic.ini
    lists each one) and Alembic's post-write hooks run ruff on it. On a copy of the repository's
    Alembic files, so the suite's script directory never sees the new revision."""
    for folder in ["migrations", *(f"envs/{t}/migrations" for t in SHIPPED)]:
        shutil.copytree(
            REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO / "alembic.ini", tmp_path / "alembic.ini")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "alembic",
            "revision",
            "-m",
            "nothing yet",
            "--head",
            f"{branch}@head",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Running post write hook 'ruff_format'" in done.stdout
    folder = tmp_path / version_location(branch).relative_to(REPO)
    [written] = folder.glob("*_nothing_yet.py")
    script = written.read_text()
    assert f'down_revision: str | Sequence[str] | None = "{head_revision(branch)}"' in script
    assert "import sqlalchemy" not in script  # the import hook dropped what the script does not use


@pytest.mark.slow
def test_the_alembic_command_finds_every_target_branch() -> None:
    """The shipped environments keep their branches inside their packages (`migrations_path`);
    alembic.ini lists exactly those for the plain `alembic` command, beside the framework and
    control branches in migrations/versions/. StateGym's own commands build the list from the
    registry."""
    from configparser import ConfigParser

    from app.storage.migrations import targets, version_location

    ini = ConfigParser(defaults={"here": str(REPO)})
    ini.read(REPO / "alembic.ini")
    listed = {Path(p) for p in ini["alembic"]["version_locations"].split()}
    wanted = {version_location(t) for t in (FRAMEWORK, "control", *SHIPPED)}
    assert listed == wanted
    for target in SHIPPED:
        assert version_location(target) == load_environment(target).migrations_path
        assert version_location(target).is_relative_to(REPO / "envs" / target)
    heads = subprocess.run(
        [sys.executable, "-m", "alembic", "heads"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    for target in targets():
        assert f"{head_revision(target)} ({target}) (head)" in heads
