"""Generated ledger tasks teach: every draw its own world, requests the data decides (allowed
and forbidden twins worded from one pool), golds that check before they act, a hard tier."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from app.sdk.seed_builder import own_world
from app.taskgen.splits import split_names
from envs.ledger import ENVIRONMENT
from envs.ledger.taskgen import TASKGEN, _internal, build_task, hard, writes
from envs.ledger.taskgen.kit import Ctx, Story

FAMILIES = {fn.__name__: (fn, n) for fn, n in TASKGEN.plan}
TASKS = [json.loads(line) for line in ENVIRONMENT.tasks_path.read_text().splitlines()]
READS = {"find_customer", "get_account", "list_transactions", "get_transaction"}
ANSWERS = {"submit_answer", "decline_request"}
TALK = {"message_user"}  # the conversation with the customer: no change of the bank
# Families whose data decides, and the rules their forbidden twins break.
TWINS = {
    "withdraw": {"kyc_incomplete", "insufficient_funds", "daily_limit", "account_frozen",
                 "not_identified", "other_customer"},
    "transfer_own": {"currency_mismatch", "insufficient_funds", "daily_limit",
                     "account_frozen", "kyc_incomplete", "not_identified"},
    "send_money": {"not_a_beneficiary", "insufficient_funds", "kyc_incomplete",
                   "not_identified"},
    "unfreeze": {"freeze_not_liftable", "not_identified", "other_customer"},
    "release_hold": {"hold_not_expired", "not_identified"},
    "close_loan": {"balance_not_zero", "not_identified", "other_customer"},
    "reverse_transaction": {"already_reversed", "reversal_window", "reversal_not_allowed",
                            "not_identified"},
    "talk_transfer": {"insufficient_funds", "account_frozen", "kyc_incomplete"},
    "talk_fee": {"already_reversed", "reversal_window"},
    "talk_change_mind": {"insufficient_funds", "account_frozen"},
}  # fmt: skip


def draw(family: str, k: int, i: int) -> dict[str, Any]:
    """Draw i of a family's variant k, in its own world (as `tasks generate` draws it)."""
    fn, _ = FAMILIES[family]
    rng = random.Random(f"test/{family}/{k}/{i}")
    names = split_names(TASKGEN.names, "train")
    rng.shuffle(names)
    with own_world(random.Random(f"test/{family}/{k}/{i}/world")):
        return build_task(1, fn, k, rng, names)


def values(x: Any) -> list[Any]:
    if isinstance(x, dict):
        return [v for item in x.values() for v in values(item)]
    if isinstance(x, list):
        return [v for item in x for v in values(item)]
    return [x]


IDENTIFIER = re.compile(r"^(TX|RV|HD)?\d{6,}$|@")


@pytest.mark.slow
def test_every_draw_is_its_own_world() -> None:
    """Ids, account numbers, references, hold codes and emails in the golds of 36 draws of 12
    families: none appears in two tasks (a replayed training gold acts on no one)."""
    seen: Counter[str] = Counter()
    families = ["deposit", "withdraw", "transfer_own", "send_money", "lookup_fees",
                "lookup_transfer", "reverse_fee", "release_hold", "repay_loan", "month_end",
                "fee_cleanup", "move_out"]  # fmt: skip
    for family in families:
        for i in range(3):
            task = draw(family, 0, i)
            found = {
                str(v)
                for call in task["ground_truth"]
                for v in values(call["arguments"])
                if isinstance(v, int | str)
                and not isinstance(v, bool)
                and IDENTIFIER.search(str(v))
            }
            seen.update(found)  # (none when the customer is not identified: no call made)
    shared = {v: n for v, n in seen.items() if n > 1}
    assert len(seen) > 100 and not shared, shared


@pytest.mark.parametrize("family", sorted(TWINS))
def test_the_data_decides_with_one_wording_pool(family: str) -> None:
    """Draws of one family are allowed (the gold acts) and refused (the gold declines with one of
    the family's rules, several of them) from the same sentences: with ids, amounts and the
    greeting masked, allowed and refused requests share their wording."""
    outcomes: dict[str, set[str]] = {"ok": set(), "refused": set()}
    codes = set()
    mask = re.compile(r"\b[\w.]*\d[\w.@-]*|'[^']*'|Hi, this is [^.]*\.")
    for i in range(60):
        task = draw(family, 0, i)
        text = mask.sub("#", task["responses_create_params"]["input"][-1]["content"])
        if "expected_decline" in task:
            codes.add(task["expected_decline"])
            outcomes["refused"].add(text)
        else:
            assert any(c["name"] not in READS | ANSWERS | TALK for c in task["ground_truth"])
            outcomes["ok"].add(text)
        if len(codes) >= 2 and outcomes["ok"] & outcomes["refused"]:
            break
    assert codes <= TWINS[family] and len(codes) >= 2, codes
    assert outcomes["ok"] & outcomes["refused"], outcomes


