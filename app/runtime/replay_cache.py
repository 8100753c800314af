"""The files a verify without a session leaves: a bounded cache, oldest use deleted first.

A cookieless verify (NeMo Gym's stateless reverify) builds its task's snapshot and gold state,
and both are written to the data dir (`snapshots/`, `gold/`). For a task some session was seeded
with they were there already and stay; for any other task (a client may send a new `seed.now`
each time) the files it created are kept here, at most `replay_cache_files` files and
`replay_cache_mb` MiB, least recently used deleted first. Deleting them is safe: a snapshot is
rebuilt from the template and the task's seed on its next use, and a gold file only serves
inspection (verify keeps its gold state in memory).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from pathlib import Path


class ReplayFiles:
    """An LRU of files by count and bytes; an evicted file is deleted (thread-safe)."""

    def __init__(self, max_files: int, max_bytes: int):
        self.max_files = max_files
        self.max_bytes = max_bytes
        self._files: OrderedDict[Path, int] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def touch(self, paths: list[Path]) -> None:
        """Mark kept files as just used (a replay of a task whose files are here already)."""
        with self._lock:
            for path in paths:
                if path in self._files:
                    self._files.move_to_end(path)

    def keep(self, paths: list[Path]) -> None:
        """Take the files a replay created into the cache, then delete the least recently
        used until both bounds hold."""
        evicted: list[Path] = []
        with self._lock:
            for path in paths:
                try:
                    size = path.stat().st_size
                except FileNotFoundError:
                    continue
                self._bytes += size - self._files.pop(path, 0)
                self._files[path] = size
            while self._files and (
                len(self._files) > self.max_files or self._bytes > self.max_bytes
            ):
                old, size = self._files.popitem(last=False)
                self._bytes -= size
                evicted.append(old)
        for path in evicted:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    @property
    def files(self) -> int:
        return len(self._files)

    @property
    def bytes(self) -> int:
        return self._bytes
