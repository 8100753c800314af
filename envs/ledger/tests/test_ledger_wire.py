"""The hard family `wire_fees`: every wire fee's verdict follows from the policy's words, read
back from the seed by an oracle written here (not the generator's code); every verdict kind
occurs; gold 1, no-op 0; and policies that decide from fewer facts score 0 on some draws."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.cli.reverify import _Envs, reverify_row
from app.sdk.seed_builder import own_world
from app.taskgen.splits import split_names
from envs.ledger.data import AS_OF
from envs.ledger.policy import POLICY
from envs.ledger.taskgen import TASKGEN, build_task, wire

# Sweeps over 60 generated draws of a hard family: `make test-slow` (CI runs it).
pytestmark = pytest.mark.slow

START = AS_OF - timedelta(days=30)
DRAWS = 60


def draw(i: int) -> dict[str, Any]:
    """Draw i of the family, in its own world (as `tasks generate` draws it)."""
    rng = random.Random(f"wire/{i}")
    names = split_names(TASKGEN.names, "train")
    rng.shuffle(names)
    with own_world(random.Random(f"wire/{i}/world")):
        return build_task(1, wire.wire_fees, 0, rng, names)


@pytest.fixture(scope="module")
def tasks() -> list[dict[str, Any]]:
    return [draw(i) for i in range(DRAWS)]


def facts(task: dict[str, Any]) -> tuple[list[tuple[datetime, float, bool]], list[dict[str, Any]]]:
    """The checking account's transfers out (time, amount, to another customer) and its wire
    fees (reference, time, status), from the seed rows alone."""
    rows = task["seed"]["rows"]
    number = task["ground_truth"][1]["arguments"]["account_number"]
    accounts = [a for a in rows["accounts"] if "number" in a]
    chk = next(a for a in accounts if a["number"] == number)
    own = {a["id"] for a in accounts if a["customer_id"] == chk["customer_id"]}
    entries: dict[int, list[dict[str, Any]]] = {}
    for e in rows["entries"]:
        entries.setdefault(e["transaction_id"], []).append(e)
    outs, fees = [], []
    for t in rows["transactions"]:
        mine = [e for e in entries[t["id"]] if e["account_id"] == chk["id"]]
        if not mine:
            continue
        when = datetime.fromisoformat(t["created_at"])
        if t["kind"] == "transfer" and mine[0]["amount"] < 0:
            to = next(e["account_id"] for e in entries[t["id"]] if e["account_id"] != chk["id"])
            outs.append((when, -mine[0]["amount"], to not in own))
        if t["kind"] == "fee" and t["memo"] == "Fee: wire transfer":
            fees.append({"ref": t["reference"], "when": when, "status": t["status"]})
    return sorted(outs), sorted(fees, key=lambda f: f["when"])


def verdicts(
    task: dict[str, Any], *, allowance: bool = True, counterparty: bool = True
) -> dict[str, str]:
    """Each wire fee's verdict by the policy's words: due or error (in the 30-day window),
    old_due or stale (in error) when older, reversed. `allowance` / `counterparty` False: a
    policy that ignores the free small transfers / where a transfer went (all transfers out
    count)."""
    outs, fees = facts(task)
    owed: Counter[Any] = Counter()
    small: Counter[Any] = Counter()
    for when, amount, other in outs:
        if not other and counterparty:
            continue
        if amount <= 200.0 and allowance:
            small[(when.year, when.month)] += 1
            if small[(when.year, when.month)] <= 2:
                continue
        owed[when.date()] += 1
    seen: Counter[Any] = Counter()
    found = {}
    for f in fees:
        if f["status"] == "reversed":
            found[f["ref"]] = "reversed"
            continue
        seen[f["when"].date()] += 1
        due = seen[f["when"].date()] <= owed[f["when"].date()]
        inside = f["when"] >= START
        found[f["ref"]] = (
            ("due" if inside else "old_due") if due else "error" if inside else "stale"
        )
    return found


def named(task: dict[str, Any]) -> set[str]:
    prompt = task["responses_create_params"]["input"][-1]["content"]
    return set(re.findall(r"TX\d+", prompt))


def expected_calls(task: dict[str, Any], found: dict[str, str]) -> list[dict[str, Any]]:
    """The gold's reads, then a reversal of each fee judged in error, then the decline of the
    named stale ones (if any): the trajectory a policy judging by `found` plays."""
    gold = task["ground_truth"]
    reads = [
        c for c in gold if c["name"] != "reverse_transaction" and c["name"] != "decline_request"
    ]
    customer = gold[1]["arguments"]["customer_id"]
    acts = [
        {
            "name": "reverse_transaction",
            "arguments": {"customer_id": customer, "reference": ref, "reason": "posted_in_error"},
        }
        for ref, verdict in found.items()
        if verdict == "error"
    ]
    stale = sorted(
        ref for ref, verdict in found.items() if verdict == "stale" and ref in named(task)
    )
    if stale:
        reason = {"reason": "reversal_window", "message": "Too old.", "subject": stale}
        acts.append({"name": "decline_request", "arguments": reason})
    return [*reads, *acts]


def test_policy_states_the_wire_fee_rule_and_its_limits() -> None:
    for words in (
        "200.00 or less (exactly 200.00 included)",
        "first two such transfers",
        "own calendar day (UTC)",
        "even minutes after midnight",
        "reversed ones do not count",
        "the earliest, as many as the day owes",
        "a named fee that was due is skipped, not declined",
    ):
        assert words in POLICY, words


def test_gold_refunds_exactly_the_fees_the_policy_finds_in_error(tasks: list[dict]) -> None:
    """The oracle's verdicts, from the seed and the policy's words: the gold reverses every fee
    in error in the window, and declines exactly the named stale ones, each named."""
    for task in tasks:
        found = verdicts(task)
        gold = task["ground_truth"]
        reversed_ = {
            c["arguments"]["reference"] for c in gold if c["name"] == "reverse_transaction"
        }
        assert reversed_ == {r for r, v in found.items() if v == "error"}, task["seed"]["now"]
        stale = {r for r, v in found.items() if v == "stale"} & named(task)
        declined = (
            task.get("expected_decline_records") or task.get("expected_decline_subject", [])[:1]
        )
        assert set(declined) == stale
        assert 15 <= len(gold) <= 30


def test_every_verdict_kind_occurs_and_the_outcome_is_not_in_the_wording(tasks: list[dict]) -> None:
    kinds: Counter[str] = Counter()
    shapes = set()
    for task in tasks:
        found = verdicts(task)
        window = [v for r, v in found.items() if v in ("due", "error")]
        kinds.update(found.values())
        kinds.update(f"named_{v}" for r, v in found.items() if r in named(task))
        shapes.add("all" if "due" not in window else "none" if "error" not in window else "mixed")
    assert {
        "due",
        "error",
        "old_due",
        "stale",
        "reversed",
        "named_due",
        "named_error",
        "named_old_due",
        "named_stale",
    } <= set(kinds), kinds
    assert shapes == {"all", "none", "mixed"}, shapes
    prompts = [t["responses_create_params"]["input"][-1]["content"] for t in tasks]
    wordings = {re.sub(r"TX\d+|\d{6,}", "", p.split(")", 1)[1]) for p in prompts}
    assert len(wordings) <= 8  # one wording pool; only the count of named fees changes it


def test_boundaries_are_drawn_at_the_edge(tasks: list[dict]) -> None:
    """Amounts on the 200.00 line, fees minutes either side of the window, fees minutes after
    a late transfer's midnight, small transfers counted before the window."""
    edges: Counter[str] = Counter()
    for task in tasks:
        outs, fees = facts(task)
        edges["200.00"] += any(a == 200.0 for _, a, other in outs if other)
        edges["200.01"] += any(a == 200.01 for _, a, other in outs if other)
        near = [abs((f["when"] - START).total_seconds()) for f in fees]
        edges["window"] += any(s <= 30 * 60 for s in near)
        edges["midnight"] += any(f["when"].hour == 0 for f in fees)
        edges["before"] += any(w < START and a <= 200 and o for w, a, o in outs)
    assert all(edges[k] >= 3 for k in ("200.00", "200.01", "window", "midnight", "before")), edges


