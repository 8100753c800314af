"""Disk budgets of the writes a client asks for in bulk: forks and restores (docs/steps.md).

Three bounds, all settings: a session's size (`session_max_db_mb`: a restored image larger than
a session may grow is refused, 413), one request's writes (`fork_max_mb`: n children times the
parent's size, 413), and the server's whole session state (`data_max_mb`, and the data dir's
free disk: 507). Every check runs before anything is written, so a refused fork or restore
leaves nothing behind; writes in flight in this process are reserved, so two concurrent forks
cannot both pass one remaining margin (across worker processes the margin is per process:
the free-disk check and SQLite's per-session cap still hold there).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.errors import RequestOverBudget, StorageBudget
from app.settings import Settings
from app.storage.base import SessionBackend, SessionHandle

MIB = 2**20
# Room always left on the data dir's disk: the control database, WAL checkpoints and logs
# must still be writable after a fork.
FREE_DISK_RESERVE = 64 * MIB
# The server's state is measured again (a walk of the data dir) at most this often; writes of
# this process in between are added as they finish. Others' seeds in between are not counted.
MEASURE_SECONDS = 2.0


def _mib(size: int) -> str:
    return f"{size / MIB:.1f} MiB"


def directory_bytes(root: Path) -> int:
    """Bytes of every file under `root` (0 when it does not exist)."""
    total, stack = 0, [root]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except FileNotFoundError:  # removed while we walked
                continue
    return total


class DiskBudget:
    """Checks and reserves the bytes a fork or restore will write (thread-safe)."""

    def __init__(self, settings: Settings, backend: SessionBackend):
        self.data_dir = settings.data_dir
        self.session_bytes = settings.session_max_db_mb * MIB
        self.request_bytes = settings.fork_max_mb * MIB
        self.total_bytes = settings.data_max_mb * MIB if settings.data_max_mb else None
        self.backend = backend
        self._pending = 0  # bytes of writes in flight
        # The last measure of the server's state, and what this process wrote since: a fork
        # does not walk every session file again when another one did a moment ago.
        self._measured: tuple[float, int] | None = None
        self._written_since = 0
        self._lock = threading.Lock()

    # --- sizes -----------------------------------------------------------------------------
    def size_of(self, handle: SessionHandle) -> int:
        """The session's current size in bytes (what one copy of it writes)."""
        return self.backend.session_bytes(handle)

    def used(self) -> int:
        """The session state this server holds now: the data dir's files, plus what the
        backend holds elsewhere (this deployment's PostgreSQL schemas)."""
        return directory_bytes(self.data_dir) + self.backend.stored_bytes()

    # --- checks ----------------------------------------------------------------------------
    def check_image(self, size: int) -> None:
        """A restored image may be no larger than a session may grow (413)."""
        if size > self.session_bytes:
            raise RequestOverBudget(
                f"the export's database is {_mib(size)}, more than a session may hold "
                f"({_mib(self.session_bytes)}, STATEGYM_SESSION_MAX_DB_MB); nothing was written",
                budget_bytes=self.session_bytes,
                needed_bytes=size,
            )

    def check_fork(self, copies: int, each: int) -> None:
        """n copies of a session of `each` bytes must fit one request's budget (413)."""
        need = copies * each
        if need > self.request_bytes:
            fits = max(0, self.request_bytes // max(each, 1))
            raise RequestOverBudget(
                f"{copies} copies of a {_mib(each)} session would write {_mib(need)}, more than "
                f"one fork may ({_mib(self.request_bytes)}, STATEGYM_FORK_MAX_MB); nothing was "
                f"written",
                hint=f"Ask for at most {fits} children at once, or raise STATEGYM_FORK_MAX_MB.",
                budget_bytes=self.request_bytes,
                needed_bytes=need,
            )

    def _used_now(self) -> int:
        """`used()` with the data dir walked at most every MEASURE_SECONDS, plus this
        process's writes to it since (called under the lock). PostgreSQL's schemas are one
        query: read every time, so they include every fork and restore already done."""
        now = time.monotonic()
        if self._measured is None or now - self._measured[0] > MEASURE_SECONDS:
            self._measured, self._written_since = (now, directory_bytes(self.data_dir)), 0
        return self._measured[1] + self._written_since + self.backend.stored_bytes()

    @contextmanager
    def reserve(self, need: int, what: str) -> Iterator[None]:
        """Hold `need` bytes of the server's budget while `what` writes them; 507 (nothing
        written) when the budget or the data dir's disk has no room for them."""
        with self._lock:
            used = self._used_now() + self._pending
            if self.total_bytes is not None and used + need > self.total_bytes:
                raise StorageBudget(
                    f"{what} would write {_mib(need)}, and this server already holds "
                    f"{_mib(used)} of its {_mib(self.total_bytes)} budget "
                    "(STATEGYM_DATA_MAX_MB); nothing was written",
                    hint="Close and remove sessions (`stategym sessions gc`), or raise "
                    "STATEGYM_DATA_MAX_MB.",
                    budget_bytes=self.total_bytes,
                    used_bytes=used,
                    needed_bytes=need,
                )
            if self.backend.capabilities.raw_sqlite:
                self._check_free_disk(need + self._pending, what)
            self._pending += need
        done = False
        try:
            yield
            done = True
        finally:
            with self._lock:
                self._pending -= need
                if done and self.backend.capabilities.raw_sqlite:  # the data dir grew
                    self._written_since += need

    def _check_free_disk(self, need: int, what: str) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        disk = os.statvfs(self.data_dir)
        free = disk.f_bavail * disk.f_frsize
        if need + FREE_DISK_RESERVE > free:
            raise StorageBudget(
                f"{what} would write {_mib(need)}, and the data dir's disk has {_mib(free)} "
                "free; nothing was written",
                hint="Free disk space (e.g. `stategym sessions gc`) and retry.",
                needed_bytes=need,
                free_bytes=free,
            )
