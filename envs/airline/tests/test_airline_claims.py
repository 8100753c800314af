"""`compensation_sweep`: every reservation's verdict follows from the policy's words read off the
seed (tier, fare, insurance, the disrupted flight's scheduled departure, earlier certificates,
the three-certificate limit); every verdict occurs; the gold earns 1 and a no-op 0; a policy
that decides from one fact fewer earns 0 on some draws."""

from __future__ import annotations

from collections import Counter
from functools import cache
from typing import Any

import pytest

from app.cli.audit import ReplayScore
from app.taskgen.conversation import run_seed
from app.taskgen.gold_run import gold_outcomes
from envs.airline import ENVIRONMENT
from envs.airline.rules import COMPENSATION
from envs.airline.taskgen import _network
from envs.airline.taskgen.kit import NOW, money
from envs.airline.tests.test_airline_worlds import draw

# Sweeps over 60 generated draws of a hard family: `make test-slow` (CI runs it).
pytestmark = pytest.mark.slow

FAMILY = "compensation_sweep"
DRAWS = 60
VERDICTS = {"issue", "over_cap", "late", "not_eligible", "already", "not_disrupted", "declined"}


@cache
def tasks() -> list[dict[str, Any]]:
    return [draw(FAMILY, n, n % 2) for n in range(DRAWS)]


@pytest.fixture(scope="module")
def score(tmp_path_factory: pytest.TempPathFactory) -> ReplayScore:
    return ReplayScore(ENVIRONMENT, tmp_path_factory.mktemp("claims"), capacity=64)


