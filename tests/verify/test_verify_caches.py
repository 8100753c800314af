"""Verify's per-task caches never answer with a stale value or another task's: each is keyed by
what its value is a function of, and bounded by bytes."""

from __future__ import annotations

import copy
import json
from collections import Counter

from app.registry import load_environment
from app.verify import request_task
from app.verify.gold import GoldState
from app.verify.request_task import stored_task
from app.verify.state.diff import change_units


def _rows() -> list[dict]:
    path = load_environment("retail").tasks_path
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_stored_task_is_parsed_once_per_content_and_never_served_for_another() -> None:
    rows = _rows()
    answer = next(r for r in rows if r.get("expected_answer"))
    other = copy.deepcopy(answer)
    other["expected_answer"] = {**other["expected_answer"], "value": ["Another Name"]}
    moved = copy.deepcopy(answer)
    moved["ground_truth"][0]["arguments"] = {**moved["ground_truth"][0]["arguments"], "x": 1}
    first = stored_task(answer)
    assert stored_task(copy.deepcopy(answer)) is first  # the same content: parsed once
    for _ in range(2):  # alternated: each content its own spec
        assert stored_task(other).expected_answer.value == ["Another Name"]
        assert stored_task(answer).expected_answer.value == answer["expected_answer"]["value"]
        assert stored_task(moved).gold_key != first.gold_key
        assert stored_task(moved).snapshot_key == first.snapshot_key
        assert stored_task(answer).gold_key == first.gold_key
    # Equal values of another type are other content (1 and 1.0 are different JSON).
    typed = copy.deepcopy(answer)
    typed["difficulty"] = float(answer.get("difficulty") or 0) + 0.5
    assert stored_task(typed).data["difficulty"] == typed["difficulty"]


def test_the_stored_task_cache_is_bounded_by_bytes(monkeypatch) -> None:
    cache = request_task.LRU(10_000, max_bytes=200_000, size_of=lambda e: e[1])
    monkeypatch.setattr(request_task, "_tasks", cache)
    row = _rows()[0]
    for n in range(60):
        stored_task({**row, "task_id": f"bounded-{n}"})
    assert 0 < cache.bytes <= 200_000
    assert len(cache) < 60
    # What was let go is parsed again, and is right.
    assert stored_task({**row, "task_id": "bounded-0"}).task_id == "bounded-0"


def test_gold_change_units_are_those_of_its_diff() -> None:
    from app.verify.state.diff import TableDiff

    diff = {"orders": TableDiff(changed=[{"key": {"id": 1}, "changes": {"status": ["a", "b"]}}])}
    gold = GoldState({}, {}, diff, ())
    assert (
        gold.units
        == change_units(diff)
        == Counter({("changed", "orders", (("id", 1),), (("status", "b"),)): 1})
    )
    assert GoldState({}, {}, {}, ()).units == Counter()


def _evidence(rng, depth: int = 0):
    kind = rng.randrange(8 if depth < 3 else 4)
    if kind == 0:
        return "x" * rng.choice([0, 3, 499, 500, 501, 700])
    if kind == 1:
        return rng.choice([1, 2.5, None, True, -0.0])
    if kind == 2:
        return b"\x00" * rng.randrange(3)
    if kind == 3:
        return "é" * rng.choice([10, 520])
    if kind in (4, 5):
        return {
            rng.choice(["a", "b" * 600, 7, "c"]): _evidence(rng, depth + 1)
            for _ in range(rng.randrange(4))
        }
    if kind == 6:
        return tuple(_evidence(rng, depth + 1) for _ in range(rng.randrange(4)))
    return [_evidence(rng, depth + 1) for _ in range(rng.randrange(6))]


def test_capping_a_result_again_with_known_parts_gives_what_a_full_walk_gives() -> None:
    import random

    from app import jsonio
    from app.verify.evidence import cap_evidence

    rng = random.Random(36)
    for _ in range(400):
        evidence = {f"k{n}": _evidence(rng) for n in range(rng.randrange(1, 6))}
        trajectory = {"ok": True, "calls": [_evidence(rng) for _ in range(3)]}
        known: dict = {}
        shown = cap_evidence(evidence, known=known)
        assert jsonio.dumps(shown) == jsonio.dumps(cap_evidence(evidence))
        shown["trajectory"] = cap_evidence(trajectory, known=known)
        result = {"reward": 0.5, "verification": shown, "failure_reason": "y" * 600}
        fast = cap_evidence(result, known=known)
        assert jsonio.dumps(fast) == jsonio.dumps(cap_evidence(result))  # never walked parts
        # A part registered is its object, not its content: an equal copy is walked.
        for part, _size in known.values():
            assert all(p is not part for p in (evidence, trajectory, result))