@pytest.mark.parametrize("i", [0, 1, 2])
def test_gold_scores_one_and_a_no_op_zero(tmp_path: Path, tasks: list[dict], i: int) -> None:
    envs = _Envs(tmp_path, "ledger")
    task = tasks[i]
    assert _score(envs, task, task["ground_truth"]) == 1.0
    assert _score(envs, task, []) == 0.0


def test_policies_deciding_from_fewer_facts_score_zero_on_some_draws(
    tmp_path: Path, tasks: list[dict]
) -> None:
    """Ignoring the free allowance (the month's count) or where a transfer went (the
    counterparty) changes the verdicts on some draws, and the verifier gives those 0; the
    policy's own verdicts, played the same way, score 1."""
    envs = _Envs(tmp_path, "ledger")
    zero: Counter[str] = Counter()
    for task in tasks[:16]:
        assert _score(envs, task, expected_calls(task, verdicts(task))) == 1.0
        for name, found in (
            ("allowance", verdicts(task, allowance=False)),
            ("counterparty", verdicts(task, counterparty=False)),
        ):
            if found != verdicts(task):
                zero[name] += _score(envs, task, expected_calls(task, found)) == 0.0
    assert zero["allowance"] >= 2 and zero["counterparty"] >= 2, zero


def _score(envs: _Envs, task: dict[str, Any], calls: list[dict[str, Any]]) -> float:
    output = [
        {
            "type": "function_call",
            "call_id": f"c{i}",
            "name": c["name"],
            "arguments": json.dumps(c["arguments"]),
        }
        for i, c in enumerate(calls)
    ]
    row = {**task, "task_id": "ledger-wire", "response": {"output": output}}
    return float(reverify_row(envs, row, 5)["reward"])
