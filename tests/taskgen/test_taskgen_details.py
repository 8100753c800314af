"""Missing details (app/taskgen/details.py): a generated request may leave out a fact the agent
must look up; the gold then holds the lookup, the fact stays uniquely determined by what the
request says (distractors included), and train and test word it from disjoint pools."""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any

import pytest

from app.taskgen.details import Omission, leaving_out, omit, pools
from app.taskgen.draw import choices, draw
from app.taskgen.gold_run import gold_run
from app.taskgen.kit import Draft
from app.taskgen.registry import load_generator
from app.taskgen.splits import Split
from envs.retail.taskgen.details import EMAIL_INSTEAD, ORDER_INSTEAD

# Each draws and gold-runs a few hundred stories: ~17 s in all.
pytestmark = pytest.mark.slow

OMISSION = Omission(
    "order",
    "order #W9001000",
    {"train": ("my most recent order",), "test": ("my latest order",)},
    ({"name": "list_customer_orders", "arguments": {"customer_id": 7}},),
    before=1,
    swap={0: {"name": "find_customer_by_name_zip", "arguments": {}}},
)
DRAFT = Draft(
    "cancel",
    "Hi. Please cancel order #W9001000. Thanks.",
    [{"name": "find_customer_by_email", "arguments": {}}, {"name": "cancel", "arguments": {}}],
    True,
    omissions=(OMISSION,),
)


def test_omit_rewrites_the_prompt_and_adds_the_lookup() -> None:
    results = set()
    for k in range(40):
        with leaving_out("test", random.Random(k)):
            draft, tag = omit(DRAFT)
        if tag is None:
            assert draft == DRAFT
            continue
        results.add(tag)
        assert draft.prompt == "Hi. Please cancel my latest order. Thanks."
        assert [c["name"] for c in draft.gold] == [
            "find_customer_by_name_zip",
            "list_customer_orders",
            "cancel",
        ]
        assert draft.omissions == ()
    assert results == {"omit-order0"}
    # Outside `leaving_out` (shipped sets, distractor stories) every detail is stated.
    assert omit(DRAFT) == (DRAFT, None)


def test_train_and_test_word_missing_details_from_disjoint_pools() -> None:
    for instead in (EMAIL_INSTEAD, ORDER_INSTEAD):
        train = {w.format(zip="") for w in instead["train"]}
        test = {w.format(zip="") for w in instead["test"]}
        assert train and test and not train & test
    assert not pools("train", [OMISSION]) & pools("test", [OMISSION])


def _newest(seed: dict[str, Any], customer_id: int) -> str:
    orders = [o for o in seed["rows"]["orders"] if o["customer_id"] == customer_id]
    orders.sort(key=lambda o: o["created_at"])
    assert len(orders) == 1 or orders[-1]["created_at"] > orders[-2]["created_at"]
    return str(orders[-1]["order_number"])


def _retail_tasks(split: Split, n: int) -> list[dict[str, Any]]:
    gen = load_generator("retail")
    pool = choices(gen, split, None)
    drawn = (draw(gen, split, 11, i, pool).task for i in range(n))
    return [t for t in drawn if t is not None]


def test_retail_requests_leave_out_email_or_order_and_the_gold_looks_them_up() -> None:
    gen = load_generator("retail")
    env = gen.env
    seen: Counter[str] = Counter()
    for split in ("train", "test"):
        for task in _retail_tasks(split, 60):  # type: ignore[arg-type]
            tags = re.findall(r"omit-(email|order)(\d)", task["phrasing"])
            if not tags:
                continue
            ((kind, n),) = tags
            seen[f"{split}/{kind}"] += 1
            prompt = task["responses_create_params"]["input"][-1]["content"]
            gold, seed = task["ground_truth"], task["seed"]
            customers = {c["id"]: c for c in seed["rows"]["customers"]}
            run = gold_run(env, seed, gold)
            assert not run.failures
            if kind == "email":
                first = gold[0]
                assert first["name"] == "find_customer_by_name_zip"
                assert EMAIL_INSTEAD[split][int(n)].format(zip=first["arguments"]["zip"]) in prompt
                # Name and zip find exactly the speaker, distractors included.
                (match,) = run.outcomes[0]["output"]["matches"]
                me = customers[match["customer_id"]]
                assert me["email"] not in prompt
                assert me["first_name"] == first["arguments"]["first_name"]
            else:
                assert ORDER_INSTEAD[split][int(n)] in prompt
                at = next(i for i, c in enumerate(gold) if "order_number" in c["arguments"])
                number = gold[at]["arguments"]["order_number"]
                assert number not in prompt and number.lstrip("#") not in prompt
                listed = [
                    c["arguments"]["customer_id"]
                    for c in gold[:at]
                    if c["name"] == "list_customer_orders"
                ]
                assert listed
                # "Most recent" is the speaker's strictly newest order, whoever else is seeded.
                assert _newest(seed, listed[0]) == number
    assert seen["train/email"] and seen["train/order"], seen
    assert seen["test/email"] or seen["test/order"], seen


