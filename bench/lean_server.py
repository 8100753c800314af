"""The lean baseline: what a NeMo Gym user writes first, for every environment.

Per session, a dict of the task's own seed rows over the environment's base rows, which are read
once per process (from the StateGym template file) and shared read-only (bench/lean_db.py); tools
are plain Python over the dicts (bench/lean_retail.py, lean_airline.py, lean_ledger.py,
lean_workplace.py). The sql environment, whose agents run SQL, gets an in-memory sqlite3 database
per session instead (bench/lean_sql.py: its own `Base`, `Db` and `same_state`). Verify replays the
task's gold calls on a fresh session (cached per task), compares the two states and looks for
the task's expected outputs in the final answer, or at what the session submitted with the
framework's answer tools (`submit_answer`: the value, compared as plain text or a set of them;
`decline_request`: the reason code), one submission per session. Same stack as
StateGym (FastAPI + uvicorn, one worker: its state is in process memory), same signed cookie
(`app.cookies.CookieSigner`), same `X-Process-Time` middleware. No persistence, no isolation
beyond Python objects, no crash safety, no concurrency control: the floor StateGym is held to.

Run: python -m bench.lean_server --env retail --template T.sqlite --port 8101
"""

from __future__ import annotations

import argparse
import json
import secrets
from types import ModuleType
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.server.cookies import CookieSigner
from app.server.timing import ProcessTimeMiddleware
from bench import lean_airline, lean_db, lean_ledger, lean_retail, lean_sql, lean_workplace
from bench.lean_db import ToolFailed

COOKIE = "stategym_session"
ENVS: dict[str, ModuleType] = {
    "retail": lean_retail,
    "airline": lean_airline,
    "ledger": lean_ledger,
    "sql": lean_sql,
    "workplace": lean_workplace,
}
# Any (not lean_db.Db): an environment module may bring its own Base, Db and same_state.
Db = Any
# Every StateGym environment has these two tools (app/sdk/answer.py); the lean server keeps what
# a session submitted beside its database.
ANSWER_TOOLS = ("submit_answer", "decline_request")


def storage(env: ModuleType) -> ModuleType:
    """The module whose Base, Db and same_state hold the environment's sessions."""
    return lean_sql if env is lean_sql else lean_db


def run_call(env: ModuleType, db: Db, name: str, args: dict[str, Any], now: str) -> dict[str, Any]:
    if name in ANSWER_TOOLS:  # no state: the session keeps the submission (Sessions.submit)
        return {"output": args}
    if name == "message_user":  # what a first server does without a user simulator: agree
        return {"output": {"reply": "Yes, go ahead."}}
    try:
        return {"output": env.TOOLS[name](db, args, now)}
    except (ToolFailed, KeyError, ValueError, TypeError, AttributeError) as exc:
        return {"error": {"code": "tool_error", "message": str(exc)}}


