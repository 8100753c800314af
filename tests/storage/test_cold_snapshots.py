"""Snapshots built from a seed base equal those built the previous way, and nothing per task stays
on disk beyond bounded caches.

The previous build (`snapshot_image_by_tracking`: change-tracking triggers installed per task, the
seed through a fresh SQLAlchemy engine, the triggers dropped and the step log installed) is the
reference: the new one (a prepared seed base, the seed's rows recorded by the step log, plain
executemany) must give the same rows, schema, meta, an empty step log, and the same seed and gold
states and verify result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.core.lru import LRU
from app.core.tasks import task_from_data
from app.registry import load_environment
from app.storage.meta import SEED_CHANGES, read_meta
from app.storage.seeding import parse_seed_now
from app.storage.sqlite import db as sqlite_db
from app.storage.sqlite.snapshots import snapshot_image, snapshot_image_by_tracking
from app.storage.sqlite.store import Snapshot, Store
from app.storage.steplog import STEP_ROWS_TABLE, STEPS_TABLE
from app.verify.gold import GoldCache, replay
from app.verify.session_verify import verify_state
from tests.storage.test_change_tracking import _dump, load_fixture_tasks

ENVS = ["retail", "airline", "ledger", "workplace", "sql"]


def _view(image: bytes) -> dict[str, Any]:
    """Every row of every table (ours included), the schema and the meta of an image."""
    conn = sqlite_db.memory_from_image(image)
    try:
        schema = sorted(
            conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(),
            key=repr,
        )
        tables = [r[1] for r in schema if r[0] == "table"]
        rows = {
            t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables
        }
        meta = read_meta(conn)
        return {"schema": schema, "rows": rows, "meta": meta}
    finally:
        conn.close()


def _both(env_name: str, tmp_path: Path, row: dict[str, Any]) -> tuple[bytes, bytes, Any]:
    env = load_environment(env_name)
    store = Store(tmp_path / "data", env)
    task = task_from_data(row)
    now = parse_seed_now((task.seed or {}).get("now"), env.default_now)
    template = store.template_image()
    new = snapshot_image(env, template, task.seed, task.snapshot_key, now)
    old = snapshot_image_by_tracking(env, template, task.seed, task.snapshot_key, now)
    return new, old, task


@pytest.mark.parametrize("env_name", ENVS)
def test_a_snapshot_from_the_seed_base_equals_the_previous_build(
    tmp_path: Path, env_name: str
) -> None:
    """Same rows in every table, same schema (triggers included), same meta but for which rows
    the seed wrote (read from the step log now, from the tracking triggers before: a superset
    of the same rows), and an empty step log."""
    for row in load_fixture_tasks(env_name)[:6]:
        new, old, _task = _both(env_name, tmp_path, row)
        a, b = _view(new), _view(old)
        assert a["schema"] == b["schema"]
        assert a["rows"] == b["rows"]
        assert a["rows"][STEP_ROWS_TABLE] == [] and a["rows"][STEPS_TABLE] == []
        seeded_new = json.loads(a["meta"].pop(SEED_CHANGES))
        seeded_old = json.loads(b["meta"].pop(SEED_CHANGES))
        assert a["meta"] == b["meta"]
        # The same rows written; "#key" marks may be fewer (the log compares the key values).
        assert seeded_new["rows"] == seeded_old["rows"]
        plain = {t for t in seeded_old["tables"] if "#" not in t}
        assert plain <= set(seeded_new["tables"])


@pytest.mark.parametrize("env_name", ENVS)
def test_seed_gold_and_verify_equal_the_previous_build(tmp_path: Path, env_name: str) -> None:
    """The seed state (patched from the template's dump with the recorded rows) equals a whole
    read of the previous snapshot; the gold state and a verify of a gold session match too."""
    env = load_environment(env_name)
    store = Store(tmp_path / "data", env)
    gold = GoldCache(store, 16)
    for row in load_fixture_tasks(env_name)[:4]:
        _new, old, task = _both(env_name, tmp_path, row)
        conn = sqlite_db.memory_from_image(old)
        try:
            assert gold.seed_state(task) == _dump(conn, env, reuse=False)
        finally:
            conn.close()
        reference = Snapshot(task.snapshot_key, old, store.snapshot(task).now)
        conn, engine, _ = replay(env, reference, task)
        try:
            expected_gold = _dump(conn, env, reuse=False)
        finally:
            engine.dispose()
            conn.close()
        assert gold.get(task).state == expected_gold
        # A session replayed to the gold on each image verifies alike.
        results = []
        for image in (store.snapshot(task).image, old):
            snap = Snapshot(task.snapshot_key, image, reference.now)
            conn, engine, _ = replay(env, snap, task, session_id="s")
            try:
                result = verify_state(
                    env=env, gold=gold, engine=engine, task=task, response=None, diff_limit=5
                )
            finally:
                engine.dispose()
                conn.close()
            results.append({k: v for k, v in result.items() if "ms" not in k})
        assert results[0] == results[1]


@pytest.mark.parametrize("env_name", ENVS)
def test_a_new_tasks_seed_and_gold_states_on_its_snapshots_own_build_equal_fresh_clones(
    tmp_path: Path, env_name: str
) -> None:
    """A never-seen task's gold is built (as the server does, right after the first seed) on the
    connection that built its snapshot: that connection holds exactly the image, and the seed
    state, gold state, failed calls and seed-to-gold diff equal those of a cache given fresh
    clones only (the hand-off emptied before each build)."""
    env = load_environment(env_name)
    shared, fresh = Store(tmp_path / "shared", env), Store(tmp_path / "fresh", env)
    on_build, on_clones = GoldCache(shared, 16), GoldCache(fresh, 16)
    distinct: dict[str, Any] = {}
    for row in load_fixture_tasks(env_name):
        distinct.setdefault(task_from_data(row).snapshot_key, task_from_data(row))
    tasks = list(distinct.values())[:6]
    assert len(tasks) >= 3
    for task in tasks:
        snapshot = shared.snapshot(task)
        assert task.snapshot_key in shared._built  # the build's connection, handed off
        a = on_build.get(task)
        assert task.snapshot_key not in shared._built  # taken by the gold, then closed
        assert fresh.snapshot(task).image == snapshot.image
        fresh._built.pop(task.snapshot_key).close()  # this cache gets fresh clones only
        b = on_clones.get(task)
        assert a.seed_state == b.seed_state and a.state == b.state
        assert a.failed_calls == b.failed_calls and a.seed_to_gold == b.seed_to_gold
    probe = Store(tmp_path / "probe", env)
    for task in tasks:
        image = probe.snapshot(task).image
        conn = probe.clone(probe.snapshot(task))
        try:  # what the hand-off gives is the image itself
            assert conn.serialize() == image
        finally:
            conn.close()


def test_built_snapshot_connections_are_kept_bounded_and_closed_when_let_go(
    tmp_path: Path,
) -> None:
    """Connections no gold takes (its gold cached, or `gold_on_seed` off and no verify yet) are
    closed once newer builds push them out; a rebuilt snapshot closes its earlier one."""
    import sqlite3

    from app.storage.sqlite.store import BUILT_CONNECTIONS_KEPT

    env = load_environment("retail")
    store = Store(tmp_path / "data", env, snapshot_cache_size=1)
    distinct = {}
    for row in load_fixture_tasks("retail"):
        distinct.setdefault(task_from_data(row).snapshot_key, task_from_data(row))
    tasks = list(distinct.values())[: BUILT_CONNECTIONS_KEPT + 3]
    assert len(tasks) == BUILT_CONNECTIONS_KEPT + 3
    first = tasks[0]
    store.snapshot(first)
    held = store._built.get(first.snapshot_key)
    assert held is not None
    store.snapshot(tasks[1])  # the snapshot cache (1 entry) lets the first go ...
    store.snapshot(first)  # ... so it is rebuilt: the connection of the first build is closed
    with pytest.raises(sqlite3.ProgrammingError):
        held.execute("SELECT 1")
    evicted = store._built.get(first.snapshot_key)
    assert evicted is not None and evicted is not held
    for task in tasks[2:]:
        store.snapshot(task)
    assert len(store._built) == BUILT_CONNECTIONS_KEPT
    with pytest.raises(sqlite3.ProgrammingError):
        evicted.execute("SELECT 1")


def test_nothing_per_task_is_written_to_disk_but_its_sessions(tmp_path: Path) -> None:
    """Seeds and verifies of distinct tasks leave no snapshot, seed or gold file: a session is
    written from its snapshot's image in memory, whole, however many times it is seeded."""
    env = load_environment("retail")
    store = Store(tmp_path / "data", env)
    gold = GoldCache(store, 16)
    base = load_fixture_tasks("retail")[0]
    # Five distinct snapshots: the same seed rows under five clocks.
    rows = [
        {**base, "task_id": f"t{n}", "seed": {**(base.get("seed") or {}), "now": f"2026-03-1{n}"}}
        for n in range(5)
    ]
    for n, row in enumerate(rows):
        task = task_from_data(row)
        snapshot = store.snapshot(task)
        for i in range(3):
            path = store.create_session_file(f"{n:02d}{i:030d}", snapshot)
            conn = sqlite_db.open_file(path)
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            assert read_meta(conn)["snapshot"] == task.snapshot_key
            conn.close()
        gold.get(task)
    data = tmp_path / "data"
    assert not (data / "gold").exists()
    assert not (data / "snapshots").exists()
    assert len(list((data / "sessions" / "retail").iterdir())) == 15  # no temp file beside them


def test_seed_files_an_earlier_release_left_are_removed_before_workers_start(
    tmp_path: Path,
) -> None:
    """Releases before 2026-12-05 kept up to 64 MiB of seed files per environment under
    `snapshots/<env>/.seed/`; nothing reads them now, so `stategym serve` deletes them once,
    and leaves every other file of the data dir alone."""
    from app.settings import Settings
    from app.storage.factory import prepare_shared

    env = load_environment("retail")
    data = tmp_path / "data"
    legacy = data / "snapshots" / "retail" / ".seed"
    legacy.mkdir(parents=True)
    for n in range(3):
        (legacy / f"k{n}-d.wal").write_bytes(b"x" * 8192)
    kept = data / "snapshots" / "retail" / "old-snapshot.sqlite"  # an older release's snapshot
    kept.write_bytes(b"y")
    other = data / "snapshots" / "airline" / ".seed"  # another environment's: its own serve
    other.mkdir(parents=True)
    (other / "k-d.wal").write_bytes(b"z")
    prepare_shared(Settings(data_dir=data), env)
    assert not legacy.exists()
    assert kept.read_bytes() == b"y" and (other / "k-d.wal").exists()
    assert (data / "templates" / "retail").is_dir()
    prepare_shared(Settings(data_dir=data), env)  # nothing left to remove: no error


def test_snapshots_in_memory_are_bounded_by_bytes(tmp_path: Path) -> None:
    env = load_environment("retail")
    probe = Store(tmp_path / "probe", env)
    size = len(probe.template_image())
    store = Store(tmp_path / "data", env, snapshot_cache_bytes=int(size * 3.5))
    for row in load_fixture_tasks("retail")[:8]:
        store.snapshot(task_from_data(row))
    assert store.cached_snapshot_bytes <= size * 3.5 + 65536
    assert 2 <= len(store._snapshots) <= 4


def test_lru_bounded_by_bytes_evicts_least_recently_used() -> None:
    evicted: list[str] = []
    lru: LRU[str, bytes] = LRU(100, lambda k, _v: evicted.append(k), max_bytes=10, size_of=len)
    lru.put("a", b"1234")
    lru.put("b", b"1234")
    assert lru.get("a") == b"1234"  # "b" is now the least recently used
    lru.put("c", b"1234")
    assert evicted == ["b"] and lru.keys() == ["a", "c"] and lru.bytes == 8
    lru.put("a", b"12")  # replacing an entry re-weighs it
    assert lru.bytes == 6
    lru.put("huge", b"x" * 50)  # alone over the bound: the newest always stays
    assert lru.keys() == ["huge"] and lru.bytes == 50
    assert lru.pop("huge") is not None and lru.bytes == 0


def test_a_bad_seed_row_is_refused_by_the_raw_path_as_before(tmp_path: Path) -> None:
    """A row the database refuses (NOT NULL, foreign key) is a SeedError naming the table."""
    from app.storage.seeding import SeedError

    env = load_environment("retail")
    store = Store(tmp_path / "data", env)
    task = task_from_data(
        {"task_id": "bad", "seed": {"rows": {"addresses": [{"id": 987654, "customer_id": 1}]}}}
    )
    with pytest.raises(SeedError, match="addresses: the database refused a row"):
        store.snapshot(task)


def test_concurrent_gets_of_one_gold_build_it_once(tmp_path: Path) -> None:
    """The gold built ahead at seed and a verify asking for it meanwhile share one build."""
    import threading

    env = load_environment("retail")
    builds: list[str] = []

    class Counting(GoldCache):
        def _build(self, task: Any) -> Any:
            builds.append(task.gold_key)
            return super()._build(task)

    gold = Counting(Store(tmp_path / "data", env), 16)
    task = task_from_data(load_fixture_tasks("retail")[0])
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(gold.get(task))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and len(results) == 4
    assert all(r is results[0] for r in results) and gold.cached(task)


def test_defaults_dates_and_updates_written_by_the_raw_path_equal_sqlalchemy(
    tmp_path: Path,
) -> None:
    """Column defaults (a constant: by the raw path; a function: SQLAlchemy's), dates, datetimes
    and updates of existing rows land exactly as the previous build wrote them."""
    seed = {
        "now": "2026-05-01T09:00:00",
        "rows": {
            "airports": [
                {"id": 9901, "code": "ZZA", "name": "Zed A", "city": "Zedville"},  # label: f()
                {"id": 1, "name": "Renamed"},  # an update of an existing row
            ],
            "flights": [
                {  # status and delay_minutes: constant defaults
                    "id": 990001,
                    "flight_number": "SG999",
                    "flight_date": "2026-05-12",
                    "origin_id": 9901,
                    "destination_id": 1,
                    "scheduled_departure": "2026-05-12T08:00:00",
                    "scheduled_arrival": "2026-05-12T10:30:00+02:00",
                }
            ],
        },
    }
    new, old, _task = _both("airline", tmp_path, {"task_id": "defaults", "seed": seed})
    a, b = _view(new), _view(old)
    assert a["rows"] == b["rows"]
    flight = [r for r in a["rows"]["flights"] if r[0] == 990001]
    assert flight and "scheduled" in flight[0]


@pytest.mark.parametrize("env_name", ENVS)
def test_a_snapshot_built_on_the_spare_clone_equals_one_built_without(
    tmp_path: Path, env_name: str
) -> None:
    """A never-seen task's snapshot built on the spare (the seed base cloned and its schema
    parsed ahead, `Store.prepare_spare`) is the very image a build without one gives; each
    build takes the spare, and the seed state and gold on its handed-over connection agree."""
    env = load_environment(env_name)
    spared = Store(tmp_path / "spared", env)
    plain = Store(tmp_path / "plain", env)
    spared_gold, plain_gold = GoldCache(spared, 16), GoldCache(plain, 16)
    for row in load_fixture_tasks(env_name)[:4]:
        task = task_from_data(row)
        spared.prepare_spare()
        spare = spared._spare
        assert spared.has_spare and spare is not None
        spared.prepare_spare()  # one at most: a second call keeps the first
        assert spared._spare is spare
        image = spared.snapshot(task).image
        assert not spared.has_spare
        assert spared.clone(spared.snapshot(task)) is spare  # built on it, then handed over
        spare.close()
        assert image == plain.snapshot(task).image
        assert spared_gold.get(task).state == plain_gold.get(task).state
        assert spared_gold.seed_state(task) == plain_gold.seed_state(task)


def test_a_seed_the_spare_does_not_fit_is_refused_and_the_spare_closed(tmp_path: Path) -> None:
    """A bad seed built on the spare is a SeedError as without one, and the spare it used is
    closed (never handed to another task half-seeded); `drop_spare` closes an unused one."""
    import sqlite3

    from app.storage.seeding import SeedError

    env = load_environment("retail")
    store = Store(tmp_path / "data", env)
    store.prepare_spare()
    spare = store._spare
    assert spare is not None
    task = task_from_data(
        {"task_id": "bad", "seed": {"rows": {"addresses": [{"id": 987654, "customer_id": 1}]}}}
    )
    with pytest.raises(SeedError, match="addresses: the database refused a row"):
        store.snapshot(task)
    assert not store.has_spare
    with pytest.raises(sqlite3.ProgrammingError):
        spare.execute("SELECT 1")
    store.prepare_spare()
    unused = store._spare
    assert unused is not None
    store.drop_spare()
    assert not store.has_spare
    with pytest.raises(sqlite3.ProgrammingError):
        unused.execute("SELECT 1")
