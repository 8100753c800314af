"""Session lineage in the control database: which session a fork or a restore came from.

One row per session that was not seeded (table `lineage`, app/storage/control_schema.py): its
parent, the step of the parent it started from, and how (`fork` or `restore`). A tree is read by
walking up to the root, then down through the children.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, insert, select

from app.clock import naive_utcnow
from app.storage.control_schema import lineage_table, sessions_table

FORK, RESTORE = "fork", "restore"
MAX_DEPTH = 1_000


@dataclass(frozen=True)
class Origin:
    session_id: str
    parent_id: str
    parent_step: int
    kind: str


def record(engine: Engine, origins: list[Origin]) -> None:
    if not origins:
        return
    now = naive_utcnow()
    with engine.begin() as conn:
        conn.execute(
            insert(lineage_table),
            [
                {
                    "session_id": o.session_id,
                    "parent_id": o.parent_id,
                    "parent_step": o.parent_step,
                    "kind": o.kind,
                    "created_at": now,
                }
                for o in origins
            ],
        )


def origin(engine: Engine, session_id: str) -> Origin | None:
    with engine.connect() as conn:
        row = conn.execute(
            select(lineage_table).where(lineage_table.c.session_id == session_id)
        ).first()
    return None if row is None else Origin(row.session_id, row.parent_id, row.parent_step, row.kind)


def tree(engine: Engine, session_id: str) -> dict[str, Any]:
    """The whole lineage tree holding `session_id`, from its root: nested
    `{session_id, status, reward, kind, parent_step, children: [...]}`."""
    root = session_id
    for _ in range(MAX_DEPTH):
        up = origin(engine, root)
        if up is None:
            break
        root = up.parent_id
    with engine.connect() as conn:
        edges = conn.execute(select(lineage_table)).all()
        children: dict[str, list[Any]] = {}
        for edge in edges:
            children.setdefault(edge.parent_id, []).append(edge)
        members = {root} | {e.session_id for e in edges}
        rows = conn.execute(
            select(sessions_table.c.id, sessions_table.c.status, sessions_table.c.reward).where(
                sessions_table.c.id.in_(members)
            )
        ).all()
    info = {r.id: r for r in rows}

    def node(sid: str, edge: Any, depth: int) -> dict[str, Any]:
        row = info.get(sid)
        kids = sorted(children.get(sid, []), key=lambda e: (e.created_at, e.session_id))
        return {
            "session_id": sid,
            "status": row.status if row else "unknown",
            "reward": row.reward if row else None,
            "kind": edge.kind if edge is not None else "seed",
            "parent_step": edge.parent_step if edge is not None else None,
            "marked": sid == session_id,
            "children": [node(e.session_id, e, depth + 1) for e in kids] if depth < 50 else [],
        }

    return node(root, None, 0)