class Sessions:
    def __init__(self, env: ModuleType, base: Any):
        self.env, self.base, self.store = env, base, storage(env)
        self.live: dict[str, tuple[Db, dict[str, Any], str]] = {}
        self.gold: dict[str, Db] = {}
        self.submitted: dict[str, tuple[str, dict[str, Any]]] = {}

    def seed(self, task: dict[str, Any]) -> str:
        seed = task.get("seed") or {}
        session_id = secrets.token_hex(16)
        db = self.store.Db(self.base, seed.get("rows"))
        self.live[session_id] = (db, task, seed.get("now", ""))
        return session_id

    def close(self, session_id: str) -> bool:
        self.submitted.pop(session_id, None)
        entry = self.live.pop(session_id, None)
        if entry is not None and hasattr(entry[0], "close"):
            entry[0].close()
        return entry is not None

    def reward(self, session_id: str, body: dict[str, Any]) -> float:
        db, task, now = self.live[session_id]
        key = task.get("task_id") or json.dumps([task.get("seed"), task.get("ground_truth")])
        gold = self.gold.get(key)
        if gold is None:
            gold = self.store.Db(self.base, (task.get("seed") or {}).get("rows"))
            for call in task.get("ground_truth") or []:
                run_call(self.env, gold, call["name"], call.get("arguments") or {}, now)
            self.gold[key] = gold
        text = json.dumps((body.get("response") or {}).get("output") or [])
        outputs = all(str(x) in text for x in task.get("expected_outputs") or [])
        answered = _answered(task, self.submitted.get(session_id))
        return float(outputs and answered and self.store.same_state(db, gold, self.env.COMPARED))

    def submit(self, session_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        if session_id in self.submitted:
            return {"error": {"code": "already_submitted", "message": "already submitted"}}
        self.submitted[session_id] = (name, args)
        return {"output": args}


def _answered(task: dict[str, Any], submitted: tuple[str, dict[str, Any]] | None) -> bool:
    """What a first lean verifier checks: the same value (or set of values) as plain text, the
    same reason code; nothing declined on a task that expects neither."""
    expected, code = task.get("expected_answer"), task.get("expected_decline")
    name, args = submitted or ("", {})
    if expected is not None:
        want, got = expected["value"], args.get("answer")

        def norm(v: Any) -> Any:
            return {str(x).casefold() for x in v} if isinstance(v, list) else str(v).casefold()

        return name == "submit_answer" and norm(want) == norm(got)
    if code is not None:
        return name == "decline_request" and args.get("reason") == code
    return name != "decline_request"


def create_app(env_name: str, template_path: str, secret: str) -> FastAPI:
    env = ENVS[env_name]
    sessions = Sessions(env, storage(env).Base(template_path, env.TABLES))
    signer = CookieSigner(secret, 7 * 24 * 3600)
    app = FastAPI(title=f"lean {env_name} baseline")

    def session_id_of(request: Request) -> str | None:
        value = request.cookies.get(COOKIE)
        if not value:
            return None
        try:
            session_id = signer.unsign(value)
        except Exception:
            return None
        return session_id if session_id in sessions.live else None

    def no_session() -> JSONResponse:
        return JSONResponse({"error": {"type": "no_session"}}, status_code=401)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/seed_session")
    async def seed_session(request: Request) -> JSONResponse:
        task = json.loads(await request.body())
        session_id = sessions.seed(task)
        response = JSONResponse({"session_id": session_id, "task_id": task.get("task_id")})
        response.set_cookie(COOKIE, signer.sign(session_id), httponly=True, samesite="lax")
        return response

    @app.post("/verify")
    async def verify(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        session_id = session_id_of(request)
        if session_id is None:
            return no_session()
        return JSONResponse({**body, "reward": sessions.reward(session_id, body)})

    @app.post("/close_session")
    async def close_session(request: Request) -> dict[str, Any]:
        session_id = session_id_of(request)
        closed = session_id is not None and sessions.close(session_id)
        return {"status": "ok", "closed": closed}

    def add_tool(name: str) -> None:
        async def call(request: Request) -> JSONResponse:
            session_id = session_id_of(request)
            if session_id is None:
                return no_session()
            db, _task, now = sessions.live[session_id]
            args = json.loads(await request.body() or b"{}")
            if name in ANSWER_TOOLS:
                return JSONResponse(sessions.submit(session_id, name, args))
            return JSONResponse(run_call(env, db, name, args, now))

        app.add_api_route(f"/{name}", call, methods=["POST"], name=name)

    for name in (*env.TOOLS, *ANSWER_TOOLS, "message_user"):
        add_tool(name)
    app.add_middleware(ProcessTimeMiddleware)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--env", choices=sorted(ENVS), default="retail")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--template", required=True, help="the environment's template database")
    parser.add_argument("--secret", default=secrets.token_urlsafe(48))
    args = parser.parse_args()
    app = create_app(args.env, args.template, args.secret)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
