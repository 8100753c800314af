"""Data an agent wrote never makes verify, /admin or the sessions CLI a 500.

The sql environment lets an agent write any value into any SQLite column (type affinity is no
type check). Each poisoned value must be a mismatch with evidence (reward 0), answered 200.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
from tests.conftest import TEST_SECRET
from tests.support.rollouts import load_tasks, response_object

TOKEN = "admin-token-0123456789abcdef"
FIRST = "WHERE id = (SELECT min(id) FROM {t})"
POISON = [
    ("employees", "hire_date", "'not-a-date'"),  # the example
    ("employees", "hire_date", "X'00ff'"),  # bytes in a date column
    ("employees", "hire_date", "'2026-13-45'"),  # a date-shaped string that is no date
    ("projects", "start_date", "1e999"),  # infinity in a date column
    ("departments", "budget", "'lots'"),  # text in a money column
    ("departments", "budget", "X'00'"),  # bytes in a money column
    ("departments", "budget", "1e999"),  # infinity (JSON cannot carry it)
    ("departments", "location", "X'ff00'"),  # bytes (not UTF-8) in a text column
    ("customers", "country", "9223372036854775807"),  # the largest int in a text column
]


@pytest.fixture(scope="module")
def task() -> dict:
    return load_tasks(load_environment("sql").tasks_path)[0]  # an answer task: "65"


@pytest.fixture
def sql_settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", secret_key=TEST_SECRET, admin_token=TOKEN)


async def _poisoned_session(settings: Settings, task: dict, table: str, col: str, value: str):
    app = create_app(settings, load_environment("sql"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            sid = (await c.post("/seed_session", json=task)).json()["session_id"]
            sql = f"UPDATE {table} SET {col} = {value} " + FIRST.format(t=table)
            written = (await c.post("/run_sql", json={"sql": sql})).json()
            assert "output" in written, written  # the write itself is allowed
            body = {**task, "response": response_object([], "65")}
            verdicts = [await c.post("/verify", json=body) for _ in range(2)]
            auth = {"Authorization": f"Bearer {TOKEN}"}
            admin = [
                await c.get(f"/admin/sessions/{sid}/diff", headers=auth),
                await c.get(f"/admin/sessions/{sid}/diff?against=gold", headers=auth),
                await c.get(f"/admin/sessions/{sid}/tables/{table}", headers=auth),
                await c.get(f"/admin/sessions/{sid}", headers=auth),
            ]
            return sid, verdicts, admin


@pytest.mark.parametrize("table, col, value", POISON)
async def test_poisoned_value_is_a_mismatch_not_a_500(sql_settings, task, table, col, value):
    sid, verdicts, admin = await _poisoned_session(sql_settings, task, table, col, value)
    for r in verdicts:
        assert r.status_code == 200, r.text
        result = r.json()
        assert result["reward"] == 0.0
        assert result["reward_components"]["state_match"] == 0.0
        changed = result["verification"]["state_diff"][table]["changed_rows"][0]["changes"]
        assert col in changed, changed
    assert verdicts[0].json()["reward_components"] == verdicts[1].json()["reward_components"]
    for r in admin:
        assert r.status_code == 200, r.text
    assert col in json.dumps(admin[0].json())
    # The inspection CLI reads the same files.
    data_dir = str(sql_settings.data_dir)
    for args in (["show", sid], ["diff", sid], ["diff", sid, "--against", "gold"]):
        out = CliRunner().invoke(cli, ["sessions", *args, "--data-dir", data_dir, "--json"])
        assert out.exit_code == 0, out.output
        json.loads(out.output)
