"""The acceptance sweep (taskgen/acceptances.py), generated as training draws it: each
acceptance's verdict re-derived here from the seed by the policy's words (mail, deal and CRM
facts joined), every verdict occurs, the gold scores 1 and a no-op 0 under the replay verifier,
and a policy that decides from one fact only (the sender, or the date) scores 0 on some draws."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import date, datetime
from typing import Any

import pytest

from app.cli.reverify import _Envs, reverify_row
from app.taskgen.draw import choices, draw
from app.taskgen.registry import load_generator
from envs.workplace.policy import POLICY

# Sweeps over 60 generated draws of a hard family: `make test-slow` (CI runs it).
pytestmark = pytest.mark.slow

GEN = load_generator("workplace")
VERDICTS = {"won_on_time", "won_late", "over_limit", "too_late", "late_not_cfo", "not_contact",
            "other_company", "not_mine", "not_open"}  # fmt: skip


def _draws(n: int, seed: int = 4242) -> list[dict[str, Any]]:
    pool = choices(GEN, "train", ["acceptance_sweep"])
    return [t for i in range(n) if (t := draw(GEN, "train", seed, i, pool).task) is not None]


@pytest.fixture(scope="module")
def tasks() -> list[dict[str, Any]]:
    return _draws(60)


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> _Envs:
    return _Envs(tmp_path_factory.mktemp("acceptances"), "workplace")


def _acceptances(t: dict[str, Any]) -> list[dict[str, Any]]:
    """Each acceptance in the user's inbox with the facts the policy names: the email's sender
    and sent time, the deal's owner, stage, company and close date, the company's contacts."""
    rows = t["seed"]["rows"]
    user = rows["assistant_profile"][0]["employee_id"]
    deals = {d["code"]: d for d in rows["deals"]}
    contacts: dict[int, dict[str, str]] = defaultdict(dict)
    for c in rows["contacts"]:
        contacts[c["company_id"]][c["email"]] = c["title"]
    inbox = {
        i["message_id"]
        for i in rows["mailbox_items"]
        if i["employee_id"] == user and i["folder"] == "inbox"
    }
    found = []
    for m in rows["messages"]:
        if m["id"] in inbox and m["subject"].startswith("Acceptance of "):
            deal = deals[m["subject"].removeprefix("Acceptance of ")]
            found.append(
                {
                    "code": deal["code"],
                    "message_id": m["message_id"],
                    "sender": m["sender"],
                    "sent": datetime.fromisoformat(m["sent_at"]),
                    "late": (
                        datetime.fromisoformat(m["sent_at"]).date()
                        - date.fromisoformat(deal["close_date"])
                    ).days,
                    "mine": deal["owner_id"] == user,
                    "stage": deal["stage"],
                    "company": deal["company_id"],
                    "contacts": contacts[deal["company_id"]],
                    "anyone": {e for cs in contacts.values() for e in cs},
                    "amount": deal["amount"],
                }
            )
    return found


def _verdicts(t: dict[str, Any]) -> dict[str, str]:
    """The policy's "Written acceptances", read literally."""
    out: dict[str, str] = {}
    late: list[dict[str, Any]] = []
    for a in _acceptances(t):
        if not a["mine"]:
            out[a["code"]] = "not_mine"
        elif a["stage"] != "proposal":
            out[a["code"]] = "not_open"
        elif a["sender"] not in a["contacts"]:
            out[a["code"]] = "other_company" if a["sender"] in a["anyone"] else "not_contact"
        elif a["late"] <= 0:
            out[a["code"]] = "won_on_time"
        elif a["late"] > 7:
            out[a["code"]] = "too_late"
        elif a["contacts"][a["sender"]] != "CFO":
            out[a["code"]] = "late_not_cfo"
        else:
            late.append(a)
    taken: Counter[tuple[int, int]] = Counter()
    for a in sorted(late, key=lambda a: a["sent"]):
        taken[(a["company"], a["sent"].month)] += 1
        out[a["code"]] = "won_late" if taken[(a["company"], a["sent"].month)] <= 2 else "over_limit"
    return out


def _won(t: dict[str, Any]) -> set[str]:
    named = {c["arguments"]["code"] for c in t["ground_truth"] if c["name"] == "get_deal"}
    return {
        c["arguments"]["code"]
        for c in t["ground_truth"]
        if c["name"] == "update_deal_stage" and c["arguments"]["code"] not in named
    }


def test_the_policy_states_the_rule_and_its_boundaries() -> None:
    assert "## Written acceptances" in POLICY
    for words in (
        "the 7th day counts, the 8th does not",
        "sent on the close date counts",
        "at most two count per calendar month",
        "skipped without a decline",
    ):
        assert words in POLICY, words


def _labelled(t: dict[str, Any]) -> set[str]:
    return {c["arguments"]["message_id"] for c in t["ground_truth"] if c["name"] == "label_email"}


