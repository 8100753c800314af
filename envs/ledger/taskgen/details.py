"""Ledger's missing details (app/taskgen/details.py): what a draw may leave out of a request.

- `account`: "my checking account CHK100112" (or "my checking CHK100112") becomes "my checking
  account" (test: "my only checking account"); `find_customer`, the gold's first call, lists
  every account of the customer with its number and type, so no call is added: the agent reads
  the number there. Declared only for a type the speaker holds exactly one account of (whatever
  its status); other customers' accounts, a distractor's included, are not theirs.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from app.sdk.taskgen import Omission, Split

ACCOUNT_INSTEAD: dict[Split, tuple[str, ...]] = {
    "train": ("{type} account",),
    "test": ("only {type} account",),
}


def omissions(
    prompt: str, gold: list[dict[str, Any]], seed: dict[str, Any]
) -> tuple[Omission, ...]:
    """The details of this request a draw may leave out (none when nothing qualifies)."""
    if not gold or gold[0]["name"] != "find_customer":
        return ()
    rows = seed.get("rows", {})
    email = gold[0]["arguments"]["email"]
    me = next((c for c in rows.get("customers", []) if c.get("email") == email), None)
    if me is None:
        return ()
    mine = [a for a in rows.get("accounts", []) if a.get("customer_id") == me["id"]]
    types = Counter(a["type"] for a in mine)
    found = []
    for account in mine:
        kind, number = account["type"], account["number"]
        if types[kind] != 1 or prompt.count(number) != 1:
            continue
        match = re.search(rf"\b{kind}(?: account)? {re.escape(number)}\b", prompt)
        if match is None or not prompt[: match.start()].endswith("my "):
            continue
        instead = {s: tuple(w.format(type=kind) for w in ws) for s, ws in ACCOUNT_INSTEAD.items()}
        found.append(Omission("account", match.group(0), instead))
    return tuple(found)