@pytest.mark.parametrize("family", sorted(TWINS))
def test_forbidden_twins_name_the_call_the_tools_refuse(family: str) -> None:
    """A refused draft carries the request's own call with the rule's code: the self-check
    (build_row) replays it on the gold's final state and the tool must refuse it with exactly
    that code (one error code per rule), so the data, not the wording, decides. A customer not
    identified is declined with no call at all (find_customer finds no one)."""
    fn, _ = FAMILIES[family]
    seen = set()
    for i in range(40):
        rng = random.Random(f"drafts/{family}/{i}")
        names = split_names(TASKGEN.names, "train")
        rng.shuffle(names)
        with own_world(random.Random(i)):
            story = Story(1, rng, _internal())
            draft = fn(Ctx(story, 0, names))
        if draft.decline is None:
            continue
        seen.add(draft.decline)
        if draft.decline == "not_identified":
            assert draft.gold == [] and draft.forbidden is None
            email = story.rows["customers"][0]["email"]
            assert email in draft.prompt
            born = story.rows["customers"][0]["date_of_birth"]
            assert born not in draft.prompt  # the record's date of birth is not the one given
        else:
            assert draft.forbidden is not None and draft.forbidden[1] == draft.decline
    assert len(seen) >= 2, seen


def test_write_golds_check_the_facts_before_acting() -> None:
    """Every gold that changes something reads the account or transaction concerned (beyond
    identifying the customer) before its first change, as the policy asks."""
    for task in TASKS:
        gold = task["ground_truth"]
        first = next(
            (i for i, c in enumerate(gold) if c["name"] not in READS | ANSWERS | TALK), None
        )
        if first is None:
            continue
        assert {c["name"] for c in gold[1:first]} & READS, task["task_id"]


def test_hard_tier_composes_many_intents() -> None:
    """fee_cleanup, move_out, budget_day: golds of 10 to 30 calls, several writes, and both
    endings (everything done; one part declined by the data) across draws."""
    lengths, endings = [], set()
    for family in ("fee_cleanup", "move_out", "budget_day"):
        for i in range(8):
            task = draw(family, 0, i)
            gold = task["ground_truth"]
            lengths.append(len(gold))
            assert sum(c["name"] not in READS | ANSWERS for c in gold) >= 4
            endings.add((family, "expected_decline" in task))
    assert min(lengths) >= 10 and max(lengths) <= 30, lengths
    assert len(endings) == 6, endings


def test_half_cents_rounds_down() -> None:
    assert hard.half_cents(100.01) == 50.0 and hard.half_cents(0.03) == 0.01


def test_refusal_rules_are_the_policys() -> None:
    from envs.ledger.policy import DECLINE_REASONS

    assert set().union(*TWINS.values()) <= set(DECLINE_REASONS)
    assert writes.OK not in DECLINE_REASONS


def test_fee_cleanup_pairs_are_exactly_the_same_day_doubles() -> None:
    """Fair by the data alone: the fees charged twice on one calendar day with one amount are
    exactly the pairs the gold reverses (the later of each, posted at most 30 x 24 hours ago)
    plus the pairs whose later charge is older, which it declines; no single fee shares a day
    and amount with another."""
    from datetime import datetime

    from envs.ledger.data import AS_OF

    for i in range(6):
        task = draw("fee_cleanup", 0, i)
        rows = task["seed"]["rows"]
        fees = [t for t in rows["transactions"] if t["kind"] == "fee"]
        amount = {e["transaction_id"]: abs(e["amount"]) for e in rows["entries"]}
        groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
        for t in fees:
            day = datetime.fromisoformat(t["created_at"]).date().isoformat()
            groups.setdefault((day, amount[t["id"]]), []).append(t)
        assert all(len(g) <= 2 for g in groups.values())
        later = {
            t["reference"]: t["created_at"]
            for t in (max(g, key=lambda t: t["created_at"]) for g in groups.values() if len(g) == 2)
        }
        window = (AS_OF - timedelta(days=30)).isoformat()
        inside = {ref for ref, at in later.items() if at >= window}
        reversed_ = {
            c["arguments"]["reference"]
            for c in task["ground_truth"]
            if c["name"] == "reverse_transaction"
        }
        assert reversed_ == inside
        assert ("expected_decline" in task) == (len(later) > len(inside))


