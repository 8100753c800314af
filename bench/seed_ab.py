"""Issue 20's seed changes, before and after in the same run, in process (no HTTP, no control DB).

    PYTHONPATH=. python -m bench.seed_ab [n]          # PostgreSQL part needs $STATEGYM_BENCH_PG_URL

- SQLite: a session file written from the in-memory image (what every seed does since
  2026-12-05) vs a kernel copy (`copy_file_range`) of a file holding the image (the seed files
  of issue 20, dropped when the write had become as cheap), interleaved, all retail tasks
  round-robin; and the blake2b digest that named a seed file, once per snapshot.
- PostgreSQL: a clone of the template (before, pool off) vs a rename of a pre-cloned schema (after,
  `pg_schema_pool` 4), one task, each seed after the pool has refilled (a rollout is longer than a
  clone), interleaved.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from app.registry import load_environment
from app.server.models import parse_seed_body
from bench.rollout import env_tasks


def _p50(samples: list[float]) -> float:
    return round(statistics.median(samples), 3)


def _kernel_copy(source: Path, path: Path) -> None:
    """What a seed did from a seed file: a kernel copy to a temp name, renamed (atomic)."""
    tmp = path.with_name(f".{path.name}.tmp")
    src = os.open(source, os.O_RDONLY)
    dst = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        size = os.fstat(src).st_size
        while size > 0:
            copied = os.copy_file_range(src, dst, size)
            if copied == 0:
                break
            size -= copied
    finally:
        os.close(dst)
        os.close(src)
    os.replace(tmp, path)


def sqlite_ab(n: int) -> dict[str, float]:
    from app.storage.sqlite import db as sqlite_db
    from app.storage.sqlite.store import Store

    env = load_environment("retail")
    data = Path(tempfile.mkdtemp(prefix="stategym-ab-"))
    store = Store(data, env)
    snapshots = [store.snapshot(parse_seed_body(t).task) for t in env_tasks("retail")]
    sources = []
    for i, s in enumerate(snapshots):
        sources.append(data / f"source-{i}.wal")
        sqlite_db.write_image(sources[-1], s.image, wal=True)
    written: list[float] = []
    copied: list[float] = []
    digests: list[float] = []
    for i in range(n):
        snap, source = snapshots[i % len(snapshots)], sources[i % len(snapshots)]
        for fn, out in (
            (lambda sid, s=snap: store.create_session_file(sid, s), written),
            (lambda sid, f=source: _kernel_copy(f, store.session_path(sid)), copied),
        ):
            sid = uuid.uuid4().hex
            t = time.perf_counter()
            fn(sid)
            out.append((time.perf_counter() - t) * 1e3)
            store.session_path(sid).unlink()
        t = time.perf_counter()
        hashlib.blake2b(snap.image, digest_size=12).hexdigest()
        digests.append((time.perf_counter() - t) * 1e3)
    return {
        "sqlite_image_write_ms": _p50(written),
        "sqlite_kernel_copy_ms": _p50(copied),
        "sqlite_seed_file_digest_ms": _p50(digests),
    }


def pg_ab(n: int, url: str) -> dict[str, float]:
    from app.storage.postgres.db import SchemaNames, drop_schema_sql, make_engine
    from app.storage.postgres.store import PgStore
    from app.storage.sqlite.store import Store

    env = load_environment("retail")
    prefix = f"sgab{uuid.uuid4().hex[:8]}"
    engine = make_engine(url, pool_size=4)
    data = Path(tempfile.mkdtemp(prefix="stategym-ab-"))
    task = parse_seed_body(env_tasks("retail")[0]).task
    plain = PgStore(Store(data, env), engine, SchemaNames(prefix), schema_pool=0)
    pooled = PgStore(Store(data, env), engine, SchemaNames(prefix), schema_pool=4)
    snap = plain.snapshot(task)
    made = [plain.create_session(uuid.uuid4().hex, snap), pooled.create_session("0" * 32, snap)]
    template = pooled.base_schema
    assert pooled.pool is not None
    before: list[float] = []
    after: list[float] = []
    hits = 0
    try:
        for _ in range(n):
            deadline = time.monotonic() + 30
            while pooled.pool.ready_count().get(template, 0) < 4 and time.monotonic() < deadline:
                time.sleep(0.01)
            hits += pooled.pool.ready_count().get(template, 0) > 0
            for store, out in ((plain, before), (pooled, after)):
                sid = uuid.uuid4().hex
                t = time.perf_counter()
                made.append(store.create_session(sid, snap))
                out.append((time.perf_counter() - t) * 1e3)
    finally:
        pooled.dispose()
        for schema in [*made, template]:  # one transaction each: locks per schema add up
            with engine.begin() as conn:
                conn.exec_driver_sql(drop_schema_sql(schema))
        engine.dispose()
    return {
        "pg_before_clone_ms": _p50(before),
        "pg_after_pool_ms": _p50(after),
        "pg_pool_hits": hits,
        "n": n,
    }


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    figures: dict[str, float] = sqlite_ab(n)
    url = os.environ.get("STATEGYM_BENCH_PG_URL")
    if url:
        figures.update(pg_ab(max(10, n // 5), url))
    for key, value in figures.items():
        print(f"{key:32} {value}")


if __name__ == "__main__":
    main()
