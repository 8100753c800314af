"""A diff of two dumps patched from one base (TableState.origin) equals the whole-table diff.

`diff_table` computes the diff of two patched dumps from the patched rows and the base's cached
counts (app/verify/state/diff.py `_Delta`); this checks it against the whole-table algorithm on
random tables: keyed and unkeyed, with repeated rows and repeated keys, rows removed, added,
changed.
"""

from __future__ import annotations

import random
from bisect import bisect_left, insort_right
from dataclasses import replace

import pytest

from app.verify.state.diff import _Delta, diff_table
from app.verify.state.dump import Patch, Row, TableState


def _patched(base: TableState, rng: random.Random, values: list[object]) -> TableState:
    rows = list(base.rows)
    removed: list[Row] = []
    for _ in range(rng.randrange(0, 4)):
        if rows:
            old = rng.choice([r for r in base.rows if r in rows] or rows)
            if old in rows:
                del rows[bisect_left(rows, repr(old), key=repr)]
                removed.append(old)
    added: list[Row] = []
    for _ in range(rng.randrange(0, 4)):
        if removed and rng.random() < 0.5:  # a changed row: same key, another value
            row = (*rng.choice(removed)[:1], rng.choice(values))
        elif base.rows and rng.random() < 0.3:  # a copy of a row already there
            row = rng.choice(base.rows)
        else:
            row = (rng.randrange(6), rng.choice(values))
        added.append(row)
        insort_right(rows, row, key=repr)
    return TableState(
        base.name, base.columns, base.key, tuple(rows), Patch(base, tuple(removed), tuple(added))
    )


def _whole(table: TableState) -> TableState:
    return replace(table, origin=None)


@pytest.mark.parametrize("key", [("id",), ()])
def test_patched_diff_equals_whole_table_diff(key: tuple[str, ...]) -> None:
    rng = random.Random(19)
    for _ in range(4000):
        # Few distinct values: repeated rows and repeated keys are common.
        values: list[object] = rng.choice([[1, "a"], [1, 2.5, "a", None, 2.5000001]])
        ids = rng.choice([2, 6])
        n = rng.randrange(0, 8)
        rows = sorted(((rng.randrange(ids), rng.choice(values)) for _ in range(n)), key=repr)
        base = TableState("t", ("id", "v"), key, tuple(rows))
        before = _patched(base, rng, values) if rng.random() < 0.8 else base
        after = _patched(base, rng, values)
        assert _Delta.of(before, after) is not None  # the patched path is the one tested
        for money in (set(), {"v"}):
            fast = diff_table(before, after, money, 0.01)
            slow = diff_table(_whole(before), _whole(after), money, 0.01)
            assert (fast.added, fast.removed, fast.changed) == (
                slow.added,
                slow.removed,
                slow.changed,
            ), (base.rows, before.rows, after.rows)


def test_vocabulary_of_patched_states_equals_a_whole_read() -> None:
    """The names vocabulary (answer hedging) of seeded states patched from the snapshot's dump,
    computed from the base's cached counts and the patch, equals one computed from every row."""
    from app.taskgen.draw import choices, draw
    from app.taskgen.gold_run import bound, gold_run
    from app.taskgen.registry import load_generator
    from app.taskgen.validate import Validator
    from app.verify.answers.text import _MAX_VALUE_CHARS, _WORD, _norm, _vocabulary
    from app.verify.state.dump import dump_state

    def whole(state: dict[str, TableState]) -> dict[tuple[str, str], frozenset[tuple[str, ...]]]:
        vocab = {}
        for table in state.values():
            for i, column in enumerate(table.columns):
                values = {
                    tuple(_WORD.findall(_norm(row[i])))
                    for row in table.rows
                    if isinstance(row[i], str)
                    and len(row[i]) <= _MAX_VALUE_CHARS
                    and "@" not in row[i]
                }
                values.discard(())
                if len(values) > 1:
                    vocab[(table.name, column)] = frozenset(values)
        return vocab

    gen = load_generator("retail")
    env = gen.env
    Validator(env)  # dumps the tracked base once: the states below are patched from it
    pool = choices(gen, "train", None)
    patched = 0
    for i in range(12):
        task = draw(gen, "train", 7, i, pool).task
        if task is None:
            continue
        run = gold_run(env, task["seed"], task["ground_truth"])
        with bound(run.seeded) as c, c.begin():
            seeded = dump_state(c, env.metadata.tables, env.compare)
        with run.final.begin():
            final = dump_state(run.final, env.metadata.tables, env.compare)
        for state in (seeded, final):
            patched += sum(t.origin is not None for t in state.values())
            assert _vocabulary(state) == whole(dict(state))
            assert list(_vocabulary(state)) == list(whole(dict(state)))
    assert patched


@pytest.mark.parametrize("env_name", ["retail", "airline", "ledger", "sql", "workplace"])
def test_dumps_patched_from_a_seeded_dump_equal_whole_reads(env_name: str) -> None:
    """A generated task's seeded state is dumped once (the template's dump patched with the
    rows its seed wrote, app/taskgen/gold_run.py) and becomes the base of later dumps: it, the
    gold's and a second run's dumps, patched from it, and their diffs equal whole reads of the
    same databases."""
    from app.taskgen.draw import choices, draw
    from app.taskgen.gold_run import bound, gold_run, run_calls
    from app.taskgen.registry import load_generator
    from app.verify.state.diff import diff_states, summarize
    from app.verify.state.dump import dump_state

    gen = load_generator(env_name)
    env = gen.env
    tables, compare = env.metadata.tables, env.compare
    pool = choices(gen, "train", None)
    checked = 0
    for i in range(4):
        task = draw(gen, "train", 3, i, pool).task
        if task is None:
            continue
        run = gold_run(env, task["seed"], task["ground_truth"])
        with bound(run.seeded) as again, again.begin():
            seeded = dump_state(again, tables, compare)
            seeded_rows = any((task["seed"] or {}).get("rows", {}).values())
            assert any(t.origin is not None for t in seeded.values()) or not seeded_rows
            assert seeded == dump_state(again, tables, compare, reuse=False)
        with run.final.begin():
            final = dump_state(run.final, tables, compare)
            assert final == dump_state(run.final, tables, compare, reuse=False)
        with bound(run.seeded) as again:
            run_calls(env, again, task["ground_truth"], run.now)
            with again.begin():
                second = dump_state(again, tables, compare)
                assert second == dump_state(again, tables, compare, reuse=False)
        whole = {n: _whole(t) for n, t in final.items()}
        seed_whole = {n: _whole(t) for n, t in seeded.items()}
        assert summarize(diff_states(seeded, final, compare), 5) == summarize(
            diff_states(seed_whole, whole, compare), 5
        )
        assert not diff_states(final, second, compare)
        checked += 1
    assert checked
