"""A template build or clone that finds PostgreSQL's shared lock table full (SQLSTATE 53200) is
retried; any other error, and the last attempt's, is raised as it came."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import OperationalError

from app.storage.postgres import db


class _DriverError(Exception):
    def __init__(self, sqlstate: str):
        super().__init__(f"sqlstate {sqlstate}")
        self.sqlstate = sqlstate


def _failing(times: int, sqlstate: str):
    calls: list[int] = []

    def ddl() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise OperationalError("CREATE TABLE ...", {}, _DriverError(sqlstate))
        return "built"

    return ddl, calls


@pytest.fixture(autouse=True)
def _no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(db.time, "sleep", lambda _s: None)


def test_lock_table_full_is_retried_until_it_passes() -> None:
    ddl, calls = _failing(2, db.LOCK_TABLE_FULL)
    assert db.retry_when_lock_table_full(ddl) == "built"
    assert len(calls) == 3


def test_lock_table_full_every_time_raises_after_the_last_attempt() -> None:
    ddl, calls = _failing(99, db.LOCK_TABLE_FULL)
    with pytest.raises(OperationalError):
        db.retry_when_lock_table_full(ddl)
    assert len(calls) == db.DDL_ATTEMPTS


def test_other_errors_are_not_retried() -> None:
    ddl, calls = _failing(1, "42P07")  # duplicate_table
    with pytest.raises(OperationalError):
        db.retry_when_lock_table_full(ddl)
    assert len(calls) == 1
