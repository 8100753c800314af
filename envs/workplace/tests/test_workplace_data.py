"""The base dataset: realistically sized, consistent with the rules, drawn from its rng (tool
schemas and a deterministic base are the contract's checks: envs check)."""

from __future__ import annotations

import random

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.authoring.replay import dump, memory_engine
from envs.workplace import ENVIRONMENT
from envs.workplace.models import Deal, DealStageChange, Employee, Event, EventAttendee


def _build(seed: int) -> dict:
    engine = memory_engine(ENVIRONMENT)
    with Session(engine) as db:
        ENVIRONMENT.build_base(db, random.Random(seed))
        db.commit()
        state = dump(db, ENVIRONMENT)
    engine.dispose()
    return state


def test_base_data_is_sized_and_drawn_from_its_rng() -> None:
    # That one seed builds the same data twice is the contract's check (envs check).
    first = _build(ENVIRONMENT.base_seed)
    assert first != _build(ENVIRONMENT.base_seed + 1)
    sizes = {name: len(rows) for name, rows in first.items()}
    assert sizes["employees"] == 150 and sizes["deals"] == 300
    assert 3000 < sum(sizes.values()) < 20000
    for rows in first.values():
        assert all(r[0] < 100_000 for r in rows), "base ids stay below the task range"


def test_base_data_obeys_the_rules() -> None:
    engine = memory_engine(ENVIRONMENT)
    with Session(engine) as db:
        ENVIRONMENT.build_base(db, random.Random(ENVIRONMENT.base_seed))
        db.flush()
        assert (
            db.scalar(select(func.count()).where(Deal.stage == "won", Deal.amount.is_(None))) == 0
        )
        # Each deal's history ends at its stage.
        for deal in db.scalars(select(Deal).where(Deal.stage != "lead")):
            last = db.scalars(
                select(DealStageChange.to_stage)
                .where(DealStageChange.deal_id == deal.id)
                .order_by(DealStageChange.changed_at.desc())
            ).first()
            assert last == deal.stage, deal.code
        inactive = select(Employee.id).where(Employee.active.is_(False))
        assert (
            db.scalar(select(func.count()).select_from(Employee).where(Employee.active.is_(False)))
            or 0
        ) > 0
        # Former employees own no deals and get no invitations.
        assert db.scalar(select(func.count()).where(Deal.owner_id.in_(inactive))) == 0
        assert db.scalar(select(func.count()).where(EventAttendee.employee_id.in_(inactive))) == 0
        assert db.scalar(select(func.count()).where(Event.end_at <= Event.start_at)) == 0
    engine.dispose()