def test_a_cut_part_is_never_taken_as_capped() -> None:
    from app.verify.evidence import cap_evidence

    known: dict = {}
    shown = cap_evidence({"rows": ["z" * 600], "ok": ["fine"]}, known=known)
    assert [p for p, _ in known.values()] == [["fine"]]  # the cut list is walked again
    again = cap_evidence({"verification": shown}, known=known)
    assert again["verification"]["rows"][0] == "z" * 500 + "... [14 more]"  # cut twice, as before
    assert again["verification"]["ok"] is shown["ok"]


def test_a_revisited_tasks_dump_is_patched_after_the_bounded_cache_let_it_go(tmp_path) -> None:
    """The gold cache holds each snapshot's dump longer than the process's cache of dumps may:
    a verify of a task whose dump that cache let go (more distinct tasks than it keeps, the gold
    still cached) patches the dump again, not every table of every verify read whole."""
    from app.core.tasks import task_from_data
    from app.storage.images import Store
    from app.verify.gold import GoldCache, replay
    from app.verify.session_verify import verify_state
    from app.verify.state import patching
    from app.verify.state.dump import dump_state

    env = load_environment("retail")
    tables, compare = env.metadata.tables, env.compare
    store = Store(tmp_path, env)
    gold = GoldCache(store, capacity=16)
    tasks = [task_from_data(r) for r in _rows() if r.get("ground_truth")]
    task = next(  # its gold writes a compared table, not only its answer
        t
        for t in tasks
        if any(
            not env.tool_named(c.name).read_only and c.name != "submit_answer"
            for c in t.ground_truth
        )
    )
    other = next(t for t in tasks if t.snapshot_key != task.snapshot_key)
    key = f"{store.fingerprint}:{task.snapshot_key}"
    kept_before = (patching._pristine.capacity, patching._pristine.max_bytes)
    patching.keep_at_most(1, 2**30)
    try:
        gold.get(task)
        gold.get(other)  # the one dump the cache keeps now is `other`'s
        assert patching.remembered(key, compare) is None
        conn, engine, failures = replay(env, store.snapshot(task), task, session_id="revisit")
        assert not failures
        result = verify_state(
            env=env,
            gold=gold,
            engine=engine,
            task=task,
            response={"output": []},
            diff_limit=3,
            with_steps=False,
        )
        assert result["reward"] == 1.0, result["verification"]
        assert patching.remembered(key, compare) is not None  # put back by the gold cache
        with engine.connect() as session:
            patched = dump_state(session, tables, compare)
            whole = dump_state(session, tables, compare, reuse=False)
        assert patched == whole
        written = sorted(n for n, t in patched.items() if t.origin is not None)
        assert written, "no table was patched: every table was read whole"
        engine.dispose()
        conn.close()
    finally:
        patching.keep_at_most(*kept_before)


def test_a_snapshots_kept_dump_is_weighed_without_its_templates_tables(tmp_path) -> None:
    """A snapshot's dump is its template's with the seed's rows patched in: the cache of dumps
    weighs what it adds, so its byte bound keeps as many snapshots as that memory holds (it
    kept 157 retail snapshots in 128 MiB while weighing each as a whole copy)."""
    from app.core.tasks import task_from_data
    from app.storage.images import Store
    from app.verify.gold import GoldCache
    from app.verify.state import patching
    from app.verify.state.table_state import state_bytes

    env = load_environment("retail")
    store = Store(tmp_path, env)
    gold = GoldCache(store, capacity=16)
    for row in _rows():  # a task whose seed writes rows of compared tables
        task = task_from_data(row)
        seed_state = gold.seed_state(task)
        template = patching.remembered(f"{store.fingerprint}:", env.compare)
        entry = patching.remembered(f"{store.fingerprint}:{task.snapshot_key}", env.compare)
        assert template is not None and entry is not None and entry.state is seed_state
        shared = [n for n in seed_state if seed_state[n] is template.state[n]]
        if len(shared) < len(seed_state):
            break
    assert shared and len(shared) < len(seed_state)  # some tables patched, the rest shared
    assert entry.bytes < template.bytes / 10
    assert entry.bytes >= patching.ENTRY_BYTES + state_bytes(
        seed_state, frozenset(id(template.state[n]) for n in shared)
    )
