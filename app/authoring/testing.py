"""Test helpers for environment authors: call tools on a database like the framework does.

    from app.authoring.testing import ToolCalls
    CALLS = ToolCalls(ENVIRONMENT)
    run, fails = CALLS.run, CALLS.fails

    result = run(db, "cancel_pending_order", order_number="#W1", customer_id=7, reason="...")
    err = fails(db, "cancel_pending_order", order_number="#W1", customer_id=8, reason="...")
    err = fails(db, "get_event", "not_found", code="E-0")  # and the error code must be this

`db` is an ORM `Session` on a real database, e.g. from `app.runtime.replay.open_task_db`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.runtime.replay import dump
from app.sdk.environment import Environment, ToolContext, ToolError

__all__ = ["ToolCalls"]


class ToolCalls:
    """`run` and `fails` bound to one environment.

    omitted_as_null: arguments not given are passed as null (for environments whose argument
    models list every field as required-but-nullable, as strict tool schemas do).
    """

    def __init__(
        self,
        env: Environment,
        *,
        now: datetime | None = None,
        session_id: str = "test",
        omitted_as_null: bool = False,
    ) -> None:
        self.env = env
        self.ctx = ToolContext(now=now or env.default_now, session_id=session_id)
        self.omitted_as_null = omitted_as_null

    def run(self, db: Session, name: str, /, **arguments: Any) -> Any:
        """Call a tool like the framework does: validate the arguments, run, commit (roll back
        and re-raise on any error)."""
        tool = self.env.tool_named(name)
        assert tool is not None, f"{self.env.name} has no tool {name!r}"
        if self.omitted_as_null:
            arguments = {f: None for f in tool.args_model.model_fields} | arguments
        try:
            result = tool(db, tool.args_model.model_validate(arguments), self.ctx)
            db.commit()
        except BaseException:
            db.rollback()
            raise
        return result

    def fails(
        self, db: Session, name: str, code: str | None = None, /, **arguments: Any
    ) -> ToolError:
        """Call a tool that must refuse (with error `code`, when given); returns the ToolError.
        After the rollback the state must be exactly as it was."""
        before = dump(db, self.env)
        try:
            self.run(db, name, **arguments)
        except ToolError as err:
            if code is not None:
                assert err.code == code, (err.code, err.message)
            assert dump(db, self.env) == before, "a refused call must leave the state untouched"
            return err
        raise AssertionError(f"{name} should have raised ToolError({code or ''})")
