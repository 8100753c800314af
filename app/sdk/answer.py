"""The framework's answer tools and table: answers and refusals are state, not free text.

Every environment gets `submit_answer` and `decline_request` (reserved names), built here from
what it declares (`answer_instructions`, `decline_reasons`). Each writes the ONE row of the
`stategym_answer` table in the session's own database, in the call's transaction, so it is
step-logged, forked, rewound, exported and inspected like any other write; a second submission
is refused (`already_submitted`), so a policy cannot hedge by answering twice. Verify reads the
row and scores it by value (app/verify/answers/submitted.py); the state diff never sees the table.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal, Union

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, create_model
from pydantic import field_validator as _field_validator
from sqlalchemy import CheckConstraint, Column, Integer, MetaData, Table, Text, insert, select
from sqlalchemy.orm import Session

from app.sdk.compare_spec import ANSWER_TABLE
from app.sdk.tool import Tool, ToolArgs, ToolContext, ToolError

SUBMIT_ANSWER = "submit_answer"
DECLINE_REQUEST = "decline_request"
RESERVED_TOOL_NAMES = frozenset({SUBMIT_ANSWER, DECLINE_REQUEST})
# The code every environment's decline_request accepts when it declares none of its own.
FALLBACK_REASON = "other"
MAX_ANSWER_TEXT = 2000
MAX_ANSWER_ITEMS = 200
_CODE = re.compile(r"[a-z][a-z0-9_]{0,59}")

DEFAULT_ANSWER_INSTRUCTIONS = (
    "Submit the answer to the user's question, once, when you know it. Give exactly one value "
    "(a string or a number: an amount such as 233.00, a date such as 2026-05-07, an id, a name, "
    "yes or no), or a list of values when the question asks for several (every one of them, "
    "nothing else). Only the submitted value is scored; a second submission is refused."
)
DECLINE_PREAMBLE = (
    "Decline the user's request when the policy does not allow it, naming the rule that forbids "
    "it as `reason` (one of the codes below), what it is about as `subject` (the id of the "
    "order, reservation, account or record, as the tools show it; each of them, as a list, when "
    "several are refused) and explaining it to the user "
    "in `message` (not scored). Call it once, only for a request you must refuse; a second "
    "submission (answer or decline) is refused."
)

Scalar = StrictBool | StrictInt | StrictFloat | StrictStr


def answer_table(metadata: MetaData) -> Table:
    """The framework answer table in `metadata` (added once; every environment's MetaData has it
    so it is created with the env's schema and step-logged like the env's tables)."""
    existing = metadata.tables.get(ANSWER_TABLE)
    if existing is not None:
        return existing
    return Table(
        ANSWER_TABLE,
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("kind", Text, nullable=False),
        Column("value", Text, nullable=True),
        Column("reason", Text, nullable=True),
        Column("message", Text, nullable=True),
        Column("submitted_at", Text, nullable=True),
        # One submission per session, whatever path writes it.
        CheckConstraint("id = 1", name="single_row"),
        CheckConstraint("kind IN ('answer', 'decline')", name="kind"),
    )


def _bounded(value: Any) -> Any:
    """Finite numbers, bounded text and lists (checked here, not in the schema: strict tool
    schemas keep to the keywords every client accepts)."""
    if isinstance(value, list) and len(value) > MAX_ANSWER_ITEMS:
        raise ValueError(f"a list answer has at most {MAX_ANSWER_ITEMS} items")
    items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError("numbers must be finite")
        if isinstance(item, str) and len(item) > MAX_ANSWER_TEXT:
            raise ValueError(f"an answer value is at most {MAX_ANSWER_TEXT} characters")
    return value


def _already_submitted(db: Session, table: Table) -> None:
    if db.execute(select(table.c.id)).first() is not None:
        raise ToolError(
            "an answer was already submitted",
            hint="Only the first submit_answer or decline_request of a conversation counts; "
            "reply to the user in text instead.",
            code="already_submitted",
        )


def _as_enum(schema: dict[str, Any]) -> None:
    """A one-code Literal is a JSON Schema `const`; strict tool schemas list codes as `enum`."""
    if "const" in schema:
        schema["enum"] = [schema.pop("const")]


def decline_codes(declared: Mapping[str, str]) -> dict[str, str]:
    """The environment's reason codes, checked (lowercase identifiers with a description); an
    environment that declares none gets the single code `other`."""
    for code, description in declared.items():
        if not isinstance(code, str) or not _CODE.fullmatch(code):
            raise ValueError(f"decline reason {code!r}: use a lowercase identifier (a-z, 0-9, _)")
        if not isinstance(description, str) or not description.strip():
            raise ValueError(f"decline reason {code!r}: give a one-line description")
    return dict(declared) or {FALLBACK_REASON: "the request cannot be done under the policy"}


def decline_description(codes: Mapping[str, str]) -> str:
    lines = [f"- {code}: {text}" for code, text in codes.items()]
    return DECLINE_PREAMBLE + "\nReason codes:\n" + "\n".join(lines)


def framework_tools(
    metadata: MetaData, answer_instructions: str, decline_reasons: Mapping[str, str]
) -> tuple[Tool, Tool]:
    """`submit_answer` and `decline_request` for one environment (its table, text and codes)."""
    table = answer_table(metadata)
    return _submit_answer(table, answer_instructions), _decline_request(table, decline_reasons)


def _submit_answer(table: Table, answer_instructions: str) -> Tool:
    args_model = create_model(
        "SubmitAnswerArgs",
        __base__=ToolArgs,
        __validators__={"_bounded": _field_validator("answer")(_bounded)},
        answer=(
            Scalar | list[Scalar],
            Field(
                description="One value, or a list of values for a question that asks for several."
            ),
        ),
    )

    def submit_answer(db: Session, args: Any, ctx: ToolContext) -> dict[str, Any]:
        _already_submitted(db, table)
        value = json.dumps(args.answer, ensure_ascii=False)
        db.execute(
            insert(table).values(id=1, kind="answer", value=value, submitted_at=ctx.now.isoformat())
        )
        return {"submitted": args.answer}

    return Tool(
        name=SUBMIT_ANSWER,
        description=answer_instructions,
        args_model=args_model,
        fn=submit_answer,
        framework=True,
    )


def _decline_request(table: Table, decline_reasons: Mapping[str, str]) -> Tool:
    codes = decline_codes(decline_reasons)
    args_model = create_model(
        "DeclineRequestArgs",
        __base__=ToolArgs,
        reason=(  # type: ignore[arg-type]  # a Literal built from the env's codes (an enum)
            Literal[tuple(codes)],
            Field(
                description="The code of the rule that forbids the request.",
                json_schema_extra=_as_enum,
            ),
        ),
        __validators__={"_bounded": _field_validator("message", "subject")(_bounded)},
        message=(
            StrictStr,
            Field(description="What you tell the user (not scored)."),
        ),
        subject=(
            # One subscription, not `|`: typing caches `A | B` as equal to an earlier `B | A`
            # (tasks.py's expected_outputs), which would flip the schema's anyOf order.
            Union[StrictStr, list[StrictStr], None],  # noqa: UP007
            Field(
                default=None,
                description="What the refused request is about, as the tools show it: the "
                "order number, reservation code, account number, record id ... it concerns; "
                "a list naming each one when the refusal concerns several records (null only "
                "when it concerns no record).",
            ),
        ),
    )

    def decline_request(db: Session, args: Any, ctx: ToolContext) -> dict[str, Any]:
        _already_submitted(db, table)
        subject = None if args.subject is None else json.dumps(args.subject, ensure_ascii=False)
        db.execute(
            insert(table).values(
                id=1,
                kind="decline",
                value=subject,  # a decline's `value` is what it is about (verify matches it)
                reason=args.reason,
                message=args.message,
                submitted_at=ctx.now.isoformat(),
            )
        )
        out: dict[str, Any] = {"declined": args.reason}
        if args.subject is not None:
            out["subject"] = args.subject
        return out

    return Tool(
        name=DECLINE_REQUEST,
        description=decline_description(codes),
        args_model=args_model,
        fn=decline_request,
        framework=True,
    )
