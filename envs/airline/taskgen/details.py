"""Airline's missing details (app/taskgen/details.py): what a draw may leave out of a request.

- `user`: "Hi, I'm Mia Chen, user id mia_chen_7001." becomes "Hi, I'm Mia Chen, my email is
  mia.chen1@example.org."; the gold first finds the user id by email (`find_user_by_email`).
  Unique: emails are unique, and the story's email is the speaker's own.
"""

from __future__ import annotations

from typing import Any

from app.sdk.taskgen import Omission, Split
from envs.airline.taskgen.kit import C

USER_INSTEAD: dict[Split, tuple[str, ...]] = {
    "train": (", my email is {email}", " ({email})"),
    "test": (", email address {email}",),
}


def omissions(
    prompt: str, gold: list[dict[str, Any]], seed: dict[str, Any]
) -> tuple[Omission, ...]:
    """The details of this request a draw may leave out (none when nothing qualifies)."""
    if any(call["name"] == "find_user_by_email" for call in gold):
        return ()  # identified by email already
    for user in seed.get("rows", {}).get("users", []):
        stated = f", user id {user['user_code']}."
        if prompt.startswith("Hi, I'm") and prompt.count(stated) == 1 and stated in _first(prompt):
            instead = {
                s: tuple(w.format(email=user["email"]) + "." for w in ws)
                for s, ws in USER_INSTEAD.items()
            }
            lookup = (C("find_user_by_email", email=user["email"]),)
            return (Omission("user", stated, instead, lookup, before=0),)
    return ()


def _first(prompt: str) -> str:
    """The greeting sentence (up to the first ". " after the user id)."""
    return prompt.split(". ", 1)[0] + "."
