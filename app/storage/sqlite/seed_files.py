"""Seed files: snapshot images on disk sessions are born from by a kernel copy, bounded by bytes.

`snapshots/<env>/.seed/<key>-<digest>.wal` is a snapshot's image, WAL-marked, named by a digest
of its content (a rebuilt or migrated snapshot never reuses a stale one). A copy from it
(`copy_file_range`) is cheaper than writing the image from memory, but only from a snapshot's
second session on, so the file is written at its second seed in this process. The files are a
cache bounded by bytes (`seed_file_cache_mb`), least recently used deleted; losing one loses
nothing (it is rebuilt from the template and the task's seed). Workers share the directory,
each accounting for the files it uses (adopting those it finds at start, oldest first); a copy
from a file another worker deleted fails with FileNotFoundError, and the Store writes it again.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from app.core.lru import LRU
from app.storage.sqlite import db as sqlite_db


def _unlink(_name: str, path: Path) -> None:
    path.unlink(missing_ok=True)


class SeedFiles:
    """The seed files of one environment's snapshots, at most `max_bytes` of them."""

    def __init__(self, directory: Path, max_bytes: int):
        self.directory = directory
        self._files: LRU[str, Path] = LRU(2**31, _unlink, max_bytes=max_bytes, size_of=_allocated)
        self._lock = threading.Lock()
        self._adopt()

    def _adopt(self) -> None:
        """Count the files already there (a restart, another worker) against the bound."""
        try:
            found = [(p.stat().st_mtime, p) for p in self.directory.glob("*.wal")]
        except OSError:
            return
        with self._lock:
            for _mtime, path in sorted(found):
                self._files.put(path.name, path)

    def path_for(self, key: str, image: bytes) -> Path:
        digest = hashlib.blake2b(image, digest_size=12).hexdigest()
        return self.directory / f"{key}-{digest}.wal"

    def write(self, key: str, image: bytes) -> Path:
        """The snapshot's seed file, written once (atomically) per content; marks it used."""
        path = self.path_for(key, image)
        if not path.exists():
            sqlite_db.write_image(path, image, wal=True)
            self.forget(path)  # weighed again below, as written
        self.touch(path)
        return path

    def touch(self, path: Path) -> None:
        """Mark the file used (and counted, if it exists)."""
        with self._lock:
            if path.name in self._files:
                self._files.get(path.name)
            elif path.exists():
                self._files.put(path.name, path)

    def forget(self, path: Path) -> None:
        with self._lock:
            self._files.pop(path.name)

    @property
    def bytes(self) -> int:
        return self._files.bytes

    def __len__(self) -> int:
        return len(self._files)


def _allocated(path: Path) -> int:
    try:
        return path.stat().st_blocks * 512
    except OSError:
        return 0