def test_airline_requests_may_give_the_email_instead_of_the_user_id() -> None:
    from envs.airline.taskgen.details import USER_INSTEAD

    gen = load_generator("airline")
    pool = choices(gen, "train", None)
    drawn = (draw(gen, "train", 11, i, pool).task for i in range(50))
    omitted = [t for t in drawn if t is not None and "omit-user" in t["phrasing"]]
    assert omitted
    for task in omitted:
        prompt = task["responses_create_params"]["input"][-1]["content"]
        first = task["ground_truth"][0]
        assert first["name"] == "find_user_by_email"
        (user,) = [
            u for u in task["seed"]["rows"]["users"] if u["email"] == first["arguments"]["email"]
        ]
        assert user["user_code"] not in prompt
        n = int(task["phrasing"].rsplit("omit-user", 1)[1])
        assert USER_INSTEAD["train"][n].format(email=user["email"]) in prompt
    assert not {w.format(email="") for w in USER_INSTEAD["train"]} & {
        w.format(email="") for w in USER_INSTEAD["test"]
    }


def test_ledger_requests_may_name_the_account_by_its_type_only() -> None:
    from envs.ledger.taskgen.details import ACCOUNT_INSTEAD

    gen = load_generator("ledger")
    pool = choices(gen, "train", None)
    drawn = (draw(gen, "train", 11, i, pool).task for i in range(40))
    omitted = [t for t in drawn if t is not None and "omit-account" in t["phrasing"]]
    assert omitted
    for task in omitted:
        prompt = task["responses_create_params"]["input"][-1]["content"]
        email = task["ground_truth"][0]["arguments"]["email"]
        rows = task["seed"]["rows"]
        (me,) = [c for c in rows["customers"] if c["email"] == email]
        mine = [a for a in rows["accounts"] if a.get("customer_id") == me["id"]]
        # The account left out is the speaker's only one of its type: find_customer shows it.
        left_out = [a for a in mine if a["number"] not in prompt]
        assert left_out
        assert any(
            ACCOUNT_INSTEAD["train"][0].format(type=a["type"]) in prompt
            and sum(b["type"] == a["type"] for b in mine) == 1
            for a in left_out
        )


def test_workplace_requests_may_name_the_deal_by_its_company() -> None:
    from envs.workplace.taskgen.details import DEAL_INSTEAD

    gen = load_generator("workplace")
    pool = choices(gen, "train", None)
    # Most deal stories carry a look-alike deal of the same customer (then the deal must be
    # named): 200 draws hold a few that may name it by its customer alone.
    drawn = (draw(gen, "train", 11, i, pool).task for i in range(200))
    omitted = [t for t in drawn if t is not None and "omit-deal" in t["phrasing"]]
    assert omitted
    for task in omitted:
        prompt = task["responses_create_params"]["input"][-1]["content"]
        rows = task["seed"]["rows"]
        gold = task["ground_truth"]
        at = next(i for i, c in enumerate(gold) if "code" in c["arguments"])
        code = gold[at]["arguments"]["code"]
        assert code not in prompt
        (deal,) = [d for d in rows["deals"] if d.get("code") == code]
        (company,) = [c["name"] for c in rows["companies"] if c["id"] == deal["company_id"]]
        assert DEAL_INSTEAD["train"][0].format(company=company) in prompt
        # The company's only deal (company names are unique, so base deals are not its).
        assert sum(d.get("company_id") == deal["company_id"] for d in rows["deals"]) == 1
        assert any(
            c["name"] == "list_deals" and c["arguments"]["company"] == company for c in gold[:at]
        )


def test_sql_requests_may_name_the_employee_without_their_number() -> None:
    from sqlalchemy import text

    from app.authoring.replay import open_task_db
    from envs.sql import ENVIRONMENT
    from envs.sql.taskgen.kit import names_pool

    # What makes a story employee's name unique in the whole database: the base has none.
    db, _ = open_task_db(ENVIRONMENT)
    try:
        base = {tuple(r) for r in db.execute(text("SELECT first_name, last_name FROM employees"))}
    finally:
        db.close()
    assert not base & set(names_pool())
    gen = load_generator("sql")
    pool = choices(gen, "train", None)
    drawn = (draw(gen, "train", 11, i, pool).task for i in range(60))
    omitted = [t for t in drawn if t is not None and "omit-employee-no" in t["phrasing"]]
    assert omitted
    for task in omitted:
        prompt = task["responses_create_params"]["input"][-1]["content"]
        people = task["seed"]["rows"]["employees"]
        statements = [str(c["arguments"].get("sql")) for c in task["ground_truth"]]
        left_out = [e for e in people if e["employee_no"] not in prompt]
        assert any(
            f"{e['first_name']} {e['last_name']}" in prompt
            and sum(
                (p["first_name"], p["last_name"]) == (e["first_name"], e["last_name"])
                for p in people
            )
            == 1
            and any(
                f"first_name = '{e['first_name']}' AND last_name = '{e['last_name']}'" in s
                for s in statements
            )
            for e in left_out
        )