def test_fee_cleanup_declines_name_every_stale_double() -> None:
    """A refusal names the refused reversals themselves (each stale later charge), not the
    customer; across draws some doubles sit past a default page (20) of the fee history."""
    from envs.ledger.data import AS_OF

    window = (AS_OF - timedelta(days=30)).isoformat()
    past_page = 0
    for i in range(8):
        task = draw("fee_cleanup", 0, i)
        rows = task["seed"]["rows"]
        fees = sorted(
            (t for t in rows["transactions"] if t["kind"] == "fee"),
            key=lambda t: t["created_at"],
            reverse=True,
        )
        reversed_ = {
            c["arguments"]["reference"]
            for c in task["ground_truth"]
            if c["name"] == "reverse_transaction"
        }
        past_page += any(t["reference"] in reversed_ for t in fees[20:])
        if "expected_decline" not in task:
            continue
        named = set(task.get("expected_decline_records") or task["expected_decline_subject"])
        stale = {t["reference"] for t in fees if t["created_at"] < window}
        assert named and named <= stale, (named, stale)
    assert past_page, "no double past the first page"


def test_policy_states_the_clock_and_its_boundaries() -> None:
    """Minutes decide hold expiry and the 30-day window, the calendar day the daily limit: the
    policy states the time of day and how each boundary counts, matching the seeds' clock."""
    from envs.ledger.policy import POLICY

    task = draw("move_out", 0, 0)
    assert task["seed"]["now"] == "2026-04-15T09:30:00"
    assert "2026-04-15 09:30 UTC" in POLICY
    assert "now or earlier" in POLICY and "30 × 24 hours" in POLICY
    assert "calendar day" in POLICY


def test_move_out_asks_for_every_release_the_gold_makes() -> None:
    """One reading: the request itself asks to release an expired savings hold and says what
    to do while it runs, so the gold's release (or its absence) follows the words."""
    releases = set()
    for i in range(10):
        task = draw("move_out", 0, i)
        prompt = task["responses_create_params"]["input"][-1]["content"]
        assert "already expired, release it" in prompt
        assert "still running, move what is available anyway and leave savings open" in prompt
        released = any(c["name"] == "release_hold" for c in task["ground_truth"])
        assert released != ("expected_decline" in task)
        releases.add(released)
    assert releases == {True, False}


def test_budget_day_limit_counts_only_today() -> None:
    """The cash withdrawal fits the checking daily limit exactly when today's transfers and
    withdrawals out of checking, the bills and the cash stay within it; yesterday's late
    withdrawal never counts, and counting it would refuse a cash withdrawal the gold makes."""
    from datetime import datetime

    from envs.ledger.data import AS_OF, DAILY_LIMIT

    seen = set()
    for i in range(12):
        task = draw("budget_day", 0, i)
        rows = task["seed"]["rows"]
        gold = task["ground_truth"]
        chk = gold[1]["arguments"]["account_number"]
        chk_id = next(a["id"] for a in rows["accounts"] if a.get("number") == chk)
        at = {t["id"]: datetime.fromisoformat(t["created_at"]) for t in rows["transactions"]}
        kind = {t["id"]: t["kind"] for t in rows["transactions"]}
        out = [
            (at[e["transaction_id"]], -e["amount"])
            for e in rows["entries"]
            if e["account_id"] == chk_id
            and e["amount"] < 0
            and kind[e["transaction_id"]] in ("transfer", "withdrawal")
        ]
        today = sum(a for t, a in out if t.date() == AS_OF.date())
        yesterday = sum(a for t, a in out if (AS_OF - t).days < 1 and t.date() != AS_OF.date())
        bills = sum(
            c["arguments"]["amount"]
            for c in gold
            if c["name"] == "transfer" and c["arguments"]["from_account"] == chk
        )
        prompt = task["responses_create_params"]["input"][-1]["content"]
        cash = float(prompt.split("withdraw ")[1].split(" in cash")[0])
        fits = round(today + bills + cash, 2) <= DAILY_LIMIT["checking"]
        withdrew = any(c["name"] == "withdraw" for c in gold)
        if task.get("expected_decline") != "account_frozen":
            assert withdrew == fits
            assert yesterday > 0 and round(today + yesterday + bills + cash, 2) > 5000
        seen.add((task.get("expected_decline"), withdrew))
    assert {(None, True), ("daily_limit", False)} <= seen, seen