def test_the_gold_wins_exactly_the_deals_whose_acceptance_counts(
    tasks: list[dict[str, Any]],
) -> None:
    assert len(tasks) == 60
    seen: Counter[str] = Counter()
    shapes: Counter[str] = Counter()
    for t in tasks:
        assert t["responses_create_params"]["input"][0]["content"] == POLICY
        verdicts = _verdicts(t)
        assert 12 <= len(verdicts) <= 20, t["task_id"]
        assert _won(t) == {c for c, v in verdicts.items() if v.startswith("won")}, t["task_id"]
        others = {a["message_id"] for a in _acceptances(t) if a["code"] not in _won(t)}
        assert _labelled(t) == others, t["task_id"]  # every other acceptance: 'follow-up'
        assert 15 <= len(t["ground_truth"]) <= 30, t["task_id"]
        seen.update(verdicts.values())
        wins = sum(v.startswith("won") for v in verdicts.values())
        shapes["all" if wins == len(verdicts) else "none" if not wins else "mixed"] += 1
        assert t["difficulty"] in (4, 5)  # the hard tier
    assert set(seen) == VERDICTS, seen  # every verdict kind occurs
    assert shapes["all"] and shapes["none"] and shapes["mixed"], shapes  # twins across the set
    # The boundaries: sent on the close date late at night, on the 7th day, on the 8th.
    edges = Counter(a["late"] for t in tasks for a in _acceptances(t))
    assert edges[0] and edges[7] and edges[8] and edges[1]


def test_named_deals_a_rule_forbids_are_declined_one_by_one(tasks: list[dict[str, Any]]) -> None:
    declined = [t for t in tasks if t.get("expected_decline")]
    assert {t["expected_decline"] for t in declined} == {
        "deal_closed",
        "cannot_skip_stage",
        "won_needs_amount",
    }
    assert any(len(t.get("expected_decline_records") or []) == 2 for t in declined)
    for t in declined:
        decline = t["ground_truth"][-1]
        assert decline["name"] == "decline_request"
        subject = decline["arguments"]["subject"]
        records = t.get("expected_decline_records") or [subject]
        looked = {c["arguments"]["code"] for c in t["ground_truth"] if c["name"] == "get_deal"}
        assert set(records) <= looked and not set(records) & _won(t)
        # An acceptance that does not count is skipped (labelled), never declined.
        assert not set(records) & {a["code"] for a in _acceptances(t)}


def _response(calls: list[dict[str, Any]]) -> dict[str, Any]:
    output = [
        {
            "type": "function_call",
            "call_id": f"c{i}",
            "name": c["name"],
            "arguments": json.dumps(c["arguments"]),
        }
        for i, c in enumerate(calls)
    ]
    return {"output": output}


def _one_fact(t: dict[str, Any], rule: str) -> list[dict[str, Any]] | None:
    """The gold with its bulk wins replaced by a one-fact policy's: every acceptance of the
    user's open deals from one of the company's contacts ("sender", dates ignored), or every
    one sent by the close date or within 7 days ("date", the sender ignored); None when it
    wins the same deals as the gold."""
    if rule == "sender":
        picked = {
            a["code"]
            for a in _acceptances(t)
            if a["mine"] and a["stage"] == "proposal" and a["sender"] in a["contacts"]
        }
    else:
        picked = {
            a["code"]
            for a in _acceptances(t)
            if a["mine"] and a["stage"] == "proposal" and a["late"] <= 7
        }
    won = _won(t)
    if picked == won:
        return None  # this draw does not tell the policies apart
    calls = [
        c
        for c in t["ground_truth"]
        if not (c["name"] == "update_deal_stage" and c["arguments"]["code"] in won)
        and c["name"] != "label_email"
    ]
    at = next(i for i, c in enumerate(calls) if c["name"] == "search_customers")
    acts = [
        {"name": "update_deal_stage", "arguments": {"code": a["code"], "stage": "won"}}
        if a["code"] in picked
        else {
            "name": "label_email",
            "arguments": {"message_id": a["message_id"], "add": ["follow-up"]},
        }
        for a in _acceptances(t)
    ]
    return calls[: at + 1] + acts + calls[at + 1 :]


def test_gold_scores_one_no_op_zero_and_one_fact_policies_fail(
    tasks: list[dict[str, Any]], envs: _Envs
) -> None:
    def score(t: dict[str, Any], calls: list[dict[str, Any]]) -> float:
        return float(reverify_row(envs, {**t, "response": _response(calls)}, 40)["reward"])

    failed: Counter[str] = Counter()
    for t in tasks[:16]:
        assert score(t, t["ground_truth"]) == 1.0, t["task_id"]
        assert score(t, []) == 0.0, t["task_id"]
        for rule in ("sender", "date"):
            calls = _one_fact(t, rule)
            if calls is not None:
                assert score(t, calls) == 0.0, (t["task_id"], rule)
                failed[rule] += 1
    assert failed["sender"] >= 8 and failed["date"] >= 8, failed
