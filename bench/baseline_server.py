"""The baseline: a minimal NeMo Gym-style resources server keeping each session in Python dicts.

Same FastAPI/uvicorn stack, same signed cookie, same retail tools the benchmark's rollout uses
(find_customer_by_email, get_customer_details, get_order_details,
update_customer_default_address) plus seed_session / verify / close_session. The retail base
data is read once from the StateGym template; every seed deep-copies it and applies the task's
seed rows. Verify replays the ground truth on a copy (cached per task) and compares the dicts.

Run: python -m bench.baseline_server --port 8100 --data-dir DIR
"""

from __future__ import annotations

import argparse
import copy
import json
import secrets
import sqlite3
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.registry import load_environment
from app.server.cookies import CookieSigner
from app.server.timing import ProcessTimeMiddleware

Tables = dict[str, dict[int, dict[str, Any]]]
COOKIE = "stategym_session"
COMPARED = ("customers", "addresses", "payment_methods", "orders", "order_items", "payments")


def load_base(template_path: str) -> Tables:
    conn = sqlite3.connect(f"file:{template_path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    base: Tables = {}
    for name in load_environment("retail").metadata.tables:  # the model's tables, nothing else
        base[name] = {row["id"]: dict(row) for row in conn.execute(f'SELECT * FROM "{name}"')}
    conn.close()
    return base


class ToolFailed(Exception):
    pass


def _cents(value: float) -> float:
    return round(value, 2) + 0.0


def find_customer_by_email(db: Tables, args: dict[str, Any], now: str) -> dict[str, Any]:
    email = str(args["email"]).lower()
    for c in db["customers"].values():  # a linear scan, as dict-backed environments do
        if c["email"].lower() == email:
            return {
                "customer_id": c["id"],
                "first_name": c["first_name"],
                "last_name": c["last_name"],
            }
    raise ToolFailed(f"No customer account has the email {args['email']!r}.")


def _customer(db: Tables, customer_id: Any) -> dict[str, Any]:
    customer = db["customers"].get(int(customer_id))
    if customer is None:
        raise ToolFailed(f"No customer has id {customer_id}.")
    return customer


def get_customer_details(db: Tables, args: dict[str, Any], now: str) -> dict[str, Any]:
    c = _customer(db, args["customer_id"])
    addresses = [a for a in db["addresses"].values() if a["customer_id"] == c["id"]]
    methods = [m for m in db["payment_methods"].values() if m["customer_id"] == c["id"]]
    return {
        **{k: c[k] for k in ("first_name", "last_name", "email", "phone", "membership")},
        "customer_id": c["id"],
        "addresses": [
            {
                "default": bool(a["is_default"]),
                **{k: a[k] for k in ("line1", "line2", "city", "state", "zip", "country")},
            }
            for a in addresses
        ],
        "payment_methods": [
            {
                "payment_method_id": m["code"],
                "kind": m["kind"],
                **({"brand": m["brand"], "last4": m["last4"]} if m["kind"] == "card" else {}),
                **({"balance": _cents(m["balance"])} if m["balance"] is not None else {}),
            }
            for m in methods
        ],
    }


def get_order_details(db: Tables, args: dict[str, Any], now: str) -> dict[str, Any]:
    number = "#" + str(args["order_number"]).strip().upper().lstrip("#")
    order = next((o for o in db["orders"].values() if o["order_number"] == number), None)
    if order is None:
        raise ToolFailed(f"No order has number {number}.")
    items = [i for i in db["order_items"].values() if i["order_id"] == order["id"]]
    payments = [p for p in db["payments"].values() if p["order_id"] == order["id"]]
    view_items = []
    for i in sorted(items, key=lambda i: i["line_no"]):
        variant = db["variants"][i["variant_id"]]
        view_items.append(
            {
                "sku": variant["sku"],
                "product_id": variant["product_id"],
                "product_name": db["products"][variant["product_id"]]["name"],
                "options": variant["options"],
                "quantity": i["quantity"],
                "unit_price": _cents(i["unit_price"]),
                "status": i["status"],
            }
        )
    return {
        "order_number": order["order_number"],
        "customer_id": order["customer_id"],
        "status": order["status"],
        "created_at": order["created_at"],
        "total": _cents(order["total"]),
        "shipping_address": {
            k: order[f"ship_{k}"] for k in ("line1", "line2", "city", "state", "zip", "country")
        },
        "items": view_items,
        "payments": [
            {
                "type": p["kind"],
                "payment_method_id": db["payment_methods"][p["payment_method_id"]]["code"],
                "amount": _cents(p["amount"]),
            }
            for p in payments
        ],
    }


def update_customer_default_address(db: Tables, args: dict[str, Any], now: str) -> dict[str, Any]:
    c = _customer(db, args["customer_id"])
    fields = {k: args.get(k) for k in ("line1", "line2", "city", "state", "zip", "country")}
    address = next(
        (a for a in db["addresses"].values() if a["customer_id"] == c["id"] and a["is_default"]),
        None,
    )
    if address is None:
        new_id = max(db["addresses"], default=0) + 1
        address = db["addresses"][new_id] = {"id": new_id, "customer_id": c["id"], "is_default": 1}
    address.update(fields)
    log = db["audit_log"]
    new_id = max(log, default=0) + 1
    log[new_id] = {
        "id": new_id,
        "ts": now,
        "actor": "agent",
        "action": "update_default_address",
        "entity": "customers",
        "entity_id": c["email"],
        "detail": json.dumps({"zip": args.get("zip")}),
    }
    return {"customer_id": c["id"], "default_address": fields}


TOOLS = {
    f.__name__: f
    for f in (
        find_customer_by_email,
        get_customer_details,
        get_order_details,
        update_customer_default_address,
    )
}


def seeded(base: Tables, seed: dict[str, Any] | None) -> Tables:
    db = copy.deepcopy(base)
    for table, rows in ((seed or {}).get("rows") or {}).items():
        for row in rows:
            db[table].setdefault(row["id"], {}).update(row)
    return db


def run_call(db: Tables, name: str, args: dict[str, Any], now: str) -> dict[str, Any]:
    try:
        return {"output": TOOLS[name](db, args, now)}
    except (ToolFailed, KeyError, ValueError, TypeError) as exc:
        return {"error": {"code": "tool_error", "message": str(exc)}}


def create_app(template_path: str, secret: str) -> FastAPI:
    base = load_base(template_path)
    signer = CookieSigner(secret, 7 * 24 * 3600)
    sessions: dict[str, dict[str, Any]] = {}
    gold: dict[str, Tables] = {}
    app = FastAPI(title="dict baseline")

    def session_of(request: Request) -> dict[str, Any] | None:
        value = request.cookies.get(COOKIE)
        if not value:
            return None
        try:
            return sessions.get(signer.unsign(value))
        except Exception:
            return None

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/seed_session")
    async def seed_session(request: Request) -> JSONResponse:
        task = json.loads(await request.body())
        session_id = secrets.token_hex(16)
        seed = task.get("seed") or {}
        sessions[session_id] = {
            "db": seeded(base, seed),
            "task": task,
            "now": seed.get("now", "2026-03-14T10:00:00"),
        }
        response = JSONResponse({"session_id": session_id, "task_id": task.get("task_id")})
        response.set_cookie(COOKIE, signer.sign(session_id), httponly=True, samesite="lax")
        return response

    @app.post("/verify")
    async def verify(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        session = session_of(request)
        if session is None:
            return JSONResponse({"error": {"type": "no_session"}}, status_code=401)
        task = session["task"]
        key = json.dumps([task.get("seed"), task.get("ground_truth")], sort_keys=True)
        if key not in gold:
            reference = seeded(base, task.get("seed"))
            for call in task.get("ground_truth") or []:
                run_call(reference, call["name"], call.get("arguments") or {}, session["now"])
            gold[key] = reference
        same = all(session["db"][t] == gold[key][t] for t in COMPARED)
        return JSONResponse({**body, "reward": float(same)})

    @app.post("/close_session")
    async def close_session(request: Request) -> dict[str, Any]:
        value = request.cookies.get(COOKIE)
        closed = False
        if value:
            try:
                closed = sessions.pop(signer.unsign(value), None) is not None
            except Exception:
                closed = False
        return {"status": "ok", "closed": closed}

    def add_tool(name: str) -> None:
        async def call(request: Request) -> JSONResponse:
            session = session_of(request)
            if session is None:
                return JSONResponse({"error": {"type": "no_session"}}, status_code=401)
            args = json.loads(await request.body() or b"{}")
            return JSONResponse(run_call(session["db"], name, args, session["now"]))

        app.add_api_route(f"/{name}", call, methods=["POST"], name=name)

    for name in TOOLS:
        add_tool(name)
    app.add_middleware(ProcessTimeMiddleware)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--template", required=True, help="the retail template database file")
    parser.add_argument("--secret", default=secrets.token_urlsafe(48))
    args = parser.parse_args()
    app = create_app(args.template, args.secret)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
