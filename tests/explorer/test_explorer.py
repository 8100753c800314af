"""The run explorer (`stategym browse`) in process, over rollouts that really ran, on both
backends: the runs page and its filters, a rollout step by step, a task's group, a table as of
a step, lineage, and nothing written."""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.cli.browse import browse_app, explorer_for
from app.settings import Settings
from tests.conftest import backend_settings, drop_pg_schemas, new_pg_prefix, pg_unavailable_reason
from tests.support.explorer_runs import PENDING, build_explorer_runs


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def runs(request, tmp_path_factory) -> Iterator[tuple[Settings, dict[str, str]]]:
    """(settings, ids) of the four rollouts (pass, fail, fork, refusal) on each backend."""
    prefix = None
    if request.param == "postgres":
        reason = pg_unavailable_reason()
        if reason:
            pytest.skip(reason)
        prefix = new_pg_prefix()
    data_dir = tmp_path_factory.mktemp(f"explore-{request.param}") / "data"
    settings = backend_settings(request.param, data_dir, prefix)
    try:
        yield settings, build_explorer_runs(settings)
    finally:
        if prefix:
            drop_pg_schemas(prefix)


@asynccontextmanager
async def explorer(settings: Settings, **headers: str) -> AsyncIterator[httpx.AsyncClient]:
    with explorer_for(settings) as (x, ds):
        if ds is not None:
            await ds.invoke_startup()
        transport = httpx.ASGITransport(app=browse_app(x, ds, settings))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=headers
        ) as client:
            yield client


