"""Generate N validated tasks for (environment, split, seed): byte-identical for equal arguments.

Attempts 0, 1, 2, ... are drawn (app/taskgen/draw.py) and validated (validate.py) in rounds,
by `jobs` worker processes; the parent takes their results in attempt order and keeps the first
N that pass, so the output does not depend on `jobs`. A failing task is dropped and counted.
"""

from __future__ import annotations

import gc
import json
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.taskgen.audit import gold_identifiers
from app.taskgen.draw import Candidate, Choice, choices, draw
from app.taskgen.registry import load_generator
from app.taskgen.splits import Split
from app.taskgen.validate import Validator

# Give up when this many attempts per requested task found nothing (e.g. a tiny family filter
# whose stories are all duplicates).
MAX_ATTEMPTS_PER_TASK = 20
CHUNK = 25


@dataclass
class Summary:
    written: int = 0
    attempts: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    filtered: int = 0
    family: Counter[str] = field(default_factory=Counter)
    difficulty: Counter[int] = field(default_factory=Counter)
    tool: Counter[str] = field(default_factory=Counter)
    kind: Counter[str] = field(default_factory=Counter)
    answer_kind: Counter[str] = field(default_factory=Counter)
    # What a policy could memorise: distinct gold call lists, the tasks holding each identifier.
    golds: set[str] = field(default_factory=set)
    identifiers: Counter[str] = field(default_factory=Counter)
    # Per family: tasks by kind (twins: a family's tasks that act and that decline) and tasks
    # with a distractor in their seed.
    family_kind: dict[str, Counter[str]] = field(default_factory=dict)
    distracted: Counter[str] = field(default_factory=Counter)

    def add(self, task: dict[str, Any]) -> None:
        self.written += 1
        self.golds.add(json.dumps(task["ground_truth"], sort_keys=True))
        self.identifiers.update(gold_identifiers(task))
        self.family_kind.setdefault(task["family"], Counter())[task["kind"]] += 1
        self.distracted[task["family"]] += bool(task.get("distractors"))
        self.family[task["family"]] += 1
        self.difficulty[task["difficulty"]] += 1
        self.kind[task["kind"]] += 1
        answer = task.get("expected_answer") or {}
        decline = "decline" if task.get("expected_decline") else None
        kind = task.get("answer_kind") or answer.get("kind") or decline or "-"
        self.answer_kind[kind if isinstance(kind, str) else "+".join(kind)] += 1
        self.tool.update(c["name"] for c in task["ground_truth"])

    def most_shared(self) -> tuple[str, int]:
        """The identifier in the most tasks' gold (ties: the first by name) and its count."""
        if not self.identifiers:
            return ("", 0)
        return min(self.identifiers.items(), key=lambda item: (-item[1], item[0]))

    def twins(self) -> dict[str, dict[str, int]]:
        """Families whose tasks decline (a refusal kind) or are named refuse_*: tasks by kind,
        so the share of allowed and forbidden twins of each is plain."""
        return {
            family: dict(sorted(kinds.items()))
            for family, kinds in sorted(self.family_kind.items())
            if "refusal" in kinds or family.startswith("refuse")
        }


@dataclass(frozen=True)
class Request:
    env: str
    count: int
    seed: int
    split: Split = "train"
    difficulties: frozenset[int] = frozenset()
    families: tuple[str, ...] = ()


# --- worker side: one generator and validator per process -------------------------------------
_worker: dict[str, Any] = {}


def _init_worker(request: Request) -> None:
    """A pool worker: `_init`, then the collector told that what init built lives on (frozen
    out of its generations) and to collect less often. The ORM allocates a great deal per tool
    call; at Python's default thresholds collecting took ≈ 1 ms of a generated task."""
    _init(request)
    gc.freeze()
    gc.set_threshold(*_GC_THRESHOLDS)


_GC_THRESHOLDS = (20_000, 20, 20)


