"""The CLI's own behaviour: clear errors, prepare, envs."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from app.cli.main import cli
from tests.conftest import ENV_NAMES, REPO


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_weak_secret_refuses_to_start_with_a_clear_message(tmp_path):
    result = _run("serve", "--data-dir", str(tmp_path), env={"STATEGYM_SECRET_KEY": "hunter2"})
    assert result.returncode == 2
    assert "too weak" in result.stderr and "Traceback" not in result.stderr


def test_unknown_environment_is_a_clear_error(tmp_path):
    result = _run("serve", "--env", "casino", "--data-dir", str(tmp_path))
    assert result.returncode == 2
    assert "unknown environment 'casino'" in result.stderr and "Traceback" not in result.stderr


def test_prepare_builds_the_template_and_envs_lists_them(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["prepare", "--env", "retail", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "templates" / "retail").glob("*.sqlite"))
    listing = runner.invoke(cli, ["envs"])
    for name in ENV_NAMES:
        assert name in listing.output


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code` (stdout: one name a line)."""
    script = f"import sys\n{code}\nprint('\\n'.join(sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def _loaded(modules: set[str], packages: list[str]) -> list[str]:
    return [p for p in packages if any(m == p or m.startswith(p + ".") for m in modules)]


def test_help_imports_no_subcommand():
    """`stategym --help` lists every command from the lazy table: no server, storage or taskgen
    (each `stategym` process used to import all of them, ~1 s)."""
    modules = _modules_after(
        "from app.cli.main import main\n"
        "sys.argv = ['stategym', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    heavy = ["fastapi", "sqlalchemy", "uvicorn", "app.server", "app.storage", "app.runtime"]
    heavy += ["app.taskgen", "app.explorer", "app.registry", "app.cli.serve", "app.cli.tasks"]
    assert _loaded(modules, heavy) == []


def test_serving_imports_neither_authoring_tools_nor_optional_backends():
    """What `stategym serve` imports on SQLite without MCP: not the task generator, the
    explorer, PostgreSQL's driver or the MCP SDK."""
    modules = _modules_after("import app.cli.serve, app.server.asgi")
    optional = ["app.taskgen", "app.explorer", "jinja2", "psycopg", "mcp", "app.cli.tasks"]
    assert _loaded(modules, optional) == []


def test_each_listed_help_is_the_start_of_the_commands_own():
    from typer.main import get_command

    from app.cli.lazy import LazyGroup, Placeholder

    def walk(group: LazyGroup, path: str) -> None:
        for name, listed in list(group.commands.items()):
            assert isinstance(listed, Placeholder), f"{path} {name} is not lazy"
            command = group.get_command(None, name)  # type: ignore[arg-type]
            assert not isinstance(command, Placeholder)
            own = " ".join((command.help or "").split())
            assert own.startswith(listed.help.rstrip(".")), f"{path} {name}: {own!r}"
            if isinstance(command, LazyGroup):
                walk(command, f"{path} {name}")

    walk(get_command(cli), "stategym")  # type: ignore[arg-type]
