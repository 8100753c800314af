"""Migrations cannot lose work: a revision that served databases is never rewritten, a required
column nothing fills is a warning at `migrate revision` and a failure at `migrate check`, and
every migrate command takes `--data-dir`. A scaffolded environment installed with pip, its
template built into a real data dir, the CLI run as a subprocess."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.storage.migration_lint import unfilled_columns
from app.storage.migrations import FRAMEWORK, head_revision

REPO = Path(__file__).resolve().parents[2]


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def shelf(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """`stategym new-env shelf`, pip-installed into a folder of its own: (package folder, env)."""
    root = tmp_path / "stategym-shelf"
    site = tmp_path / "site"
    done = _cli(["new-env", "shelf", "--dir", str(root)], dict(os.environ))
    assert done.returncode == 0, done.stderr
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
        + ["--no-build-isolation", "--target", str(site), str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stderr
    path = os.pathsep.join([str(site), str(REPO), os.environ.get("PYTHONPATH", "")])
    return site / "shelf_env", {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep)}


BINS = """

class Bin(Base):
    __tablename__ = "bins"
    id: Mapped[int] = mapped_column(primary_key=True)
    label: Mapped[str] = mapped_column(String(40))
"""


def _revision_of(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.slow  # new-env, pip install, prepare, a few CLI runs: ~40 s
def test_initial_revision_that_served_databases_is_never_rewritten(shelf, tmp_path) -> None:
    package, env = shelf
    migrations = package / "migrations"
    before = {p.name: p.read_text() for p in migrations.glob("*.py")}
    data = tmp_path / "data"
    prepared = _cli(["prepare", "--env", "shelf", "--data-dir", str(data)], env)
    assert prepared.returncode == 0, prepared.stderr
    [template] = (data / "templates" / "shelf").glob("*.sqlite")
    # A retained session: a real copy of the template, as a seed makes it.
    session = data / "sessions" / "shelf" / "s1.sqlite"
    session.parent.mkdir(parents=True)
    session.write_bytes(template.read_bytes())
    [initial] = before
    assert initial.startswith(_revision_of(session))
    # A new environment's branch reaches the framework's tables through `depends_on`.
    framework = head_revision(FRAMEWORK)
    assert f'depends_on: str | Sequence[str] | None = "{framework}"' in before[initial]
    assert "stategym_" not in before[initial]

    models = package / "models.py"
    models.write_text(models.read_text() + BINS)
    refused = _cli(
        ["migrate", "revision", "--env", "shelf", "-m", "initial", "--initial"]
        + ["--data-dir", str(data)],
        env,
    )
    assert refused.returncode == 1
    assert (
        "2 database(s)" in refused.stderr
        and "stamped at shelf's initial revision" in refused.stderr
    )
    assert "s1.sqlite" in refused.stderr
    assert {p.name: p.read_text() for p in migrations.glob("*.py")} == before  # untouched

    # Through the environment variable too (the default data dir of every command).
    refused = _cli(
        ["migrate", "revision", "--env", "shelf", "-m", "initial", "--initial"],
        {**env, "STATEGYM_DATA_DIR": str(data)},
    )
    assert refused.returncode == 1 and "stamped at" in refused.stderr

    # An empty data dir: nothing was served, the initial revision is rewritten.
    empty = tmp_path / "empty"
    done = _cli(
        ["migrate", "revision", "--env", "shelf", "-m", "initial", "--initial"]
        + ["--data-dir", str(empty)],
        env,
    )
    assert done.returncode == 0, done.stderr
    [written] = migrations.glob("*.py")
    assert written.name != initial and "bins" in written.read_text()


NOT_NULL = """

class Crate(Base):
    __tablename__ = "crates"
    id: Mapped[int] = mapped_column(primary_key=True)
"""


@pytest.mark.slow  # new-env, pip install, a few CLI runs: ~40 s
def test_a_required_column_with_no_default_or_backfill_warns_then_fails_check(shelf, tmp_path):
    package, env = shelf
    data = ["--data-dir", str(tmp_path / "data")]
    migrations = package / "migrations"
    models = package / "models.py"
    models.write_text(models.read_text() + NOT_NULL)
    assert (
        _cli(["migrate", "revision", "--env", "shelf", "-m", "crates", *data], env).returncode == 0
    )
    assert _cli(["migrate", "check", "--env", "shelf", *data], env).returncode == 0
    # A required column on a table that already has rows: autogenerate writes add_column
    # nullable=False with nothing to fill it.
    models.write_text(
        models.read_text().replace(
            '    __tablename__ = "crates"\n    id: Mapped[int] = mapped_column(primary_key=True)\n',
            '    __tablename__ = "crates"\n    id: Mapped[int] = mapped_column(primary_key=True)\n'
            "    size: Mapped[int] = mapped_column()\n",
        )
    )
    wrote = _cli(["migrate", "revision", "--env", "shelf", "-m", "crate size", *data], env)
    assert wrote.returncode == 0, wrote.stderr
    assert "warning:" in wrote.stdout and "adds required column 'size'" in wrote.stdout
    [script] = [p for p in migrations.glob("*crate_size*.py")]
    checked = _cli(["migrate", "check", "--env", "shelf", *data], env)
    assert checked.returncode == 1
    assert "cannot run on a database with rows" in checked.stdout
    assert f"{script.name}:" in checked.stdout and "'size'" in checked.stdout

    # The documented fix: add it nullable, backfill, then make it NOT NULL.
    text = script.read_text()
    fixed = text.replace("nullable=False", "nullable=True", 1).replace(
        "    # ### end Alembic commands ###",
        '    op.execute("UPDATE crates SET size = 0")\n'
        '    with op.batch_alter_table("crates") as batch_op:\n'
        '        batch_op.alter_column("size", existing_type=sa.Integer(), nullable=False)\n'
        "    # ### end Alembic commands ###",
        1,
    )
    assert fixed != text
    script.write_text(fixed)
    assert unfilled_columns(script) == []
    checked = _cli(["migrate", "check", "--env", "shelf", *data], env)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_unfilled_columns_reads_the_upgrade_only(tmp_path: Path) -> None:
    script = tmp_path / "abc_rev.py"
    script.write_text(
        "import sqlalchemy as sa\nfrom alembic import op\n\n\n"
        "def upgrade():\n"
        "    op.add_column('t', sa.Column('a', sa.Integer(), nullable=False))\n"
        "    op.add_column('t', sa.Column('b', sa.Integer(), nullable=False, server_default='0'))\n"
        "    op.add_column('t', sa.Column('c', sa.Integer(), nullable=True))\n"
        "    op.add_column('t', sa.Column('d', sa.Integer(), nullable=False))  "
        "# stategym: no-backfill-needed\n"
        "    op.alter_column('t', 'e', nullable=False)\n\n\n"
        "def downgrade():\n"
        "    op.add_column('t', sa.Column('z', sa.Integer(), nullable=False))\n"
    )
    found = unfilled_columns(script)
    assert [(u.column, u.how, u.line) for u in found] == [
        ("a", "add_column", 6),
        ("e", "alter_column", 10),
    ]
    assert "abc_rev.py:6 adds required column 'a'" in str(found[0])


@pytest.mark.parametrize(
    "command", ["history", "current", "check", "upgrade", "sessions", "revision", "downgrade"]
)
def test_every_migrate_command_takes_data_dir(command: str) -> None:
    from typer.testing import CliRunner

    from app.cli.main import cli

    result = CliRunner().invoke(cli, ["migrate", command, "--help"])
    assert result.exit_code == 0
    assert "--data-dir" in result.output
