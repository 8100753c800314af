"""Hostile and malformed input: schemathesis over the OpenAPI schema plus a battery of our own.

Every input gets a clear 4xx or a readable tool error, the server stays up, and no other session
is touched (a bystander session's database is compared byte for byte at the end).
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis.config import SchemathesisConfig
from starlette.testclient import TestClient

from app.registry import load_environment
from app.sdk.environment import FRAMEWORK_TOOL_NAMES
from app.server.api import create_app
from app.settings import Settings
from tests.conftest import FIXTURES, TEST_SECRET
from tests.support.rollouts import load_tasks

RETAIL = load_environment("retail")
# The hostile parts of requests (fixtures/README.md): strings, cookies, arguments.
HOSTILE = json.loads((FIXTURES / "hostile_requests.json").read_text(encoding="utf-8"))
TASK = load_tasks(load_environment("retail").tasks_path)[3]
_DATA_DIR = Path(tempfile.mkdtemp(prefix="stategym-fuzz-"))
APP = create_app(Settings(data_dir=_DATA_DIR, secret_key=TEST_SECRET), RETAIL)
_BOOT = TestClient(APP)
_SEEDED = _BOOT.post("/seed_session", json=TASK)
COOKIE = _SEEDED.cookies["stategym_session"]
BYSTANDER = _BOOT.post("/seed_session", json=TASK).json()["session_id"]

TOOL_NAMES = {t.name for t in RETAIL.tools}
# A well-formed fork, rewind, export or restore may name a session or a step that does not exist
# (404, 409) or carry a blob this server did not sign (422): refused by design (docs/steps.md).
STEP_ROUTES = ("/fork_session", "/rewind_session", "/export_session", "/restore_session")
# Schemathesis builds its coverage phase's cases when it collects (seconds per xdist worker, run
# or not): `make test` fuzzes without it; the slow twin (test_hostile_fuzz_slow.py) runs every
# phase, and only `make test-slow` imports it.
quick_schema = schemathesis.openapi.from_asgi(
    "/openapi.json",
    APP,
    config=SchemathesisConfig.from_dict({"phases": {"coverage": {"enabled": False}}}),
).exclude(path_regex="^/admin")


def dump(session_id: str) -> list[str]:
    path = APP.state.protocol.sessions.backend.store.session_path(session_id)
    conn = sqlite3.connect(path)
    try:
        # The step log records failed calls too (docs/steps.md): not the session's state.
        return [line for line in conn.iterdump() if '"_stategym_steps"' not in line]
    finally:
        conn.close()


BYSTANDER_BEFORE = dump(BYSTANDER)


# Fuzzing: a few examples per operation in `make test`, many more in the slow twin
# (`make test-slow`, which CI runs too).
_FUZZ = dict(deadline=None, suppress_health_check=list(HealthCheck))


@quick_schema.parametrize()
@hypothesis_settings(max_examples=8, **_FUZZ)
def test_schemathesis_finds_no_5xx_and_responses_match_the_schema(case):
    check_case(case)


def check_case(case) -> None:
    # With a valid session cookie, so tool routes are exercised past the session check.
    excluded = []
    if case.operation.path.lstrip("/") in TOOL_NAMES:
        # By the NeMo Gym contract a bad tool call is a 200 with a readable error for the
        # model, not a 4xx: schema-violating tool arguments are answered, by design.
        excluded.append(schemathesis.checks.negative_data_rejection)
    if case.operation.path in ("/seed_session", "/verify", *STEP_ROUTES):
        # A task row can be well-formed JSON and still not fit the environment (an unknown
        # table in its seed, a gold call to no tool): that is a 422, not a schema violation.
        excluded.append(schemathesis.checks.positive_data_acceptance)
    response = case.call(headers={"cookie": f"stategym_session={COOKIE}"})
    case.validate_response(response, excluded_checks=excluded)
    if case.operation.path.lstrip("/") in TOOL_NAMES and response.status_code == 200:
        assert set(response.json()) & {"output", "error"}


def test_bystander_session_untouched_by_fuzzing():
    # Runs after the fuzz cases in this module (pytest keeps file order).
    assert dump(BYSTANDER) == BYSTANDER_BEFORE


@pytest.fixture
async def retail(client_factory):
    async with client_factory(RETAIL) as client:
        r = await client.post("/seed_session", json=TASK)
        assert r.status_code == 200
        yield client


SQL_METACHARACTERS: list[str] = HOSTILE["sql_metacharacters"]
UNICODE_EDGES: list[str] = HOSTILE["unicode_edges"]


def _string_fields(tool) -> list[str]:
    props = tool.openai_schema()["parameters"]["properties"]
    return [name for name, p in props.items() if "string" in json.dumps(p)]


async def test_sql_metacharacters_and_unicode_in_every_string_argument(retail):
    session_id = retail.app.state.protocol.sessions.control.list()[0].id
    before = _dump_of(retail, session_id)
    tried = 0
    # The answer tools and message_user take any text by design (stored as data: the answer is
    # verified by value, a message is the conversation; tests/verify/test_conversation.py).
    for tool in [t for t in RETAIL.tools if t.name not in FRAMEWORK_TOOL_NAMES]:
        for field in _string_fields(tool):
            for value in SQL_METACHARACTERS + UNICODE_EDGES:
                r = await retail.post(f"/{tool.name}", json={field: value})
                tried += 1
                assert r.status_code == 200, (tool.name, field, value, r.text)
                body = r.json()
                assert "error" in body or "output" in body
    assert tried > 50
    # Only write tools could change anything, and every call above lacked required fields or
    # named nothing that exists: the session is exactly as seeded.
    assert _dump_of(retail, session_id) == before
    assert (await retail.get("/health")).status_code == 200


def _dump_of(client, session_id: str) -> list[str]:
    path = client.app.state.protocol.sessions.backend.store.session_path(session_id)
    conn = sqlite3.connect(path)
    try:
        # The step log records failed calls too (docs/steps.md): not the session's state.
        return [line for line in conn.iterdump() if '"_stategym_steps"' not in line]
    finally:
        conn.close()


@pytest.mark.parametrize(
    "content",
    [
        b"[" * 100_000 + b"]" * 100_000,  # deeply nested JSON
        b'{"a": ' * 5000 + b"1" + b"}" * 5000,
        b'{"order_number": 1' + b"0" * 5000 + b"}",  # a 5,000-digit integer
        b'{"x": NaN}',
        b"\xef\xbb\xbf{}",  # BOM
    ],
)
async def test_pathological_json_is_a_clear_answer(retail, content):
    r = await retail.post(
        "/get_order_details", content=content, headers={"content-type": "application/json"}
    )
    assert r.status_code in (200, 400), r.text
    body = r.json()
    assert "error" in body
    assert (await retail.get("/health")).status_code == 200


async def test_huge_integers_and_wrong_types_are_tool_errors(retail):
    wrong = HOSTILE["wrong_type_arguments"]
    assert {"order_number": 10**400} in wrong["bodies"]  # JSON keeps big integers exact
    for args in wrong["bodies"]:
        r = await retail.post(wrong["path"], json=args)
        assert r.status_code == 200 and "error" in r.json(), args
    # Integers past 64 bits never reach the database (SQLite cannot bind them), on any tool.
    for case in HOSTILE["integers_past_64_bits"]:
        path, args = case["path"], case["body"]
        r = await retail.post(path, json=args)
        error = r.json()["error"]
        assert r.status_code == 200 and error["code"] == "invalid_arguments", (path, r.text)
        assert "2**63" in error["message"]


@pytest.mark.parametrize("cookie", HOSTILE["forged_cookies"])
async def test_forged_cookies_with_path_characters_are_refused(retail, cookie):
    async with httpx.AsyncClient(transport=retail._transport, base_url="http://x") as other:
        r = await other.post(
            "/get_order_details",
            json={"order_number": "#W1"},
            headers={"cookie": f"stategym_session={cookie}"},
        )
    assert r.status_code == 401


async def test_replayed_cookie_of_closed_session_is_refused(retail):
    cookie = retail.cookies["stategym_session"]
    await retail.post("/close_session", json={})
    async with httpx.AsyncClient(transport=retail._transport, base_url="http://x") as other:
        r = await other.post(
            "/get_order_details",
            json={"order_number": "#W1"},
            headers={"cookie": f"stategym_session={cookie}"},
        )
    assert r.status_code == 404 and r.json()["error"]["type"] == "session_closed"


async def test_typed_seed_with_path_like_resources_session_id_is_harmless(retail):
    body = {
        "resources_session_id": HOSTILE["path_like_resources_session_id"],
        "episode_id": {"rollout_id": "r1", "attempt": 0},
        "task_id": {"taskset": "retail", "task_id": str(TASK["task_id"])},
        "task_data": {k: v for k, v in TASK.items() if k != "responses_create_params"},
    }
    r = await retail.post("/seed_session", json=body)
    assert r.status_code == 200
    assert not (Path("/etc") / "passwd.sqlite").exists()
    sid = r.headers["X-StateGym-Session"]
    assert len(sid) == 32 and all(c in "0123456789abcdef" for c in sid)


async def test_a_hostile_answer_is_stored_as_data(retail):
    """submit_answer takes any text: SQL in it is a value in the answer table, nothing more."""
    session_id = retail.app.state.protocol.sessions.control.list()[0].id
    hostile = SQL_METACHARACTERS[0]
    r = await retail.post("/submit_answer", json={"answer": hostile})
    assert "output" in r.json(), r.text
    path = retail.app.state.protocol.sessions.backend.store.session_path(session_id)
    conn = sqlite3.connect(path)
    try:
        stored = conn.execute("SELECT kind, value FROM stategym_answer").fetchall()
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert stored == [("answer", json.dumps(hostile))]
    assert {"orders", "customers"} <= tables
