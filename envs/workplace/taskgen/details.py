"""Workplace's missing details (app/taskgen/details.py): what a draw may leave out of a request.

- `deal`: "deal D-7010 with Quillfeather Press" (or "my deal D-7010 with ...", "deal D-7010
  (Quillfeather Press)") becomes "the Quillfeather Press deal"; the gold lists that company's
  deals (`list_deals`) before its first call on the deal, unless it already did. Declared only
  when the company has exactly one deal: company names are unique (a story's company is new),
  so its deals are the story's.
"""

from __future__ import annotations

import re
from typing import Any

from app.sdk.taskgen import Omission, Split
from envs.workplace.taskgen.kit import C

DEAL_INSTEAD: dict[Split, tuple[str, ...]] = {
    "train": ("the {company} deal",),
    "test": ("the deal we have with {company}",),
}


def omissions(
    prompt: str, gold: list[dict[str, Any]], seed: dict[str, Any]
) -> tuple[Omission, ...]:
    """The details of this request a draw may leave out (none when nothing qualifies)."""
    rows = seed.get("rows", {})
    companies = {c["id"]: c["name"] for c in rows.get("companies", []) if "name" in c}
    deals = [d for d in rows.get("deals", []) if "code" in d]
    found = []
    for deal in deals:
        company = companies.get(deal.get("company_id"))
        if company is None or sum(d.get("company_id") == deal["company_id"] for d in deals) != 1:
            continue
        code, name = re.escape(deal["code"]), re.escape(company)
        match = re.search(rf"\b(?:my )?deal {code}(?: with {name}| \({name}\))", prompt)
        uses = [i for i, c in enumerate(gold) if c["arguments"].get("code") == deal["code"]]
        if match is None or prompt.count(deal["code"]) != 1 or not uses:
            continue
        listed = any(
            c["name"] == "list_deals" and c["arguments"].get("company") == company
            for c in gold[: uses[0]]
        )
        lookup = () if listed else (C("list_deals", company=company),)
        instead = {
            s: tuple(w.format(company=company) for w in ws) for s, ws in DEAL_INSTEAD.items()
        }
        found.append(Omission("deal", match.group(0), instead, lookup, uses[0]))
    return tuple(found)
