"""A bounded pool of pre-cloned session schemas per template, refilled off the request path.

A seed that finds a ready clone renames it (`ALTER SCHEMA ... RENAME`) instead of cloning the
template (docs/postgres.md). Pooled schemas are named `<prefix>_p_<32 hex>`, never match the
session pattern (`<prefix>_s_%`), and hold exactly what a fresh clone holds. The store's one
template is the environment's base (sessions add their seed rows: postgres/seed_rows.py).
- Bounded: up to `per_snapshot` ready schemas for each of the `max_templates` templates taken
  from most recently (the first seed clones); sessions deleted at close come back reset
  (app/storage/postgres/recycle.py), up to `keep` of them. An older template's are dropped.
- Off the request path: one daemon thread clones; a seed only pops a name (under a lock).
- Dispose drops every pooled schema this process made; `sweep()` at start drops those a crash
  left. If another replica's sweep drops a listed schema, the rename fails and the seed clones.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from app.storage.postgres.db import checked_schema, drop_schema_sql, drop_schemas_sql, quoted

log = logging.getLogger(__name__)

# Clones the named template into a new schema of the given name (one transaction).
CloneInto = Callable[[str, str], None]
# Templates whose schemas the pool keeps ready. The store takes from one (the base template);
# when it took from one per task, a training run (each task's group seeded at once, never
# again) grew the catalog without end.
MAX_TEMPLATES = 16
# Returned (recycled) schemas kept ready per template: about the sessions in flight at once of a
# training run's server (c=64 in bench/soak.py).
KEEP_RETURNED = 64
# Pooled schemas dropped per transaction at shutdown: each takes ~70 locks, and the server's
# lock table holds max_locks_per_transaction (64) x max_connections for all transactions.
DROP_BATCH = 8


class SchemaPool:
    def __init__(
        self,
        engine: Engine,
        prefix: str,
        per_snapshot: int,
        clone_into: CloneInto,
        max_templates: int = MAX_TEMPLATES,
        keep: int = KEEP_RETURNED,
    ):
        self.engine = engine
        self.max_templates = max_templates
        self.keep = max(keep, 2 * per_snapshot)  # ready schemas of a template kept at most
        self.prefix = checked_schema(prefix)
        self.per_snapshot = per_snapshot
        self._clone_into = clone_into
        # template schema -> ready pooled schemas, least recently taken first
        self._ready: OrderedDict[str, deque[str]] = OrderedDict()
        self._doomed: list[str] = []  # schemas of evicted templates, dropped by the fill thread
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def pattern(self) -> str:
        """LIKE pattern of pooled schemas (underscores escaped)."""
        return f"{self.prefix}\\_p\\_%"

    def new_name(self) -> str:
        return checked_schema(f"{self.prefix}_p_{uuid.uuid4().hex}")

    # --- the request path ----------------------------------------------------------------------
    def take(self, template: str) -> str | None:
        """A ready clone of `template` (now the caller's to rename), or None; asks for refills."""
        with self._lock:
            if self._stopped:
                return None
            ready = self._ready.setdefault(template, deque())
            self._ready.move_to_end(template)
            while len(self._ready) > self.max_templates:
                _, evicted = self._ready.popitem(last=False)
                self._doomed.extend(evicted)
            # The schema returned last (LIFO): a few schemas per template stay in use, so each
            # PostgreSQL backend keeps their catalog entries, foreign-key plans and open files
            # warm; FIFO rotated through every pooled schema (bench/history/rounds.md, round 7).
            name = ready.pop() if ready else None
            self._start_locked()
        self._wake.set()
        return name

    def rename(self, pooled: str, target: str) -> bool:
        """Rename a taken pooled schema to `target`; False (the caller clones) if it is gone."""
        try:
            rename = (
                f"ALTER SCHEMA {quoted(checked_schema(pooled))} "
                f"RENAME TO {quoted(checked_schema(target))}"
            )
            with self.engine.begin() as conn:
                conn.exec_driver_sql(rename)
            return True
        except DBAPIError as exc:  # dropped by a replica's start-up sweep, or target exists
            log.warning("pooled schema %s not usable (%s); cloning", pooled, exc.orig)
            self.drop_quietly(pooled)
            return False

    def has_room(self, template: str) -> bool:
        """Whether a ready schema of `template` would be kept (`put`)."""
        with self._lock:
            return self._room_locked(template)

    def _room_locked(self, template: str) -> bool:
        # Up to `keep` (at least twice the refill target): a session returned after its
        # replacement was cloned is kept, so with deleting retention the pool refills from closes
        # alone. Only returned schemas go beyond the target, so at most as many wait as were in
        # use at once; dropping them instead meant cloning new ones at the next burst, and every
        # new schema left its foreign-key plans in every backend, which each rename walks: the
        # backends' CPU per rollout grew with every drop-and-clone (bench/history/postgres.md).
        ready = self._ready.get(template)
        return not self._stopped and ready is not None and len(ready) < self.keep

    def put(self, template: str, name: str) -> bool:
        """Keep `name`, a schema reset to `template`'s state (a recycled session), as ready;
        False when there is no room for it (the caller drops it)."""
        with self._lock:
            if not self._room_locked(template):
                return False
            self._ready[template].append(name)
            return True

    # --- refills -------------------------------------------------------------------------------
    def _start_locked(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._fill_loop, name="stategym-pg-schema-pool", daemon=True
            )
            self._thread.start()

    def _next_refill(self) -> str | None:
        with self._lock:
            if self._stopped:
                return None
            for template, ready in self._ready.items():
                if len(ready) < self.per_snapshot:
                    return template
        return None

    def _fill_loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            self._drop_doomed()
            while (template := self._next_refill()) is not None:
                self._drop_doomed()  # refills may never pause while seeds keep coming
                name = self.new_name()
                try:
                    self._clone_into(template, name)
                except Exception:  # noqa: BLE001 - a pool miss is a slower seed, not an error
                    log.exception("pre-cloning %s failed; the pool stops refilling it", template)
                    self.drop_quietly(name)
                    with self._lock:
                        self._ready.pop(template, None)
                    continue
                with self._lock:
                    ready = None if self._stopped else self._ready.get(template)
                    if ready is not None:
                        ready.append(name)
                        continue
                self.drop_quietly(name)  # disposed, or the template evicted, while cloning
            with self._lock:
                if self._stopped:
                    return

    def _drop_doomed(self) -> None:
        with self._lock:
            doomed, self._doomed = self._doomed, []
        for name in doomed:
            self.drop_quietly(name)

    # --- lifecycle -----------------------------------------------------------------------------
    def ready_count(self) -> dict[str, int]:
        with self._lock:
            return {template: len(ready) for template, ready in self._ready.items()}

    def sweep(self) -> int:
        """Drop every pooled schema under the prefix (left by a crashed process); their count."""
        with self.engine.connect() as conn:
            names = [
                row[0]
                for row in conn.execute(
                    text("SELECT nspname FROM pg_namespace WHERE nspname LIKE :p"),
                    {"p": self.pattern()},
                )
            ]
        self.drop_all_quietly(names)
        return len(names)

    def dispose(self) -> None:
        """Stop refilling and drop every pooled schema this process made."""
        with self._lock:
            self._stopped = True
            thread, self._thread = self._thread, None
            names = [name for ready in self._ready.values() for name in ready] + self._doomed
            self._ready.clear()
            self._doomed = []
        self._wake.set()
        if thread is not None:
            thread.join()
        self.drop_all_quietly(names)

    def drop_all_quietly(self, names: list[str]) -> None:
        """Drop `names`, a few per transaction (up to 64 wait at shutdown; one transaction
        each took longer than a server is given to stop), else one by one."""
        for i in range(0, len(names), DROP_BATCH):
            batch = names[i : i + DROP_BATCH]
            try:
                with self.engine.begin() as conn:
                    conn.exec_driver_sql(drop_schemas_sql(batch))
            except DBAPIError:  # the lock table full, say: each on its own
                for name in batch:
                    self.drop_quietly(name)

    def drop_quietly(self, name: str) -> None:
        try:
            with self.engine.begin() as conn:
                conn.exec_driver_sql(drop_schema_sql(name))
        except DBAPIError:
            log.warning("could not drop pooled schema %s", name, exc_info=True)