def json_of(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text[:2000]
    return response.json()


async def test_runs_page_lists_every_run_with_task_fields_and_reason(runs):
    settings, ids = runs
    async with explorer(settings) as c:
        page = await c.get("/")
        assert page.status_code == 200
        for sid in ids.values():
            assert f'href="/rollouts/{sid}"' in page.text
        assert "final state differs from gold" in page.text  # the failing run's headline
        assert "<svg" in page.text and "Reward histogram" in page.text
        data = json_of(await c.get("/?format=json"))
    assert data["total"] == 4
    rows = {r["id"]: r for r in data["runs"]}
    assert rows[ids["pass"]]["reward"] == 1.0 and rows[ids["fail"]]["reward"] == 0.0
    assert rows[ids["pass"]]["family"] == "cancel" and rows[ids["pass"]]["difficulty"] == "3"
    assert rows[ids["refusal"]]["family"] == "refuse_cancel_delivered"
    assert rows[ids["fail"]]["failure_headline"] == "final state differs from gold"
    assert rows[ids["pass"]]["calls"] == 3 and rows[ids["pass"]]["ended_at"] is not None
    assert sum(data["histogram"]["bins"]) == 4 and data["histogram"]["bins"][-1] == 3
    assert data["summary"]["passed"] == 3 and data["summary"]["verified"] == 4
    family = {g["label"]: g for g in data["by_family"]}
    assert family["cancel"]["runs"] == 3 and family["cancel"]["passed"] == 2
    task = {t["task_id"]: t for t in data["by_task"]}
    assert task["retail-020"]["runs"] == 3 and abs(task["retail-020"]["pass_rate"] - 2 / 3) < 1e-9
    assert data["failures"] == [{"headline": "final state differs from gold", "runs": 1}]


async def test_runs_page_filters_sorts_and_pages(runs):
    settings, ids = runs

    async def listed(query: str) -> list[str]:
        return [r["id"] for r in json_of(await c.get(f"/?{query}&format=json"))["runs"]]

    async with explorer(settings) as c:
        assert set(await listed("task=retail-020")) == {ids["pass"], ids["fail"], ids["fork"]}
        assert await listed("reward_max=0.5") == [ids["fail"]]
        assert await listed("reward_min=0.5&task=retail-011") == [ids["refusal"]]
        assert await listed("failure=final+state+differs") == [ids["fail"]]
        assert await listed("failure=no+such+reason") == []
        assert set(await listed("family=cancel")) == {ids["pass"], ids["fail"], ids["fork"]}
        assert await listed("difficulty=2") == [ids["refusal"]]
        assert await listed("env=retail&status=closed&since=1h") != []
        assert await listed("until=2000-01-01") == []
        assert (await listed("sort=reward&order=asc"))[0] == ids["fail"]
        # Keyset paging, newest first: every run once, in the order of one big page.
        everything = await listed("limit=50")
        seen, query = [], "limit=1"
        while query is not None:
            data = json_of(await c.get(f"/?{query}&format=json"))
            seen += [r["id"] for r in data["runs"]]
            query = data["next"]
        assert seen == everything and len(seen) == 4
        assert await listed("limit=2&offset=2") == everything[2:]
        # Offset paging on another sort.
        by_reward = await listed("sort=reward&limit=50")
        assert await listed("sort=reward&limit=2&offset=2") == by_reward[2:]


async def test_rollout_page_shows_steps_rows_rewards_and_verify(runs):
    settings, ids = runs
    async with explorer(settings) as c:
        page = await c.get(f"/rollouts/{ids['pass']}")
        assert page.status_code == 200
        html = page.text
        assert html.count('class="step') >= 3 and "cancel_pending_order" in html
        assert "Please cancel order #W90200010" in html  # the prompt, from the task file
        # The cancel's row diff: orders.status pending -> cancelled, the column highlighted.
        changed = re.search(
            r'<tr class="changed"><th scope="row">status</th><td>pending</td>'
            r"<td>cancelled</td>",
            html,
        )
        assert changed, "orders.status before -> after is highlighted"
        assert "<details><summary>Output" in html  # outputs collapsed
        assert 'aria-labelledby="steps-title"' in html  # the step reward chart
        assert "Matches the gold state." in html
        assert f"stategym sessions steps {ids['pass']} --rows" in html
        data = json_of(await c.get(f"/rollouts/{ids['pass']}?format=json"))
    assert [s["tool"] for s in data["steps"]][-1] == "cancel_pending_order"
    assert sum(s["step_reward"] for s in data["steps"]) == pytest.approx(1.0)
    orders = [ch for ch in data["steps"][-1]["changes"] if ch["table"] == "orders"]
    assert orders and orders[0]["changed"] == ["status"]
    assert data["verify"]["reward"] == 1.0 and data["verify"]["state_diff"] == {}
    assert data["lineage"]["children"][0]["session_id"] == ids["fork"]
    assert data["lineage"]["children"][0]["step"] == 2


async def test_failing_rollout_shows_the_error_and_the_diff_against_gold(runs):
    settings, ids = runs
    async with explorer(settings) as c:
        html = (await c.get(f"/rollouts/{ids['fail']}")).text
        assert 'class="badge error">error: not_found' in html
        assert "final state differs from gold" in html
        assert re.search(r"<th scope=\"row\">status</th><td>cancelled</td><td>pending</td>", html)
        refusal = await c.get(f"/rollouts/{ids['refusal']}?format=json")
        steps = json_of(refusal)["steps"]
        assert steps[-1]["tool"] == "cancel_pending_order" and steps[-1]["outcome"] != "ok"
        assert json_of(refusal)["verify"]["reward"] == 1.0


async def test_fork_page_names_its_parent_and_step(runs):
    settings, ids = runs
    async with explorer(settings) as c:
        html = (await c.get(f"/rollouts/{ids['fork']}")).text
        assert f'href="/rollouts/{ids["pass"]}">{ids["pass"]}</a> at step 2' in html
        data = json_of(await c.get(f"/rollouts/{ids['fork']}?format=json"))
    assert data["lineage"]["parent"] == {"session_id": ids["pass"], "step": 2, "kind": "fork"}


async def test_task_page_puts_the_group_side_by_side_with_divergence(runs):
    settings, ids = runs
    async with explorer(settings) as c:
        html = (await c.get("/tasks/retail/retail-020")).text
        assert "Gold calls" in html and "cancel_pending_order" in html
        assert "≠ gold" in html  # the failing run's wrong cancel is marked
        data = json_of(await c.get("/tasks/retail/retail-020?format=json"))
    by_id = {r["id"]: r for r in data["runs"]}
    assert set(by_id) == {ids["pass"], ids["fail"], ids["fork"]}
    assert by_id[ids["pass"]]["diverges_from_gold"] is None
    assert by_id[ids["fork"]]["diverges_from_gold"] is None  # the fork kept steps 1-2
    assert by_id[ids["fail"]]["diverges_from_gold"] == 3
    assert by_id[ids["fail"]]["advantage"] == pytest.approx(-2 / 3)
    order = [r["id"] for r in data["runs"]]
    assert data["matrix"][order.index(ids["pass"])][order.index(ids["fail"])] == 3


async def test_table_as_of_each_step(runs):
    settings, ids = runs
    sid = ids["pass"]

    async def status_at(step: int) -> tuple[str, list[Any]]:
        data = json_of(await c.get(f"/rollouts/{sid}/tables/orders?step={step}&format=json"))
        col = data["columns"].index("status")
        number = data["columns"].index("order_number")
        statuses = {}
        for offset in range(0, data["total"], 1000):
            page = json_of(
                await c.get(
                    f"/rollouts/{sid}/tables/orders?step={step}&offset={offset}&limit=1000&format=json"
                )
            )
            statuses.update({row[number]: row[col] for row in page["rows"]})
        return statuses[PENDING], data["written"]

    async with explorer(settings) as c:
        assert await status_at(2) == ("pending", [])
        status, written = await status_at(3)
        assert status == "cancelled" and len(written) == 1
        assert (await status_at(0))[0] == "pending"
        html = (await c.get(f"/rollouts/{sid}/tables/orders?step=3")).text
        assert "Rows step 3 wrote" in html and PENDING in html
        now = json_of(await c.get(f"/rollouts/{sid}/tables/orders?format=json"))
        assert now["step"] == 3 and now["steps"] == 3


@pytest.mark.parametrize(
    "path, status, says",
    [
        ("/rollouts/" + "0" * 32, 404, "unknown"),
        ("/rollouts/..%2F..%2Fcontrol", 404, "no such page"),
        ("/rollouts/..%252F..%252Fcontrol", 404, "not a session id"),
        ("/rollouts/ZZZ", 404, "not a session id"),
        ("/tasks/retail/retail-999", 404, "no runs of task"),
        ("/tasks/Bad-Env/x", 400, "a task page is"),
        ("/?reward_min=abc", 400, "is not a number"),
        ("/?reward_min=nan", 400, "finite"),
        ("/?reward_min=1&reward_max=0", 400, "is above"),
        ("/?limit=1000000000", 400, "limit must be"),
        ("/?offset=-1", 400, "offset must be"),
        ("/?sort=id;drop", 400, "sort must be"),
        ("/?after=garbage", 400, "cursor"),
        ("/?since=yesterday", 400, "neither a duration"),
        ("/?since=99999999999w", 400, ""),
        ("/?env=../../etc", 400, "not an environment"),
        ("/?task=" + "x" * 500, 400, "at most"),
        ("/?bogus=1", 400, "unknown parameter"),
        ("/no/such/page", 404, "no such page"),
    ],
)
async def test_bad_input_is_a_readable_4xx(runs, path, status, says):
    settings, _ids = runs
    async with explorer(settings) as c:
        page = await c.get(path)
        assert page.status_code == status, page.text[:500]
        assert says in page.text and "Traceback" not in page.text
        assert "<h1>" in page.text or page.headers["content-type"].startswith("application/json")


async def test_bad_table_and_step_are_4xx(runs):
    settings, ids = runs
    sid = ids["pass"]
    async with explorer(settings) as c:
        for path, status, says in (
            (f"/rollouts/{sid}/tables/nope", 400, "no table"),
            (f"/rollouts/{sid}/tables/orders?step=99", 400, "step must be from 0"),
            (f"/rollouts/{sid}/tables/orders?step=-1", 400, "step must be"),
            (f"/rollouts/{sid}/tables/orders?step=1&format=json", 200, ""),
        ):
            page = await c.get(path)
            assert page.status_code == status and says in page.text, page.text[:300]
        error = await c.get(f"/rollouts/{sid}/tables/nope?format=json")
        assert error.json()["error"]["status"] == 400


async def test_host_check_and_admin_token(runs):
    settings, ids = runs
    async with explorer(settings) as c:
        assert (await c.get("/", headers={"host": "evil.example"})).status_code == 400
    token = "t" * 24
    locked = settings.model_copy(update={"admin_token": token})
    async with explorer(locked) as c:
        page = await c.get(f"/rollouts/{ids['pass']}")
        assert page.status_code == 303 and page.headers["location"].startswith("/-/login")
        assert (await c.get("/?format=json")).status_code == 401
        assert (await c.get("/-/static/explorer.css")).status_code == 200
        bearer = await c.get("/", headers={"authorization": f"Bearer {token}"})
        assert bearer.status_code == 200
        wrong = await c.post("/-/login", content="token=nope&next=/", headers=FORM)
        assert wrong.status_code == 401
        signed = await c.post(
            "/-/login", content=f"token={token}&next=/tasks/retail/retail-020", headers=FORM
        )
        assert signed.status_code == 303
        assert signed.headers["location"] == "/tasks/retail/retail-020"
        assert (await c.get("/tasks/retail/retail-020")).status_code == 200  # the cookie
        assert token not in signed.headers["set-cookie"]
        for away in ("//evil.example/", "/\\evil.example", "https://evil.example/"):
            moved = await c.post("/-/login", content=f"token={token}&next={away}", headers=FORM)
            assert moved.headers["location"] == "/", away


FORM = {"content-type": "application/x-www-form-urlencoded"}


async def test_datasette_raw_sql_view_on_sqlite_only(runs):
    settings, ids = runs
    async with explorer(settings) as c:
        rows = await c.get(f"/-/datasette/{ids['pass']}/orders.json?order_number={PENDING[1:]}")
        if settings.database_url is None:
            assert rows.status_code in (200, 404)  # the database is served (opened lazily)
            got = await c.get(f"/-/datasette/{ids['pass']}/orders.json?id=102002&_shape=array")
            assert got.json()[0]["status"] == "cancelled"
            assert 'href="/-/datasette/"' in (await c.get("/")).text
        else:
            assert rows.status_code == 404 and "no such page" in rows.text
        assert (await c.get(f"/-/timeline/{ids['pass']}")).status_code == 308


async def test_browsing_writes_nothing(runs):
    settings, ids = runs
    if settings.database_url is not None:
        pytest.skip("session schemas: tests/storage/test_inspection_postgres.py checks inspection")
    folder = settings.data_dir / "sessions" / "retail"
    before = _digests(folder)
    async with explorer(settings) as c:
        for sid in ids.values():
            assert (await c.get(f"/rollouts/{sid}")).status_code == 200
            assert (await c.get(f"/rollouts/{sid}/tables/orders?step=1")).status_code == 200
            await c.get(f"/-/datasette/{sid}/orders.json")
        assert (await c.get("/tasks/retail/retail-020")).status_code == 200
    assert _digests(folder) == before


def _digests(folder: Path) -> dict[str, str]:
    files = sorted(p for p in folder.rglob("*") if p.is_file())  # packs and their .bases too
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_browse_refuses_another_interface_without_the_admin_token(runs):
    from typer.testing import CliRunner

    from app.cli.main import cli

    settings, _ids = runs
    args = ["browse", "--data-dir", str(settings.data_dir), "--host", "0.0.0.0"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1 and "without authentication" in result.output


async def test_a_session_whose_file_is_gone_still_shows_its_record(runs, tmp_path):
    import shutil

    settings, ids = runs
    if settings.database_url is not None:
        pytest.skip("retention of files: the SQLite backend")
    copy = settings.model_copy(update={"data_dir": tmp_path / "data"})
    shutil.copytree(settings.data_dir, copy.data_dir)
    for file in (copy.data_dir / "sessions" / "retail").glob(f"{ids['fail']}.sqlite*"):
        file.unlink()  # its file, or the pack it became at close
    async with explorer(copy) as c:
        page = await c.get(f"/rollouts/{ids['fail']}")
        assert page.status_code == 200 and "database is gone" in page.text
        assert "final state differs from gold" in page.text  # the stored verify result
        table = await c.get(f"/rollouts/{ids['fail']}/tables/orders")
        assert table.status_code == 400 and "gone" in table.text
        group = json_of(await c.get("/tasks/retail/retail-020?format=json"))
        gone = next(r for r in group["runs"] if r["id"] == ids["fail"])
        assert gone["calls"] is None and gone["diverges_from_gold"] is None


async def test_markup_in_stored_text_is_shown_as_text(runs, tmp_path):
    """A task id or failure reason holding HTML is escaped on every page that shows it."""
    import json
    import shutil
    import sqlite3

    from app.storage.control_schema import task_digest, task_text

    settings, ids = runs
    if settings.database_url is not None:
        pytest.skip("one backend is enough: the templates are the same")
    copy = settings.model_copy(update={"data_dir": tmp_path / "data"})
    shutil.copytree(settings.data_dir, copy.data_dir)
    evil = "<script>alert(1)</script>"
    conn = sqlite3.connect(copy.data_dir / "control.sqlite")
    with conn:
        verify = json.dumps({"reward": 0.0, "failure_reason": f"{evil} (detail)"})
        task = task_text({"task_id": evil, "env": "retail", "family": evil})
        digest = task_digest("retail", task)
        conn.execute(
            "INSERT INTO task_rows (digest, env, task_json, created_at) VALUES (?, ?, ?, ?)",
            (digest, "retail", task, "2026-12-01 00:00:00.000000"),
        )
        conn.execute(
            "UPDATE sessions SET task_id = ?, verify_json = ?, task_digest = ? WHERE id = ?",
            (evil, verify, digest, ids["refusal"]),
        )
    conn.close()
    async with explorer(copy) as c:
        for path in ("/", f"/rollouts/{ids['refusal']}", "/?failure=%3Cscript%3E"):
            page = await c.get(path)
            assert page.status_code == 200, page.text[:300]
            assert evil not in page.text and "&lt;script&gt;" in page.text
        group = await c.get("/tasks/retail/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
        assert group.status_code == 200 and evil not in group.text


def test_a_filters_summary_is_reused_while_fresh_only(runs):
    from app.explorer.filters import parse_filter

    settings, _ids = runs
    with explorer_for(settings) as (x, _ds):
        first = x.queries.overview(parse_filter({"task": "retail-020"}))
        paged = x.queries.overview(parse_filter({"task": "retail-020", "offset": "1"}))
        assert paged[0] is first[0]  # turning a page reuses the filter's summary
        other = x.queries.overview(parse_filter({"task": "retail-011"}))
        assert other[0].total == 1 and first[0].total == 3
        x.queries.summary_ttl = 0.0
        again = x.queries.overview(parse_filter({"task": "retail-020"}))
        assert again[0] is not first[0] and again[0] == first[0]
