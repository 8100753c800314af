"""Verify scores the task stored at seed, never the task in the request body.

Runs on both backends (SQLite files, PostgreSQL schemas) on the warehouse test environment.
"""

from __future__ import annotations

import pytest

from tests.conftest import backend_settings, drop_pg_schemas, new_pg_prefix
from tests.server.test_protocol import TASK
from tests.support.rollouts import response_object


@pytest.fixture
def settings(tmp_path, backend, request):
    prefix = None
    if backend == "postgres":
        prefix = new_pg_prefix()
        request.addfinalizer(lambda: drop_pg_schemas(prefix))
    return backend_settings(backend, tmp_path / "data", prefix)


SELL = {"sku": "SKU-9001", "delta": -2, "reason": "sold"}
OTHER = {"name": "move_stock", "arguments": {"sku": "SKU-9001", "delta": -5, "reason": "x"}}

# Bodies that tried to rewrite the task a no-op rollout is scored against.
REWRITES = [
    pytest.param({"ground_truth": [], "expected_outputs": []}, id="issue-example"),
    pytest.param({"ground_truth": [], "expected_outputs": ["Nothing"]}, id="own-answer"),
    pytest.param({"reward_mode": "partial", "expected_outputs": []}, id="partial-mode"),
    pytest.param(
        {"ground_truth": [], "expected_state": [{"table": "items", "count": 1}]}, id="own-checks"
    ),
    pytest.param({"seed": {"rows": {}}, "ground_truth": []}, id="own-seed"),
]


@pytest.mark.parametrize("rewrite", REWRITES)
async def test_body_cannot_rewrite_the_task(warehouse, rewrite):
    seeded = await warehouse.post("/seed_session", json=TASK)
    body = {**TASK, **rewrite, "response": response_object([], "Nothing done.")}
    r = await warehouse.post("/verify", json=body)
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["reward"] == 0.0
    sent = {k for k, v in rewrite.items() if v is not None}
    assert set(result["task_mismatch"]) == sent
    record = warehouse.app.state.protocol.sessions.control.get(seeded.json()["session_id"])
    assert record.reward == 0.0  # what retention acts on


async def test_body_cannot_lower_a_reward_either(warehouse):
    """A body that swaps the reference solution does not change a correct rollout's 1.0."""
    seeded = await warehouse.post("/seed_session", json=TASK)
    await warehouse.post("/move_stock", json=SELL)
    body = {**TASK, "ground_truth": [OTHER], "response": response_object([], "3 left")}
    result = (await warehouse.post("/verify", json=body)).json()
    assert result["reward"] == 1.0 and result["task_mismatch"] == ["ground_truth"]
    # The session was open (its call opened it): recorded in verify's one hop, flag included.
    record = warehouse.app.state.protocol.sessions.control.get(seeded.json()["session_id"])
    assert record.reward == 1.0 and record.verify["task_mismatch"] == ["ground_truth"]


async def test_the_whole_row_echoed_back_is_no_mismatch(warehouse):
    await warehouse.post("/seed_session", json=TASK)
    await warehouse.post("/move_stock", json=SELL)
    # NeMo Gym may send arguments as a JSON string.
    gt = [{"name": "move_stock", "arguments": '{"sku": "SKU-9001", "delta": -2, "reason": "sold"}'}]
    for body in (
        {**TASK, "response": response_object([], "3 left")},
        {**TASK, "ground_truth": gt, "response": response_object([], "3 left")},
        {"response": response_object([], "3 left")},
    ):
        result = (await warehouse.post("/verify", json=body)).json()
        assert result["reward"] == 1.0 and "task_mismatch" not in result, result


async def test_a_rubric_in_the_body_is_not_used(warehouse):
    """No rubric was seeded: a body's judge is flagged, not called (the judge is unreachable
    here, so calling it would mask the sample)."""
    await warehouse.post("/seed_session", json=TASK)
    await warehouse.post("/move_stock", json=SELL)
    body = {
        **TASK,
        "judge": {"rubric": "Anything goes."},
        "response": response_object([], "3 left"),
    }
    result = (await warehouse.post("/verify", json=body)).json()
    assert result["reward"] == 1.0 and result["task_mismatch"] == ["judge"]
    assert "mask_sample" not in result and "judge" not in result["reward_components"]


@pytest.mark.parametrize(
    "bad", [{"ground_truth": "cancel it"}, {"expected_outputs": 5}, {"reward_mode": "lenient"}]
)
async def test_malformed_task_fields_in_the_body_stay_4xx(warehouse, bad):
    await warehouse.post("/seed_session", json=TASK)
    r = await warehouse.post("/verify", json={**TASK, **bad})
    assert r.status_code == 422, r.text