@contextmanager
def _collecting_as_a_worker() -> Iterator[None]:
    """The workers' collector settings for a run in this process (`jobs=1`), restored after."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def _init(request: Request) -> None:
    gen = load_generator(request.env)
    pool = choices(gen, request.split, list(request.families) or None)
    if request.difficulties:
        pool = _probe(gen, request, pool)
    _worker.update(gen=gen, pool=pool, validator=Validator(gen.env), verdicts={})


PROBES = (-1, -2, -3)


def _probe(gen: Any, request: Request, pool: list[Choice]) -> list[Choice]:
    """Keep the (family, variant) pairs whose stories have a wanted difficulty (a family's
    difficulty follows from its gold's shape, the same for every draw but one that leaves a
    detail out: its lookup may add a step; every drawn task is filtered by its own level)."""
    kept = []
    for c in pool:
        # A bulk family's gold length varies with its draw: three probes, any one at a wanted
        # level keeps the family.
        for index in PROBES:
            probe = draw(gen, request.split, request.seed, index, [c])
            if probe.task is not None and probe.task["difficulty"] in request.difficulties:
                kept.append(c)
                break
    if not kept:
        raise ValueError(
            f"no family of {request.env} has difficulty {sorted(request.difficulties)}"
        )
    return kept


def _run(request: Request, attempts: range) -> list[Candidate]:
    gen, pool, validator = _worker["gen"], _worker["pool"], _worker["validator"]
    verdicts: dict[tuple[str, str, str], str] = _worker["verdicts"]
    out = []
    for i in attempts:
        cand = draw(gen, request.split, request.seed, i, pool)
        if cand.task is not None:
            if request.difficulties and cand.task["difficulty"] not in request.difficulties:
                cand.task, cand.reason = None, "filtered"
            else:
                # Duplicates are decided in the parent, in attempt order; a story this worker
                # validated before gets the same verdict (validation is a function of the
                # content: the key, and the kinds that verify reads).
                task = cand.task
                seen = (cand.key, task["kind"], json.dumps(task.get("answer_kind")))
                if seen not in verdicts:
                    verdicts[seen] = validator.problem(task) or ""
                cand.reason = verdicts[seen]
                if cand.reason:
                    cand.task = None
        out.append(cand)
    return out


# --- parent side ----------------------------------------------------------------------------------
def generate(
    request: Request, jobs: int = 1, advance: Callable[[int], None] = lambda n: None
) -> Iterator[dict[str, Any] | Summary]:
    """Yield the accepted tasks (task_id set) in order, then the Summary."""
    summary = Summary()
    seen: set[str] = set()
    limit = MAX_ATTEMPTS_PER_TASK * request.count + 100
    rounds = _rounds(request, jobs, limit)
    for cand in rounds:
        if summary.written >= request.count:
            break
        summary.attempts += 1
        if cand.reason == "filtered":
            summary.filtered += 1
            continue
        if cand.task is None:
            summary.dropped[cand.reason] += 1
            continue
        if cand.key in seen:
            summary.dropped["duplicate"] += 1
            continue
        seen.add(cand.key)
        task = cand.task
        task["task_id"] = f"{request.env}-{request.split}-{request.seed}-{summary.written + 1:05d}"
        summary.add(task)
        advance(1)
        yield task
    rounds.close()
    yield summary


def _rounds(request: Request, jobs: int, limit: int) -> Generator[Candidate, None, None]:
    """Candidates in attempt order; each round asks for what is still missing plus a margin."""
    start, wanted, drawn, kept = 0, request.count, 0, 0
    quiet = ExitStack()
    if jobs <= 1:
        _init(request)
        quiet.enter_context(_collecting_as_a_worker())
    pool = (
        None
        if jobs <= 1
        else ProcessPoolExecutor(jobs, initializer=_init_worker, initargs=(request,))
    )
    try:
        while start < limit:
            # What is missing at the share of attempts kept so far (19 in 20 before any), plus a
            # chunk: attempts past the count are validated for nothing when workers run ahead.
            share = max(kept / drawn, 0.05) if drawn else 0.95
            size = min(max(int(wanted / share * 1.02) + CHUNK, CHUNK), limit - start)
            chunks = [
                range(a, min(a + CHUNK, start + size)) for a in range(start, start + size, CHUNK)
            ]
            results = (
                map(lambda r: _run(request, r), chunks)
                if pool is None
                else pool.map(_run, [request] * len(chunks), chunks)
            )
            accepted = 0
            for batch in results:
                for cand in batch:
                    accepted += cand.task is not None
                    yield cand
            start += size
            wanted -= accepted
            drawn, kept = drawn + size, kept + accepted
    finally:
        quiet.close()
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def write_jsonl(path: Path, tasks: Iterator[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for task in tasks:
            fh.write(json.dumps(task, ensure_ascii=False) + "\n")
