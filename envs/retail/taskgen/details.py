"""Retail's missing details (app/taskgen/details.py): what a draw may leave out of a request.

- `email`: "Hi, I'm Mia Chen (mia.chen1@example.org)." becomes "Hi, I'm Mia Chen, zip code
  94110."; the gold authenticates by name and zip instead of email. Unique: story customers
  live in cities absent from the base data, and a distractor has another first name.
- `order`: "order #W9001000" (or "my pending order #W9001000") becomes "my most recent order";
  the gold lists the customer's orders (newest first) before reading it. Declared only when the
  order is the speaker's own and strictly their newest (a distractor's orders are another
  customer's).
"""

from __future__ import annotations

import re
from typing import Any

from app.sdk.taskgen import Omission, Split
from envs.retail.taskgen.kit import C

EMAIL_INSTEAD: dict[Split, tuple[str, ...]] = {
    "train": (", zip code {zip}", " from zip code {zip}"),
    "test": (", and my zip is {zip}",),
}
ORDER_INSTEAD: dict[Split, tuple[str, ...]] = {
    "train": ("my most recent order", "the order I placed last"),
    "test": ("my latest order", "the last order I placed"),
}
# An order as a request names it: "order #W9001000", "my order #W...", "my pending order #W...".
_ORDER = re.compile(r"\b(?:my (?:pending |delivered )?)?order (?P<number>#W\d+)\b")


def omissions(
    prompt: str, gold: list[dict[str, Any]], seed: dict[str, Any]
) -> tuple[Omission, ...]:
    """The details of this request a draw may leave out (none when nothing qualifies)."""
    if not gold or gold[0]["name"] != "find_customer_by_email":
        return ()
    rows = seed.get("rows", {})
    email = gold[0]["arguments"]["email"]
    me = next((c for c in rows.get("customers", []) if c["email"] == email), None)
    if me is None:
        return ()
    found: list[Omission] = []
    stated = f" ({email})"
    home = next(
        (a for a in rows.get("addresses", []) if a["customer_id"] == me["id"] and a["is_default"]),
        None,
    )
    if home is not None and prompt.count(stated) == 1:
        zip_code = str(home["zip"])
        by_zip = C(
            "find_customer_by_name_zip",
            first_name=me["first_name"],
            last_name=me["last_name"],
            zip=zip_code,
        )
        instead = {s: tuple(w.format(zip=zip_code) for w in ws) for s, ws in EMAIL_INSTEAD.items()}
        found.append(Omission("email", stated, instead, swap={0: by_zip}))
    newest = _newest_order(rows, me["id"])
    for match in _ORDER.finditer(prompt):
        if match.group("number") != newest or prompt.count(match.group(0)) != 1:
            continue
        reads = [i for i, c in enumerate(gold) if c["arguments"].get("order_number") == newest]
        if not reads:
            continue
        listed = any(
            call["name"] == "list_customer_orders" and call["arguments"]["customer_id"] == me["id"]
            for call in gold[: reads[0]]
        )
        lookup = () if listed else (C("list_customer_orders", customer_id=me["id"]),)
        found.append(Omission("order", match.group(0), ORDER_INSTEAD, lookup, reads[0]))
    return tuple(found)


def _newest_order(rows: dict[str, list[dict[str, Any]]], customer_id: int) -> str | None:
    """The customer's strictly newest order number (None: none, or a tie)."""
    mine = sorted(
        (o["created_at"], o["order_number"])
        for o in rows.get("orders", [])
        if o["customer_id"] == customer_id
    )
    if not mine or (len(mine) > 1 and mine[-1][0] == mine[-2][0]):
        return None
    return mine[-1][1]
