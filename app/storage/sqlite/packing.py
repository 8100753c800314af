"""Closed sessions kept by retention, stored as the pages that differ from a base image.

A retail session file is ~800 KB, ~80 % of its pages its template's: a kept session is stored
as `<id>.sqlite.pack` (~40 KB: the pages that differ, zlib-compressed), its base once per
content as `sessions/<env>/.bases/<sha256>.sqlite`, never rewritten. Unpacking gives back the
file's exact bytes (checked by their SHA-256), so every reader sees what the plain file held.

Format: MAGIC, a 4-byte length, a JSON header (base and image SHA-256, page size, image size,
changed page count), one zlib stream of the changed pages' numbers (big-endian uint32) and those
pages. A pack is written beside the file (fsynced temp file, rename, directory fsync) before the
file goes: a crash leaves one or the other whole; the plain file wins when both exist.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.core.lru import LRU
from app.errors import SessionUnavailable

PACK_SUFFIX = ".pack"
BASES_DIR = ".bases"
MAGIC = b"SGPACK1\n"
_LENGTH = struct.Struct(">I")
# zlib level 1: 42 KB for a retail session against level 6's 39, in 2.8 ms against 4.0 (the
# whole pack, read and checksum included; bench/history/soak.md).
ZLIB_LEVEL = 1
_PAGE_SIZES = {512 << shift for shift in range(8)}  # what SQLite allows: 512 to 65536
# Bases read back for unpacking, bounded by bytes (a few templates at most in practice).
BASE_CACHE_BYTES = 64 * 2**20


def pack_path(path: Path) -> Path:
    """Where the pack of session file `path` lives."""
    return path.with_name(path.name + PACK_SUFFIX)


def _sha256(data: bytes | bytearray | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durably(path: Path, data: bytes) -> None:
    """`data` at `path` atomically and on the disk before this returns."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def encode(image: bytes, base: bytes, base_sha256: str) -> bytes:
    """The pack of `image` against `base` (both SQLite database images of one page size)."""
    page_size = int.from_bytes(image[16:18], "big") or 65536
    if len(image) % page_size:
        raise ValueError(f"image size {len(image)} is not a multiple of its page size")
    view = memoryview(image)
    changed: list[int] = []
    for number in range(len(image) // page_size):
        start = number * page_size
        # bytes slices, not memoryview ones: their == is a memcmp (memoryview's is per item)
        if image[start : start + page_size] != base[start : start + page_size]:
            changed.append(number)
    body = zlib.compressobj(ZLIB_LEVEL)
    parts = [body.compress(struct.pack(f">{len(changed)}I", *changed))]
    for number in changed:
        parts.append(body.compress(view[number * page_size : (number + 1) * page_size]))
    parts.append(body.flush())
    header = {
        "base": base_sha256,
        "sha256": _sha256(image),
        "page_size": page_size,
        "size": len(image),
        "changed": len(changed),
    }
    head = json.dumps(header, sort_keys=True).encode()
    return MAGIC + _LENGTH.pack(len(head)) + head + b"".join(parts)


def header_of(pack: bytes) -> dict[str, Any]:
    if not pack.startswith(MAGIC):
        raise ValueError("not a session pack (bad magic)")
    (length,) = _LENGTH.unpack_from(pack, len(MAGIC))
    start = len(MAGIC) + _LENGTH.size
    header = json.loads(pack[start : start + length])
    if not isinstance(header, dict):
        raise ValueError("not a session pack (bad header)")
    return header


def decode(pack: bytes, base: bytes) -> bytes:
    """The exact image a pack was made from; ValueError when anything does not check out."""
    header = header_of(pack)
    start = len(MAGIC) + _LENGTH.size + _LENGTH.unpack_from(pack, len(MAGIC))[0]
    page_size, size, count = int(header["page_size"]), int(header["size"]), int(header["changed"])
    try:
        body = zlib.decompress(pack[start:])
    except zlib.error as exc:
        raise ValueError(f"the pack's pages do not decompress: {exc}") from None
    if len(body) != 4 * count + page_size * count:
        raise ValueError("the pack's pages are truncated")
    numbers = struct.unpack_from(f">{count}I", body)
    # Pages past the base's end are all in the pack, so its header cannot ask for more.
    end = max(len(base), (max(numbers) + 1) * page_size if numbers else 0)
    if page_size not in _PAGE_SIZES or size > end or size % page_size:
        raise ValueError(f"the pack's header does not fit its pages (size {size})")
    out = bytearray(base[:size])
    out.extend(bytes(size - len(out)))
    pages = memoryview(body)[4 * count :]
    for index, number in enumerate(numbers):
        if (number + 1) * page_size > size:
            raise ValueError(f"the pack names page {number} beyond the image's end")
        out[number * page_size : (number + 1) * page_size] = pages[
            index * page_size : (index + 1) * page_size
        ]
    if _sha256(out) != header["sha256"]:
        raise ValueError("the unpacked image does not match the pack's checksum")
    return bytes(out)


class Bases:
    """The content-addressed base images of one sessions directory, read through a cache."""

    def __init__(self, sessions_dir: Path):
        self.directory = sessions_dir / BASES_DIR
        self._lock = threading.Lock()
        self._cache: LRU[str, bytes] = LRU(64, max_bytes=BASE_CACHE_BYTES, size_of=len)

    def path(self, sha256: str) -> Path:
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise ValueError(f"bad base name {sha256!r}")
        return self.directory / f"{sha256}.sqlite"

    def ensure(self, image: bytes, sha256: str) -> None:
        """The base stored (once: an existing file of that name holds those bytes)."""
        path = self.path(sha256)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_durably(path, image)
        with self._lock:
            self._cache.put(sha256, image)

    def read(self, sha256: str) -> bytes:
        with self._lock:
            cached = self._cache.get(sha256)
        if cached is not None:
            return cached
        try:
            image = self.path(sha256).read_bytes()
        except FileNotFoundError:
            raise ValueError(f"its base image {BASES_DIR}/{sha256}.sqlite is missing") from None
        if _sha256(image) != sha256:
            raise ValueError(f"its base image {BASES_DIR}/{sha256}.sqlite is damaged")
        with self._lock:
            self._cache.put(sha256, image)
        return image


_BASES: dict[Path, Bases] = {}
_BASES_LOCK = threading.Lock()


def bases_of(sessions_dir: Path) -> Bases:
    """One `Bases` per sessions directory in this process (their caches shared)."""
    with _BASES_LOCK:
        return _BASES.setdefault(sessions_dir, Bases(sessions_dir))


def pack_file(path: Path, base: bytes, base_sha256: str) -> int | None:
    """Replace the closed session file `path` by its pack; the pack's size, or None when the file
    is not packable now (missing, a WAL beside it: a connection has it open or a checkpoint is
    owed)."""
    if path.with_name(path.name + "-wal").exists() or not path.is_file():
        return None
    try:
        image = path.read_bytes()
    except FileNotFoundError:  # the session was dropped meanwhile
        return None
    if image[:16] != b"SQLite format 3\x00":
        return None
    packed = encode(image, base, base_sha256)
    bases_of(path.parent).ensure(base, base_sha256)
    pack = pack_path(path)
    _write_durably(pack, packed)
    try:
        path.unlink()
    except FileNotFoundError:
        # Dropped while packing: whoever removed the file may have looked for the pack before it
        # was written, so it goes here (a remover that comes later finds it and removes it).
        pack.unlink(missing_ok=True)
        return None
    for suffix in ("-shm",):  # a reader's leftovers; no connection holds the file now
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    return len(packed)


def unpack_file(pack: Path, session_id: str) -> bytes:
    """The session image stored in `pack`; SessionUnavailable saying why when it cannot be."""
    try:
        data = pack.read_bytes()
        header = header_of(data)
        return decode(data, bases_of(pack.parent).read(str(header["base"])))
    except FileNotFoundError:
        raise
    except (ValueError, KeyError, struct.error, OSError) as exc:
        raise SessionUnavailable(
            f"session {session_id}'s packed database cannot be read: {exc}"
        ) from None


class Packer:
    """Packs closed session files of one environment against its template image."""

    def __init__(self, base_image: Callable[[], bytes]):
        self._base_image = base_image
        self._base: tuple[bytes, str] | None = None
        self._lock = threading.Lock()

    def base(self) -> tuple[bytes, str]:
        image = self._base_image()
        with self._lock:
            if self._base is None or self._base[0] is not image:
                self._base = (image, _sha256(image))
            return self._base

    def pack(self, path: Path) -> int | None:
        image, sha256 = self.base()
        return pack_file(path, image, sha256)


def pack_image(pack: Path) -> bytes:
    """The image a pack holds (ValueError saying why when it cannot be read)."""
    data = pack.read_bytes()
    return decode(data, bases_of(pack.parent).read(str(header_of(data)["base"])))


@contextmanager
def unpacked(pack: Path) -> Iterator[Path]:
    """The pack's session as its plain file, for a change in place (a migration): when the block
    ends the file is packed again against the same base; when it raises, the file goes and the
    pack stays as it was."""
    data = pack.read_bytes()
    base_sha256 = str(header_of(data)["base"])
    base = bases_of(pack.parent).read(base_sha256)
    plain = pack.with_name(pack.name[: -len(PACK_SUFFIX)])
    _write_durably(plain, decode(data, base))
    try:
        yield plain
    except BaseException:
        for suffix in ("", "-wal", "-shm"):
            plain.with_name(plain.name + suffix).unlink(missing_ok=True)
        raise
    if pack_file(plain, base, base_sha256) is None:
        raise ValueError(f"{plain.name} was left open by the change: not packed again")


def _is_closed(path: Path) -> bool:
    """The session file's own close mark (what every worker reads), read without a -wal."""
    from app.storage.meta import read_meta

    conn = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)
    try:
        return read_meta(conn).get("status") == "closed"
    except sqlite3.DatabaseError:
        return False  # not a database: left for `sessions show` to report
    finally:
        conn.close()


def pack_closed_files(data_dir: Path, env: str, *, dry_run: bool) -> list[tuple[str, int, int]]:
    """Pack the closed plain session files of one environment (a data dir from before packing,
    or a crash between a close and its pack), against its newest template: (file, bytes
    before, bytes after) per file packed. Open sessions (a -wal beside them) are left alone."""
    sessions_dir = data_dir / "sessions" / env
    templates = sorted(
        (data_dir / "templates" / env).glob("*.sqlite"), key=lambda p: p.stat().st_mtime
    )
    files = [
        p
        for p in sorted(sessions_dir.glob("*.sqlite"))
        if not p.with_name(p.name + "-wal").exists() and _is_closed(p)
    ]
    if files and not templates:
        raise ValueError(f"no template of {env} under {data_dir}/templates: serve it once first")
    done: list[tuple[str, int, int]] = []
    if not files:
        return done
    base = templates[-1].read_bytes()
    sha256 = _sha256(base)
    for path in files:
        before = path.stat().st_size
        if dry_run:
            after = len(encode(path.read_bytes(), base, sha256))
        else:
            packed = pack_file(path, base, sha256)
            if packed is None:  # opened meanwhile
                continue
            after = packed
        done.append((path.name, before, after))
    return done
