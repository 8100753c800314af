"""Read-only views of session databases after a run: list, table rows, diffs, copies, re-verify.

Shared by `stategym sessions ...` and the `/admin` API, on either backend: sessions are read
through the backend's read-only view (app/storage/base.py `ReadOnlyView`: a SQLite file opened
`mode=ro`/`immutable=1`, or a PostgreSQL schema in a READ ONLY transaction), reached only through
`check_session_id`, and tables and columns named by a user are checked against the environment's
metadata; values are bound as parameters. Seed and gold states come from the SQLite snapshot
images under the data dir on both backends.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Table, func, select

from app.clock import naive_utcnow
from app.core.tasks import task_from_data
from app.errors import BadRequest, SessionNotFound, SessionUnavailable
from app.registry import load_environment
from app.sdk.environment import Environment
from app.storage.base import ControlStore, NotOnDisk, ReadOnlyView
from app.storage.control import REWARD_OPS, SessionQuery, SessionRecord
from app.storage.images import Store, read_only_image
from app.storage.seeding import parse_now
from app.storage.snapshots import Snapshot, check_session_id
from app.verify.gold import GoldCache, replay, state_of_image
from app.verify.session_verify import verify_state
from app.verify.state.diff import describe, diff_states, summarize
from app.verify.state.dump import DbState, dump_state
from app.verify.state.raw_values import raw_column, reader

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")  # environment names, before they join a path
_KEY_RE = re.compile(r"^[0-9a-f]{32}$")  # snapshot and gold keys
_DURATION_RE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


# --- parsing user input ----------------------------------------------------------------------
def parse_duration(text: str) -> timedelta:
    """'30m', '12h', '7d', '2w' -> timedelta."""
    match = _DURATION_RE.fullmatch(text.strip().lower())
    if not match:
        raise BadRequest(f"{text!r} is not a duration; use e.g. 30m, 12h, 7d or 2w")
    try:
        return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    except OverflowError:
        raise BadRequest(f"{text!r} is longer than any duration this server handles") from None


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """A duration ago ('2h') or an ISO date/time, as naive UTC (like the control DB)."""
    now = now or utcnow()
    if _DURATION_RE.fullmatch(text.strip().lower()):
        try:
            return now - parse_duration(text)
        except OverflowError:  # further back than year 1
            return datetime.min
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(f"{text!r} is neither a duration (7d) nor an ISO date") from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def parse_reward(text: str) -> tuple[str, float]:
    """'1' or '==1', '<1', '>=0.5' -> (operator, value)."""
    text = text.strip()
    for op in sorted(REWARD_OPS, key=len, reverse=True):
        if text.startswith(op):
            rest = text[len(op) :]
            break
    else:
        op, rest = "==", text
    try:
        value = float(rest)
        if not math.isfinite(value):
            raise ValueError(rest)
        return op, value
    except ValueError:
        raise BadRequest(f"{text!r} is not a reward filter; use e.g. 1, '<1' or '>=0.5'") from None


def session_query(
    *,
    env: str | None,
    task_id: str | None,
    status: str | None,
    reward: str | None,
    since: str | None,
    limit: int,
    offset: int = 0,
) -> SessionQuery:
    """The filters `sessions list` and /admin take as text, parsed once (BadRequest if not)."""
    op, value = parse_reward(reward) if reward is not None else (None, None)
    return SessionQuery(
        env=env,
        task_id=task_id,
        status=status,
        reward_op=op,
        reward=value,
        since=parse_since(since) if since else None,
        limit=limit,
        offset=offset,
    )


def parse_where(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        column, sep, value = item.partition("=")
        if not sep or not column.strip():
            raise BadRequest(f"--where {item!r}: expected column=value")
        out[column.strip()] = value
    return out


def coerce(table: Table, column: str, raw: str) -> Any:
    """A --where value (text) as the column's Python type, so it binds like a stored value."""
    if raw.lower() in ("null", "none"):
        return None
    try:
        python_type = table.c[column].type.python_type
    except NotImplementedError:
        return raw
    try:
        if python_type is bool:
            if raw.lower() not in ("1", "0", "true", "false"):
                raise ValueError(raw)
            return raw.lower() in ("1", "true")
        if python_type in (int, float, Decimal):
            value = python_type(raw)
            if python_type is int and not -(2**63) <= value < 2**63:  # SQLite's integer range
                raise ValueError(raw)
            return value
        if python_type is datetime:
            parsed = datetime.fromisoformat(raw)
            return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed
        if python_type is date:
            return date.fromisoformat(raw)
    except (ValueError, ArithmeticError):
        raise BadRequest(
            f"--where {column}={raw!r}: not a valid {python_type.__name__} "
            f"for {table.name}.{column}"
        ) from None
    return raw


def utcnow() -> datetime:
    return naive_utcnow()


def jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.hex()
    return value


