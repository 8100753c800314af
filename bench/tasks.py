"""The tasks the benchmark drives: retail fixtures, cold variants, a 10,000-row task, a rollout."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from app.sdk.environment import Environment, Tool

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "envs" / "retail" / "tasks.jsonl"
# retail-018: a customer with one delivered order; the gold updates the default address.
ROLLOUT_TASK = "retail-018"
READ_TOOL = "get_order_details"
WRITE_TOOL = "update_customer_default_address"


def load_tasks() -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in FIXTURES.read_text().splitlines() if line.strip()]
    return {row["task_id"]: row for row in rows}


def rollout_task() -> dict[str, Any]:
    return load_tasks()[ROLLOUT_TASK]


def variant(task: dict[str, Any], i: int) -> dict[str, Any]:
    """The same task with its clock moved by i seconds: a new snapshot key, so a cold seed."""
    out = copy.deepcopy(task)
    seed = out.setdefault("seed", {})
    now = datetime.fromisoformat(seed.get("now", "2026-03-14T10:00:00")) + timedelta(seconds=i)
    seed["now"] = now.isoformat()
    out["task_id"] = f"{task['task_id']}-v{i}"
    return out


def large_task(n_customers: int = 5_000) -> dict[str, Any]:
    """A retail task whose seed adds 2 * n_customers rows (customers + their addresses)."""
    task = copy.deepcopy(rollout_task())
    rows = task["seed"]["rows"]
    customers, addresses = rows.setdefault("customers", []), rows.setdefault("addresses", [])
    for i in range(n_customers):
        cid = 600_000 + i
        customers.append(
            {
                "id": cid,
                "email": f"c{i}@bulk.example",
                "first_name": "Bulk",
                "last_name": f"C{i}",
                "phone": "+1-555-0000",
                "membership": "regular",
                "created_at": "2025-01-01T00:00:00",
            }
        )
        addresses.append(
            {
                "id": cid,
                "customer_id": cid,
                "is_default": True,
                "line1": f"{i} Main",
                "line2": None,
                "city": "Springfield",
                "state": "IL",
                "zip": "62701",
                "country": "USA",
            }
        )
    task["task_id"] = "retail-large"
    return task


def seeded_rows(task: dict[str, Any]) -> int:
    return sum(len(v) for v in (task.get("seed") or {}).get("rows", {}).values())


def customer_and_order(task: dict[str, Any]) -> tuple[int, str, str]:
    rows = task["seed"]["rows"]
    return (
        rows["customers"][0]["id"],
        rows["customers"][0]["email"],
        rows["orders"][0]["order_number"],
    )


def read_call(task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return READ_TOOL, {"order_number": customer_and_order(task)[2]}


def write_call(task: dict[str, Any], i: int = 0) -> tuple[str, dict[str, Any]]:
    customer_id = customer_and_order(task)[0]
    return WRITE_TOOL, {
        "customer_id": customer_id,
        "line1": f"{i} Sunset Blvd",
        "line2": None,
        "city": "Los Angeles",
        "state": "CA",
        "zip": "90027",
        "country": "USA",
    }


def rollout_calls(task: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Ten tool calls an agent might make: authenticate, look around, then the gold write."""
    customer_id, email, order = customer_and_order(task)
    gold_write = task["ground_truth"][-1]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("find_customer_by_email", {"email": email}),
        ("get_customer_details", {"customer_id": customer_id}),
    ]
    calls += [(READ_TOOL, {"order_number": order})] * 7
    calls.append((gold_write["name"], gold_write["arguments"]))
    return calls


def verify_body(task: dict[str, Any]) -> dict[str, Any]:
    answer = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Done."}],
    }
    return {**task, "response": {"id": "resp_bench", "output": [answer]}}


def tool(env: Environment, name: str) -> Tool:
    """The environment's tool called `name` (KeyError when it has none)."""
    found = env.tool_named(name)
    if found is None:
        raise KeyError(f"environment {env.name} has no tool {name!r}")
    return found
