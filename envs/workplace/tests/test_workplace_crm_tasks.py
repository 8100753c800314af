"""CRM and project tools on a real in-memory SQLite: the deal pipeline and the task rules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select

from app.authoring.replay import dump
from envs.workplace import ENVIRONMENT
from envs.workplace.models import Activity, Deal, DealStageChange, WorkTask
from envs.workplace.testing import fails, run
from envs.workplace.world import World, build_world


@pytest.fixture
def w() -> Iterator[World]:
    world = build_world()
    yield world
    world.db.close()


def _deal(w: World, key: str) -> Deal:
    deal = w.db.scalar(select(Deal).where(Deal.code == w.deals[key]))
    assert deal is not None
    return deal


def test_deals_move_forward_one_stage_and_history_records_it(w: World) -> None:
    run(w.db, "update_deal_stage", code=w.deals["lead"].lower(), stage="qualified")
    history = w.db.scalars(
        select(DealStageChange).where(DealStageChange.deal_id == _deal(w, "lead").id)
    ).all()
    assert [(h.from_stage, h.to_stage, h.changed_by) for h in history] == [
        ("lead", "qualified", w.user.id)
    ]
    err = fails(w.db, "update_deal_stage", "stage_order", code=w.deals["lead"], stage="won")
    assert "proposal" in err.message  # says where it can go instead
    fails(w.db, "update_deal_stage", "stage_order", code=w.deals["proposal"], stage="qualified")


def test_any_open_deal_can_be_lost_and_closed_deals_are_final(w: World) -> None:
    run(w.db, "update_deal_stage", code=w.deals["lead"], stage="lost")
    fails(w.db, "update_deal_stage", "deal_closed", code=w.deals["lead"], stage="qualified")
    fails(w.db, "update_deal_stage", "deal_closed", code=w.deals["won"], stage="lost")
    fails(w.db, "update_deal_amount", "deal_closed", code=w.deals["won"], amount=1.0)


def test_a_deal_is_won_only_with_an_amount(w: World) -> None:
    fails(w.db, "update_deal_stage", "amount_required", code=w.deals["no_amount"], stage="won")
    run(w.db, "update_deal_amount", code=w.deals["no_amount"], amount=1234.567)
    assert _deal(w, "no_amount").amount == 1234.57
    run(w.db, "update_deal_stage", code=w.deals["no_amount"], stage="won")
    assert _deal(w, "no_amount").stage == "won"


def test_only_the_owner_reassigns_and_only_to_active_people(w: World) -> None:
    err = fails(
        w.db, "reassign_deal", "not_owner", code=w.deals["theirs"], new_owner_email=w.boss.email
    )
    assert w.mate.email in err.message
    fails(
        w.db,
        "reassign_deal",
        "inactive_employee",
        code=w.deals["qualified"],
        new_owner_email=w.gone.email,
    )
    run(w.db, "reassign_deal", code=w.deals["qualified"], new_owner_email=w.mate.email)
    assert _deal(w, "qualified").owner_id == w.mate.id


def test_activities_need_a_contact_of_the_deals_company(w: World) -> None:
    fails(
        w.db,
        "log_activity",
        "wrong_contact",
        code=w.deals["lead"],
        kind="call",
        summary="x",
        contact_email="cfo@othercorp.com",
    )
    run(
        w.db,
        "log_activity",
        code=w.deals["lead"],
        kind="call",
        summary="Intro call",
        contact_email=w.contact.email.upper(),
    )
    act = w.db.scalar(select(Activity).where(Activity.deal_id == _deal(w, "lead").id))
    assert act is not None and act.employee_id == w.user.id and act.contact_id is not None


def test_tasks_are_numbered_and_refuse_former_employees_and_past_dates(w: World) -> None:
    out = run(
        w.db,
        "create_task",
        project_key=w.project.lower(),
        title="New thing",
        assignee_email=w.mate.email,
        due_date="2026-03-20",
    )
    # The next number after the project's highest (seeded numbers start where the story drew).
    highest = max(int(c.rsplit("-", 1)[1]) for c in w.tasks.values() if c.startswith(w.project))
    assert out["code"] == f"{w.project}-{highest + 1}" and out["priority"] == "medium"
    fails(
        w.db,
        "create_task",
        "inactive_employee",
        project_key=w.project,
        title="x",
        assignee_email=w.gone.email,
    )
    fails(
        w.db, "create_task", "in_the_past", project_key=w.project, title="x", due_date="2026-03-01"
    )
    fails(w.db, "create_task", "project_inactive", project_key=w.held, title="x")


def test_task_status_and_assignee_rules(w: World) -> None:
    fails(w.db, "update_task_status", "task_closed", code=w.tasks["done"], status="todo")
    fails(w.db, "update_task_status", "no_change", code=w.tasks["todo"], status="todo")
    fails(w.db, "update_task_status", "project_inactive", code=w.tasks["held"], status="done")
    fails(
        w.db,
        "reassign_task",
        "inactive_employee",
        code=w.tasks["todo"],
        assignee_email=w.gone.email,
    )
    fails(w.db, "reassign_task", "task_closed", code=w.tasks["done"], assignee_email=w.mate.email)
    run(w.db, "reassign_task", code=w.tasks["todo"], assignee_email=w.mate.email)
    run(w.db, "update_task_status", code=w.tasks["todo"], status="done")
    task = w.db.scalar(select(WorkTask).where(WorkTask.code == w.tasks["todo"]))
    assert task is not None and (task.status, task.assignee_id) == ("done", w.mate.id)


def test_crm_and_directory_reads_write_nothing(w: World) -> None:
    before = dump(w.db, ENVIRONMENT)
    me = run(w.db, "get_current_user")
    assert me["email"] == w.user.email
    people = run(w.db, "search_employees", query=w.gone.name)["employees"]
    assert [(p["email"], p["active"]) for p in people] == [(w.gone.email, False)]
    found = run(w.db, "search_customers", query=w.contact.last)["companies"]
    assert found[0]["company"] == w.company
    mine = run(w.db, "list_deals", owner_email=w.user.email)["deals"]
    assert {d["code"] for d in mine} == {v for k, v in w.deals.items() if k != "theirs"}
    full = run(w.db, "get_deal", code=w.deals["won"])
    assert full["amount"] == "25000.00" and full["owner"] == w.user.email
    assert len(run(w.db, "list_tasks", project_key=w.project, status="done")["tasks"]) == 1
    assert dump(w.db, ENVIRONMENT) == before