def record_fields(record: SessionRecord) -> dict[str, Any]:
    """A session's control row as JSON: id, env, task, status, reward and its times."""
    return {
        "id": record.id,
        "env": record.env,
        "task_id": record.task_id,
        "status": record.status,
        "reward": record.reward,
        "created_at": jsonable(record.created_at),
        "verified_at": jsonable(record.verified_at),
        "closed_at": jsonable(record.closed_at),
    }


def record_summary(record: SessionRecord, file_present: bool | None = None) -> dict[str, Any]:
    verify = record.verify or {}
    out = {
        **record_fields(record),
        "failure_reason": verify.get("failure_reason"),
        "resources_session_id": record.resources_session_id,
    }
    if file_present is not None:
        out["file_present"] = file_present
    return out


@dataclass
class Inspector:
    """Read-only access to one data dir's sessions."""

    data_dir: Path  # snapshot and gold images (both backends)
    control: ControlStore
    view: ReadOnlyView
    # Environments the caller already holds (e.g. the server's); others come from the registry.
    envs: Mapping[str, Environment] | None = None
    # The CLI may rebuild a missing seed snapshot (a cache file); the admin API never writes.
    rebuild_missing: bool = True
    env_loader: Callable[[str], Environment] = load_environment

    # --- records -----------------------------------------------------------------------------
    def query(self, query: SessionQuery) -> list[SessionRecord]:
        return self.control.query(query)

    def record(self, session_id: str) -> SessionRecord:
        record = self.control.get(check_session_id(session_id))
        if record is None:
            raise SessionNotFound(f"session {session_id} is unknown in {self.data_dir}")
        return record

    def env_of(self, record: SessionRecord) -> Environment:
        if self.envs and record.env in self.envs:
            return self.envs[record.env]
        try:
            return self.env_loader(record.env)
        except (KeyError, ImportError) as exc:
            raise SessionUnavailable(
                f"session {record.id} belongs to environment {record.env!r}, "
                f"which this installation cannot load ({exc})"
            ) from None

    def file_present(self, record: SessionRecord) -> bool:
        """The session's database is still there (a file, or a schema)."""
        return self.view.present(record)

    @contextmanager
    def connection(self, record: SessionRecord) -> Iterator[Connection]:
        """A read-only SQLAlchemy connection on the session's database."""
        with self.view.connect(record) as conn:
            yield conn

    @contextmanager
    def scratch(self, record: SessionRecord) -> Iterator[Connection]:
        """A connection on the session's state where its step log can be read and undone,
        nothing kept (`ReadOnlyView.scratch`): what a timeline's step rewards need."""
        with self.view.scratch(record, self.env_of(record)) as conn:
            yield conn

    # --- views -------------------------------------------------------------------------------
    def tables(self, record: SessionRecord) -> dict[str, Any]:
        env = self.env_of(record)
        meta = self.view.meta(record)
        with self.connection(record) as c:
            counts = {
                t.name: c.execute(select(func.count()).select_from(t)).scalar_one()
                for t in env.metadata.sorted_tables
            }
        return {"tables": counts, "meta": meta}

    def table_of(self, record: SessionRecord, name: str) -> Table:
        tables = self.env_of(record).metadata.tables
        table = tables.get(name)
        if table is None:
            raise BadRequest(f"no table {name!r} in {record.env}; tables are {sorted(tables)}")
        return table

    def rows(
        self,
        record: SessionRecord,
        table_name: str,
        where: Mapping[str, str] | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> dict[str, Any]:
        table = self.table_of(record, table_name)
        conditions = []
        for column, raw in (where or {}).items():
            if column not in table.c:
                raise BadRequest(
                    f"no column {column!r} in {table.name}; columns are {list(table.c.keys())}"
                )
            conditions.append(table.c[column] == coerce(table, column, raw))
        pk = list(table.primary_key.columns)
        count = select(func.count()).select_from(table).where(*conditions)
        with self.connection(record) as c:
            # Raw reads: a value an agent wrote that its column's type cannot read is shown
            # tagged, never raised (app/verify/state/raw_values.py).
            columns = list(table.c)
            reads = [reader(col, c.dialect) for col in columns]
            raw_columns = [raw_column(col, c.dialect) for col in columns]
            query = select(*raw_columns).where(*conditions).order_by(*pk)
            query = query.limit(limit).offset(offset)
            total = c.execute(count).scalar_one()
            rows = [
                [jsonable(read(v)) for read, v in zip(reads, row, strict=True)]
                for row in c.execute(query)
            ]
        return {
            "table": table.name,
            "columns": list(table.c.keys()),
            "rows": rows,
            "total": total,
            "limit": limit,
            "offset": offset,
        }

    def diff(self, record: SessionRecord, against: str = "seed", limit: int = 20) -> dict[str, Any]:
        """Per table, rows added / removed / changed from the seed (or gold) to the session."""
        if against not in ("seed", "gold"):
            raise BadRequest(f"--against must be 'seed' or 'gold', not {against!r}")
        env = self.env_of(record)
        with self.connection(record) as c:
            final = dump_state(c, env.metadata.tables, env.compare)
        base = self._seed_state(record, env) if against == "seed" else self._gold_state(record, env)
        # From the seed: what the session wrote, as stored; from the gold: what differs from it.
        diff = diff_states(base, final, env.compare, exact=against == "seed")
        return {
            "session_id": record.id,
            "against": against,
            "tables": summarize(diff, limit),
            "summary": describe(diff) or "no differences",
        }

    def _snapshot(self, record: SessionRecord, env: Environment) -> Snapshot:
        if not _KEY_RE.fullmatch(record.snapshot_key) or not _NAME_RE.fullmatch(env.name):
            raise SessionUnavailable(f"session {record.id} has an invalid snapshot key")
        task = task_from_data(record.task)
        path = self.data_dir / "snapshots" / env.name / f"{record.snapshot_key}.sqlite"
        if path.is_file():
            meta_now = task.seed.get("now") if task.seed else None
            return Snapshot(
                record.snapshot_key, read_only_image(path), parse_now(meta_now, env.default_now)
            )
        store = Store(self.data_dir, env)
        # Built in memory from the template (nothing written) unless even that is missing.
        if not self.rebuild_missing and not store.template_path.is_file():
            raise NotOnDisk(
                f"the seed snapshot of session {record.id} is not on disk; "
                "`stategym sessions diff` rebuilds it"
            )
        return store.snapshot(task)

    def _seed_state(self, record: SessionRecord, env: Environment) -> DbState:
        return state_of_image(env, self._snapshot(record, env).image)

    def _gold_state(self, record: SessionRecord, env: Environment) -> DbState:
        task = task_from_data(record.task)
        path = self.data_dir / "gold" / env.name / f"{task.gold_key}.sqlite"
        if path.is_file():
            return state_of_image(env, read_only_image(path))
        # Not cached on disk yet: replay the reference solution in memory (nothing is written).
        conn, engine, _failures = replay(env, self._snapshot(record, env), task)
        try:
            with engine.connect() as c:
                return dump_state(c, env.metadata.tables, env.compare)
        finally:
            engine.dispose()
            conn.close()

    def image(self, record: SessionRecord) -> bytes:
        """The session as one SQLite file (SQLite backend; Unsupported on PostgreSQL)."""
        return self.view.image(record)

    def export(self, record: SessionRecord, out: Path) -> int:
        """Write the session as one SQLite file to `out`; returns the size in bytes."""
        if out.exists():
            raise BadRequest(f"{out} exists; choose a new file name")
        image = self.view.image(record)
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        tmp.write_bytes(image)
        os.replace(tmp, out)
        return out.stat().st_size

    def remove(self, record: SessionRecord, *, dry_run: bool = False) -> int:
        """Delete the session's database (not with `dry_run`); returns the bytes freed."""
        return self.view.remove(record, dry_run=dry_run)

    def gold_cache(self, env: Environment) -> GoldCache:
        """Gold states of `env`'s tasks, built from the snapshots under the data dir."""
        return GoldCache(Store(self.data_dir, env), capacity=4)

    def reverify(self, record: SessionRecord, diff_limit: int = 20) -> dict[str, Any]:
        """Verify the session again, offline, against the task stored at seed time."""
        env = self.env_of(record)
        task = task_from_data(record.task)
        gold = GoldCache(Store(self.data_dir, env), capacity=4)
        response, note = carried_answer(task.expected_outputs, record.verify)
        with self.connection(record) as conn:
            result = verify_state(
                env=env,
                gold=gold,
                engine=conn,  # type: ignore[arg-type]  # a Session binds either
                task=task,
                response=response,
                diff_limit=diff_limit,
            )
        return {
            "session_id": record.id,
            **result,
            "stored_reward": record.reward,
            "matches_stored": record.reward is not None and record.reward == result["reward"],
            "note": note,
        }


def carried_answer(expected: tuple[str, ...], stored: dict[str, Any] | None) -> tuple[Any, str]:
    """The final answer is not stored, so the original outputs check is carried over.

    Returns a response whose text holds exactly the expected outputs the original verify found,
    so the re-run takes the same code path and reaches the same outputs verdict.
    """
    if not expected:
        return None, "the task checks no final answer; state re-verified"
    if stored is None:
        return None, "never verified: no final answer on record, expected outputs count as missing"
    missing = set((stored.get("verification") or {}).get("missing_outputs") or [])
    found = [e for e in expected if e not in missing]
    text = "\n".join(found)
    message = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }
    return {
        "output": [message]
    }, "state re-verified; outputs check carried over from the stored verify"
