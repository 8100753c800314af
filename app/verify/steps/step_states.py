"""The potential after each step, from the step log's row images alone (no re-dump, no undo).

Every state s_k differs from the seed only in the rows some step up to k touched and the rows
whose references resolve differently in s_k (they reference a row whose natural key, or
existence, some step changed). The log holds each touched row before its first change and
after each change, and the referencing rows are read once. So for each step those few rows are
normalised as `dump_state` does, on both sides, and diffed: their diff is the whole states'
diff, since every other row is identical. A key toggled 300 times costs 300 small diffs, not
300 dumps; the work (rows x writing steps) is known up front and charged to the step budget
(app/verify/steps/step_budget.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Table, select

from app.sdk.compare_spec import CompareSpec
from app.storage.dump_sql import dump_sql
from app.storage.steplog import RowImage, StepLog, StepRow
from app.verify.state.diff import StateDiff, diff_states
from app.verify.state.table_reads import (
    column_readers,
    compared_columns,
    plain,
    read_raw,
    reference_maps,
    row_identity,
    value_converters,
)
from app.verify.state.table_state import TableState
from app.verify.steps.step_budget import Meter

Key = tuple[str, int]  # (table, rowid)
Content = dict[str, Any] | None  # a row's stored values; None: no such row in that state
Moves = list[tuple[Key, Content, Content]]  # (row, before, after), in the order made


def potentials_from_log(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    steps: Sequence[StepRow],
    images: Sequence[RowImage],
    final: float,
    potential_of: Callable[[StateDiff], float],
    meter: Meter | None = None,
) -> list[float] | None:
    """[Φ(s_1), ..., Φ(s_n)] with Φ(s_n) = `final`; None when the fast path does not apply."""
    compared = {n for n in tables if compare.for_table(n).compared}
    moves = _moves([i for i in images if i.table in compared])
    if moves is None:
        return None
    seed: dict[Key, Content] = {}
    for changes in moves.values():
        for key, before, _after in changes:
            seed.setdefault(key, before)
    refs = _References(conn, tables, compare)
    rekeyed = refs.rekeyed(moves)
    writing = [s for s in steps[:-1] if s.idx in moves]
    if not writing:
        # Only the last step wrote compared rows: every state before it is the seed's, whose
        # potential needs no row read (the last one is `final`).
        if not _identified(conn, tables, compare, rekeyed):
            return None  # as `_referencing_rows` would say
        return [potential_of({})] * (len(steps) - 1) + [final]
    extra = _referencing_rows(conn, tables, compare, rekeyed, seed)
    if extra is None:
        return None
    seed.update(extra)
    if meter is not None:
        meter.rows(len(seed) * len(writing))
    # The rows whose normalised form may differ from the seed's although their content does not.
    sensitive = {key for key, content in seed.items() if refs.sensitive(key[0], content, rekeyed)}
    refs.load(seed, moves)
    seed_rows = refs.normalised(seed, seed.keys())
    values: list[float] = []
    # Before any writing step the state is the seed's (the potential of no change at all).
    phi, current = potential_of({}), dict(seed)
    # A state is known by the rows whose content is not the seed's (contents are interned, and
    # references resolve by contents too): one seen before (a key toggled back and forth) is
    # not normalised nor diffed again.
    off_seed: dict[Key, int] = {}
    known: dict[frozenset[tuple[Key, int]], float] = {frozenset(): phi}
    for step in steps:
        if step.idx == steps[-1].idx:
            values.append(final)
            break
        made = moves.get(step.idx)
        if made:
            for key, before, after in made:
                current[key] = after
                refs.move(key[0], before, after)
                if after is seed[key]:
                    off_seed.pop(key, None)
                else:
                    off_seed[key] = id(after)
            seen = frozenset(off_seed.items())
            if seen not in known:
                differ = [k for k in current if current[k] is not seed[k] or k in sensitive]
                state_rows = refs.normalised(current, differ, rekeyed)
                diff = _mini_diff(differ, state_rows, seed_rows, tables, compare)
                known[seen] = potential_of(diff)
            phi = known[seen]
            if meter is not None:
                meter.tick()
        values.append(phi)
    return values


def logged_changes(log: StepLog) -> int:
    """How many row changes the log holds: a floor of the rows `potentials_from_log` compares
    (each is one row at one writing step), known without reading them."""
    return sum(n for per_table in log.change_counts().values() for n in per_table.values())


def _moves(images: Sequence[RowImage]) -> dict[int, Moves] | None:
    """Per step, each row change as (row, content before, content after); a rowid change is
    the row leaving one rowid and taking another. None when an image has no rowid. Equal
    contents of a row are one object (`is` tells a row back at an earlier content)."""
    out: dict[int, Moves] = {}
    interned: dict[tuple[Key, tuple[Any, ...]], dict[str, Any]] = {}

    def intern(key: Key, content: Content) -> Content:
        if content is None:
            return None
        try:
            return interned.setdefault((key, tuple(content.items())), content)
        except TypeError:  # an unhashable value (PostgreSQL JSON): kept as it is
            return content

    for image in images:
        changes = out.setdefault(image.step, [])
        pairs: list[tuple[int | None, Content, Content]]
        if image.op == "i":
            pairs = [(image.new_rid, None, image.after)]
        elif image.op == "d":
            pairs = [(image.old_rid, image.before, None)]
        elif image.old_rid == image.new_rid:
            pairs = [(image.old_rid, image.before, image.after)]
        else:
            pairs = [(image.old_rid, image.before, None), (image.new_rid, None, image.after)]
        for rid, before, after in pairs:
            if rid is None:
                return None
            key = (image.table, rid)
            changes.append((key, intern(key, before), intern(key, after)))
    return out


class _References:
    """Per referenced table: surrogate id -> natural key, as of the state being scored."""

    def __init__(self, conn: Connection, tables: Mapping[str, Table], compare: CompareSpec):
        self.conn, self.tables, self.compare = conn, tables, compare
        self.targets: dict[str, tuple[str, tuple[str, ...], list[Callable[[Any], Any]]]] = {}
        for spec in compare.tables.values():
            for target in spec.references.values():
                key = compare.for_table(target).key
                pk = list(tables[target].primary_key.columns)
                if key and len(pk) == 1:  # else references to it stay ids (reference_maps)
                    self.targets[target] = (pk[0].name, tuple(key), [])
        self.maps: dict[str, dict[Any, tuple[Any, ...]]] = {}
        # Built once the maps are loaded: their converters read the maps, updated in place.
        self._normalisers: dict[str, Callable[[dict[str, Any]], tuple[Any, ...]]] = {}
        self._rows: dict[tuple[Any, ...], tuple[Content, tuple[Any, ...]]] = {}

    def _key(self, table: str, content: Mapping[str, Any]) -> tuple[Any, ...]:
        _pk, key, reads = self.targets[table]
        if not reads:
            reads.extend(column_readers(self.conn, self.tables[table], key))
        return tuple(plain(f(content[k])) for f, k in zip(reads, key, strict=True))

    def rekeyed(self, moves: Mapping[int, Moves]) -> dict[str, set[Any]]:
        """Per referenced table, the ids whose natural key or existence some step changed."""
        out: dict[str, set[Any]] = {}
        for changes in moves.values():
            for (table, _rid), before, after in changes:
                if table not in self.targets:
                    continue
                pk = self.targets[table][0]
                if before is not None and after is not None:
                    if before[pk] == after[pk] and self._key(table, before) == self._key(
                        table, after
                    ):
                        continue
                for content in (before, after):
                    if content is not None:
                        out.setdefault(table, set()).add(content[pk])
        return out

    def sensitive(self, table: str, content: Content, rekeyed: Mapping[str, set[Any]]) -> bool:
        if content is None:
            return False
        refs = self.compare.for_table(table).references
        return any(content.get(c) in rekeyed.get(t, ()) for c, t in refs.items())

    def load(self, seed: Mapping[Key, Content], moves: Mapping[int, Moves]) -> None:
        """The maps as of the seed: the final database's, for every id any of these rows
        references, with the touched rows of referenced tables put back as they were."""
        ids: dict[str, set[Any]] = {}
        contents = [((t, c) for (t, _r), c in seed.items())]
        contents += [((k[0], a) for k, _b, a in changes) for changes in moves.values()]
        for table, content in (pair for group in contents for pair in group):
            if content is None:
                continue
            for column, target in self.compare.for_table(table).references.items():
                if content.get(column) is not None:
                    ids.setdefault(target, set()).add(content[column])
        self.maps = reference_maps(self.conn, self.tables, self.compare, set(ids), ids)
        first: dict[Key, Content] = {}
        final: dict[Key, Content] = {}
        for changes in moves.values():
            for key, before, after in changes:
                first.setdefault(key, before)
                final[key] = after
        for (table, _rid), content in final.items():  # the final state's ids of touched rows
            if table in self.maps and content is not None:
                self.maps[table].pop(content[self.targets[table][0]], None)
        for (table, _rid), content in first.items():
            self.move(table, None, content)

    def move(self, table: str, before: Content, after: Content) -> None:
        """A row of `table` changed from `before` to `after` (either None: absent)."""
        mapping = self.maps.get(table)
        if mapping is None:
            return
        pk = self.targets[table][0]
        if before is not None:
            mapping.pop(before[pk], None)
        if after is not None:
            mapping[after[pk]] = self._key(table, after)

    def normalised(
        self,
        state: Mapping[Key, Content],
        keys: Any,
        rekeyed: Mapping[str, set[Any]] | None = None,
    ) -> dict[Key, tuple[Any, ...]]:
        """The rows at `keys` of `state` (those that exist) as `dump_state` normalises them;
        a row is normalised again only when its content or a re-keyed reference of it moved."""
        converters = self._normalisers
        out = {}
        for key in keys:
            content = state[key]
            if content is None:
                continue
            table = key[0]
            # The contents live as long as this verify (in the log's moves): id() is theirs.
            mark = (key, id(content), self._resolved(table, content, rekeyed))
            hit = self._rows.get(mark)
            if hit is not None and hit[0] is content:
                out[key] = hit[1]
                continue
            normalise = converters.get(table)
            if normalise is None:
                normalise = converters[table] = self._normaliser(table)
            out[key] = normalise(content)
            self._rows[mark] = (content, out[key])
        return out

    def _resolved(
        self, table: str, content: dict[str, Any], rekeyed: Mapping[str, set[Any]] | None
    ) -> tuple[Any, ...]:
        """What the row's references to re-keyed rows resolve to now."""
        if not rekeyed:
            return ()
        refs = self.compare.for_table(table).references
        return tuple(
            self.maps.get(t, {}).get(content.get(c))
            for c, t in refs.items()
            if content.get(c) in rekeyed.get(t, ())
        )

    def _normaliser(self, name: str) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
        spec = self.compare.for_table(name)
        columns = compared_columns(self.tables[name], spec, self.compare)
        reads = column_readers(self.conn, self.tables[name], columns)
        converters = value_converters(columns, spec, self.maps, reads)

        def normalise(row: dict[str, Any]) -> tuple[Any, ...]:
            return tuple(f(row[c]) for c, f in zip(columns, converters, strict=True))

        return normalise


