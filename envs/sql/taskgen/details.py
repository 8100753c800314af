"""sql's missing details (app/taskgen/details.py): what a draw may leave out of a request.

- `employee-no`: "Felipe Horvat (E901904)" becomes "Felipe Horvat" (or "Felipe Horvat (I don't
  know their employee number)"); the gold first finds the employee by name with a SELECT,
  unless it already did. Declared only for a name no other seeded employee has; the story
  names are drawn from a pool disjoint from the base employees' names (tested), so the name
  is unique in the whole database, distractors included.
"""

from __future__ import annotations

from typing import Any

from app.sdk.taskgen import Omission, Split
from envs.sql.taskgen.kit import sql

EMPLOYEE_NO_INSTEAD: dict[Split, tuple[str, ...]] = {
    "train": ("", " (I don't know their employee number)"),
    "test": (" (their employee number escapes me)",),
}


def omissions(
    prompt: str, gold: list[dict[str, Any]], seed: dict[str, Any]
) -> tuple[Omission, ...]:
    """The details of this request a draw may leave out (none when nothing qualifies)."""
    people = [e for e in seed.get("rows", {}).get("employees", []) if "employee_no" in e]
    names = [(e["first_name"], e["last_name"]) for e in people]
    found = []
    for e in people:
        first, last, no = e["first_name"], e["last_name"], e["employee_no"]
        stated = f"{first} {last} ({no})"
        if names.count((first, last)) != 1 or prompt.count(no) != 1 or stated not in prompt:
            continue
        uses = [i for i, c in enumerate(gold) if f"'{no}'" in str(c["arguments"].get("sql"))]
        if not uses:
            continue
        lookup = sql(
            f"SELECT id, employee_no, status FROM employees "
            f"WHERE first_name = '{first}' AND last_name = '{last}'"
        )
        found_by_name = any(
            f"first_name = '{first}' AND last_name = '{last}'" in str(c["arguments"].get("sql"))
            for c in gold[: uses[0]]
        )
        instead = {
            s: tuple(f"{first} {last}{w}" for w in ws) for s, ws in EMPLOYEE_NO_INSTEAD.items()
        }
        found.append(
            Omission("employee-no", stated, instead, () if found_by_name else (lookup,), uses[0])
        )
    return tuple(found)
