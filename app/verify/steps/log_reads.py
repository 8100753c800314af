"""A session's step log as one verify reads it: what does not change while the verify reads
(its change counts, and the steps that changed rows, which are their keys) read once."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from app.storage.steplog import RowChange, RowImage, StepLog, StepRow


class ReadOnce:
    """`log` (a StepLog) with `change_counts` read at most once and `changed_steps` taken from
    it (both read the log's row table: the steps with at least one row change). Read before
    any undo: an undo runs in a scratch savepoint that is rolled back, so the counts hold for
    the verify's whole transaction."""

    def __init__(self, log: StepLog):
        self.log = log
        self._counts: dict[int, dict[str, int]] | None = None

    def change_counts(self) -> dict[int, dict[str, int]]:
        if self._counts is None:
            self._counts = self.log.change_counts()
        return self._counts

    def changed_steps(self) -> set[int]:
        return set(self.change_counts())

    def steps(self, upto: int | None = None) -> list[StepRow]:
        return self.log.steps(upto)

    def count(self) -> int:
        return self.log.count()

    def migrated_at(self) -> int:
        return self.log.migrated_at()

    def row_images(self) -> list[RowImage]:
        return self.log.row_images()

    def changes(self, steps: Iterable[int] | None = None) -> dict[int, list[RowChange]]:
        return self.log.changes(steps)

    def undo_supported(self, tables: Iterable[str]) -> bool:
        return self.log.undo_supported(tables)

    def undo_to(self, to_step: int) -> int:
        return self.log.undo_to(to_step)

    @contextmanager
    def scratch(self) -> Iterator[None]:
        with self.log.scratch():
            yield