def reservations(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The member's reservations, each with the facts the policy reads (as the tools show them):
    tier, fare, insurance, passengers, the disrupted flight (status, delay, scheduled
    departure) and whether a certificate was issued for it before."""
    rows = task["seed"]["rows"]
    code = next(c for c in task["ground_truth"] if c["name"] == "get_user_details")
    user = next(u for u in rows["users"] if u["user_code"] == code["arguments"]["user_id"])
    net = _network()
    status = {f.id: (f.status, f.delay) for f in net.by_id.values()}
    for f in rows.get("flights", []):
        if "status" in f:
            status[f["id"]] = (f["status"], f["delay_minutes"])
    certified = {c["reservation_id"] for c in rows.get("certificates", [])}
    out = []
    for r in rows["reservations"]:
        if r["user_id"] != user["id"]:
            continue
        legs = [
            s["flight_id"] for s in rows["reservation_segments"] if s["reservation_id"] == r["id"]
        ]
        hit = [fid for fid in legs if status[fid][0] in ("cancelled", "delayed")]
        out.append(
            {
                "code": r["code"],
                "tier": user["membership"],
                "fare": r["fare_class"],
                "insurance": r["insurance"],
                "passengers": sum(p["reservation_id"] == r["id"] for p in rows["passengers"]),
                "hit": status[hit[0]] if hit else None,
                "departure": net.by_id[hit[0]].departure if hit else None,
                "certified": r["id"] in certified,
            }
        )
    return out


def issued_by(task: dict[str, Any], window: dict[str, float], cap: int | None) -> list[str]:
    """The codes a policy issues certificates for: the policy's rule, exception and limit with
    `window` (hours by tier; inf: no window) and `cap` (None: no limit)."""
    ok = []
    for r in reservations(task):
        if r["hit"] is None or r["certified"]:
            continue
        if not (r["tier"] != "regular" or r["fare"] == "business" or r["insurance"]):
            continue
        if (NOW - r["departure"]).total_seconds() > window[r["tier"]] * 3600:
            continue
        ok.append(r)
    ok.sort(key=lambda r: r["departure"])
    return [r["code"] for r in ok[:cap]]


POLICY = {"regular": 48.0, "silver": 48.0, "gold": 72.0}


def verdicts(task: dict[str, Any]) -> dict[str, str]:
    """Each of the member's reservations -> its verdict under the policy's words."""
    issued = set(issued_by(task, POLICY, 3))
    in_time = set(issued_by(task, POLICY, None))
    declined = set(declined_records(task))
    out = {}
    for r in reservations(task):
        late = (NOW - r["departure"]).total_seconds() > POLICY[r["tier"]] * 3600 if r["hit"] else 0
        eligible = r["tier"] != "regular" or r["fare"] == "business" or r["insurance"]
        out[r["code"]] = (
            "declined"
            if r["code"] in declined
            else "issue"
            if r["code"] in issued
            else "over_cap"
            if r["code"] in in_time
            else "not_disrupted"
            if r["hit"] is None
            else "not_eligible"
            if not eligible
            else "late"
            if late
            else "already"
        )
    return out


def declined_records(task: dict[str, Any]) -> list[str]:
    last = task["ground_truth"][-1]
    if last["name"] != "decline_request":
        return []
    subject = last["arguments"]["subject"]
    return subject if isinstance(subject, list) else [subject]


def gold_issued(task: dict[str, Any]) -> list[str]:
    return [
        c["arguments"]["reservation_code"]
        for c in task["ground_truth"]
        if c["name"] == "issue_compensation_certificate"
    ]


def test_the_gold_issues_what_the_policy_says_and_every_verdict_occurs() -> None:
    seen: Counter[str] = Counter()
    tiers: Counter[str] = Counter()
    for task in tasks():
        v = verdicts(task)
        assert 13 <= len(v) <= 20 and 15 <= len(task["ground_truth"]) <= 30
        assert gold_issued(task) == issued_by(task, POLICY, 3), task["task_id"]
        for code in declined_records(task):  # named, and refused by the tools' own rules
            assert code in task["responses_create_params"]["input"][-1]["content"]
            assert next(r for r in reservations(task) if r["code"] == code)["hit"] is None or (
                task["expected_decline"] == "not_eligible_compensation"
            )
        seen.update(v.values())
        tiers[reservations(task)[0]["tier"]] += 1
    assert set(seen) == VERDICTS, seen
    assert set(tiers) == {"regular", "silver", "gold"}


def test_twins_every_disrupted_reservation_qualifies_or_none_does() -> None:
    every = none = 0
    for task in tasks():
        hit = [k for k, v in verdicts(task).items() if v not in ("not_disrupted", "declined")]
        issued = [k for k in hit if verdicts(task)[k] == "issue"]
        every += bool(hit) and len(issued) == len(hit)
        none += bool(hit) and not issued
    assert every and none


def test_boundaries_are_drawn_at_the_edge() -> None:
    """Flights scheduled exactly at the window (in) and 30 minutes past it (late)."""
    at = over = 0
    for task in tasks():
        for r in reservations(task):
            if r["hit"] is None:
                continue
            hours = (NOW - r["departure"]).total_seconds() / 3600
            at += hours == POLICY[r["tier"]]
            over += hours == POLICY[r["tier"]] + 0.5
    assert at and over


# Policies that leave one fact out: the tier's longer window, the window, the limit.
SHORTCUTS = {
    "one_window_for_every_tier": ({"regular": 48.0, "silver": 48.0, "gold": 48.0}, 3),
    "the_gold_window_for_every_tier": ({"regular": 72.0, "silver": 72.0, "gold": 72.0}, 3),
    "no_window": ({"regular": 1e9, "silver": 1e9, "gold": 1e9}, 3),
    "no_limit": (POLICY, None),
}


def play(task: dict[str, Any], codes: list[str]) -> list[dict[str, Any]]:
    """The gold's reads, certificates for `codes`, then its decline or the total answered."""
    gold = task["ground_truth"]
    reads = [c for c in gold if c["name"] in ("find_user_by_email", "get_user_details")]
    reads += [c for c in gold if c["name"] == "get_reservation_details"]
    user = next(c for c in gold if c["name"] == "get_user_details")["arguments"]["user_id"]
    claims = [
        {
            "name": "issue_compensation_certificate",
            "arguments": {"user_id": user, "reservation_code": code},
        }
        for code in codes
    ]
    last = gold[-1]
    if last["name"] == "submit_answer":
        facts = {r["code"]: r for r in reservations(task)}
        total = sum(COMPENSATION[facts[c]["hit"][0]] * facts[c]["passengers"] for c in codes)
        last = {"name": "submit_answer", "arguments": {"answer": money(total)}}
    tail = [last] if last["name"] in ("submit_answer", "decline_request") else []
    return reads + claims + tail


def test_gold_1_and_noop_0(score: ReplayScore) -> None:
    for task in tasks()[:6]:
        assert score(task, task["ground_truth"]) == 1.0
        assert score(task, play(task, issued_by(task, POLICY, 3))) == 1.0
        assert score(task, []) == 0.0


@pytest.mark.parametrize("name", sorted(SHORTCUTS))
def test_a_policy_missing_one_fact_scores_0_on_some_draws(name: str, score: ReplayScore) -> None:
    window, cap = SHORTCUTS[name]
    wrong = [t for t in tasks() if issued_by(t, window, cap) != gold_issued(t)]
    assert wrong, f"{name} is right on every draw"
    for task in wrong[:3]:
        assert score(task, play(task, issued_by(task, window, cap))) == 0.0


def test_the_policy_states_the_new_rules() -> None:
    system = tasks()[0]["responses_create_params"]["input"][0]["content"]
    for words in (
        "48 hours",
        "72 hours for gold",
        "At most three compensation certificates",
        "exactly 48 hours",
        "without declining it",
        "certificate_",
    ):
        assert words in system, words


def named_late(task: dict[str, Any]) -> list[str]:
    """Declined reservations the tool would issue a certificate for (disrupted, eligible, none
    issued before): only the policy's window refuses them."""
    facts = {r["code"]: r for r in reservations(task)}
    return [
        code
        for code in declined_records(task)
        if facts[code]["hit"] is not None
        and not facts[code]["certified"]
        and (
            facts[code]["tier"] != "regular"
            or facts[code]["fare"] == "business"
            or facts[code]["insurance"]
        )
    ]


def test_a_named_late_reservation_is_declined_though_the_tool_would_issue_it(
    score: ReplayScore,
) -> None:
    """Some draws name a reservation whose complaint is late: the tool issues its certificate
    when asked, so trusting the tool's answer earns 0; the policy's window decides."""
    found = [(t, code) for t in tasks() for code in named_late(t)]
    assert len(found) >= 3, len(found)
    for task, code in found[:3]:
        unnamed = {**task, "ground_truth": task["ground_truth"][:-1]}  # the decline left out
        assert verdicts(unnamed)[code] == "late", (task["task_id"], code)
        reads, (claim, _decline) = play(task, [code])[:-2], play(task, [code])[-2:]
        outcomes, _ = gold_outcomes(ENVIRONMENT, run_seed(task), [*reads, claim])
        assert "error" not in outcomes[-1], outcomes[-1]
        trusting = play(task, [*gold_issued(task), code])
        assert score(task, trusting) == 0.0, task["task_id"]