def _referencing_tables(
    tables: Mapping[str, Table], compare: CompareSpec, rekeyed: Mapping[str, set[Any]]
) -> Iterator[tuple[str, list[tuple[str, set[Any]]]]]:
    """The compared tables with a reference to a re-keyed id, and those (column, ids)."""
    for name in sorted(tables):
        spec = compare.for_table(name)
        if not spec.compared:
            continue
        wanted = [(c, rekeyed[t]) for c, t in spec.references.items() if rekeyed.get(t)]
        if wanted:
            yield name, wanted


def _identified(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    rekeyed: Mapping[str, set[Any]],
) -> bool:
    """Whether every table `_referencing_rows` would read has row identities."""
    return all(
        row_identity(conn, tables[name]) is not None
        for name, _ in _referencing_tables(tables, compare, rekeyed)
    )


def _referencing_rows(
    conn: Connection,
    tables: Mapping[str, Table],
    compare: CompareSpec,
    rekeyed: Mapping[str, set[Any]],
    touched: Mapping[Key, Content],
) -> dict[Key, Content] | None:
    """The untouched rows that reference a re-keyed id (their content is the same in every
    state, read from the final one); None when such a table's rows have no identity."""
    out: dict[Key, Content] = {}
    for name, wanted in _referencing_tables(tables, compare, rekeyed):
        spec = compare.for_table(name)
        table = tables[name]
        identity = row_identity(conn, table)
        if identity is None:
            return None
        columns = compared_columns(table, spec, compare)
        raw = read_raw(conn, [table.c[c] for c in columns])[0]
        for column, ids in wanted:
            ordered = sorted(ids, key=repr)

            def query(identity: Any = identity, raw: list[Any] = raw) -> Any:
                return select(identity, *raw)

            # One statement compiled once whatever the ids, where they bind as one parameter.
            rows = dump_sql(conn.dialect).rows_where_in(
                conn, ("referencing", table, column, columns), query, table.c[column], ordered
            )
            if rows is None:
                rows = conn.execute(select(identity, *raw).where(table.c[column].in_(ordered)))
            for row in rows:
                key = (name, row[0])
                if key not in touched and key not in out:
                    out[key] = dict(zip(columns, row[1:], strict=True))
    return out


def _mini_diff(
    keys: Sequence[Key],
    state: Mapping[Key, tuple[Any, ...]],
    seed: Mapping[Key, tuple[Any, ...]],
    tables: Mapping[str, Table],
    compare: CompareSpec,
) -> StateDiff:
    before: dict[str, list[tuple[Any, ...]]] = {}
    after: dict[str, list[tuple[Any, ...]]] = {}
    for key in keys:
        table = key[0]
        old, new = seed.get(key), state.get(key)
        if old is not None:
            before.setdefault(table, []).append(old)
        if new is not None:
            after.setdefault(table, []).append(new)
    old_state: dict[str, TableState] = {}
    new_state: dict[str, TableState] = {}
    for name in set(before) | set(after):
        spec = compare.for_table(name)
        columns = compared_columns(tables[name], spec, compare)
        old_state[name] = TableState(
            name, columns, tuple(spec.key), tuple(sorted(before.get(name, []), key=repr))
        )
        new_state[name] = TableState(
            name, columns, tuple(spec.key), tuple(sorted(after.get(name, []), key=repr))
        )
    return diff_states(old_state, new_state, compare, exact=True)
