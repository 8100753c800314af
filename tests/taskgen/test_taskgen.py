"""`stategym tasks generate`: every generated task passes `tasks check`, output is byte-identical
for a seed, train and test share no name, voice or held-out variant, duplicates are dropped.

The 500-task-per-environment and 10,000-task runs are marked slow (`pytest -m slow`); the
default run generates a handful per environment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.registry import environment_names
from app.taskgen.draw import choices, draw
from app.taskgen.driver import Request, Summary, generate
from app.taskgen.kit import HARD_TIER_STEPS, answer_kind, difficulty
from app.taskgen.registry import load_generator
from app.taskgen.splits import VOICES, split_names, split_variants
from app.taskgen.validate import content_key

ENVS = environment_names()
FIELDS = ("task_id", "env", "split", "family", "variant", "phrasing", "difficulty", "kind")


def _tasks(request: Request, jobs: int = 1) -> tuple[list[dict[str, Any]], Summary]:
    items = list(generate(request, jobs))
    summary = items.pop()
    assert isinstance(summary, Summary)
    return items, summary  # type: ignore[return-value]


def _write(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks))
    return path


def _check_file(path: Path) -> None:
    result = CliRunner().invoke(cli, ["tasks", "check", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"]


def _check_generated(env: str, count: int, tmp_path: Path, jobs: int = 1) -> list[dict]:
    tasks, summary = _tasks(Request(env, count, seed=11), jobs)
    assert summary.written == count == len(tasks)
    for t in tasks:
        assert all(t.get(f) not in (None, "") for f in FIELDS), t["task_id"]
        assert 1 <= t["difficulty"] <= 5 and t["split"] == "train"
        assert t["kind"] in ("write", "read", "refusal")
    _check_file(_write(tmp_path / f"{env}.jsonl", tasks))
    return tasks


@pytest.mark.parametrize("env", ENVS)
def test_generated_tasks_pass_tasks_check(env: str, tmp_path: Path) -> None:
    _check_generated(env, 4, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("env", ENVS)
def test_500_generated_tasks_of_every_difficulty_pass_tasks_check(env: str, tmp_path: Path) -> None:
    tasks = _check_generated(env, 500, tmp_path, jobs=2)
    assert {t["difficulty"] for t in tasks} == {1, 2, 3, 4, 5}


def test_generate_command_is_byte_identical_for_a_seed(tmp_path: Path) -> None:
    outs = []
    for n, jobs in enumerate(("1", "1", "2")):
        out = tmp_path / f"{n}.jsonl"
        args = ["tasks", "generate", "--env", "sql", "--count", "4", "--seed", "7", str(out)]
        result = CliRunner().invoke(cli, [*args, "--jobs", jobs, "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["written"] == 4
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]  # same seed, same bytes, whatever the worker count
    other = tmp_path / "other.jsonl"
    CliRunner().invoke(cli, ["tasks", "generate", "--env", "sql", "--count", "4", str(other)])
    assert other.read_bytes() != outs[0]


def test_difficulty_and_family_filters(tmp_path: Path) -> None:
    tasks, _ = _tasks(Request("retail", 3, seed=2, difficulties=frozenset({1})))
    assert {t["difficulty"] for t in tasks} == {1}
    tasks, _ = _tasks(Request("retail", 3, seed=2, families=("cancel", "refuse_status")))
    assert {t["family"] for t in tasks} <= {"cancel", "refuse_status"}
    with pytest.raises(ValueError, match="unknown families"):
        _tasks(Request("retail", 1, seed=2, families=("nope",)))


def test_levels_4_and_5_are_the_hard_tier_only() -> None:
    gen = load_generator("retail")
    read = {"name": "get_order_details", "arguments": {}}
    write = {"name": "cancel_pending_order", "arguments": {}}
    decline = {"name": "decline_request", "arguments": {}}

    def level(reads: int, writes: int, *, distractor: bool = False, refuses: bool = False) -> int:
        gold = [read] * reads + [write] * writes + [decline] * refuses
        return difficulty(gen, gold, "cancel", distractor)

    assert [level(0, 1), level(2, 1), level(5, 1), level(9, 0)] == [1, 2, 3, 3]
    assert level(1, 0, refuses=True) == 2
    # Short tasks stay below the tier, however many writes or distractors they have.
    assert level(1, 2) == 3 and level(2, 4) == 3 and level(8, 1, distractor=True) == 3
    # The tier: 10 steps or more; 20 or more, or a distractor, make it 5.
    assert level(HARD_TIER_STEPS - 1, 1) == 4 and level(12, 5) == 4
    assert level(20, 0) == 5 and level(11, 1, distractor=True) == 5


def test_the_hard_tier_draws_only_long_tasks() -> None:
    tasks, _ = _tasks(Request("retail", 4, seed=5, difficulties=frozenset({4, 5})))
    assert len(tasks) == 4
    for t in tasks:
        steps = [
            c for c in t["ground_truth"] if c["name"] not in ("submit_answer", "decline_request")
        ]
        assert len(steps) >= HARD_TIER_STEPS, (t["family"], len(steps))


def test_duplicates_are_dropped_and_counted() -> None:
    # A catalogue lookup has few distinct stories (a category per variant): asking for more
    # than exist yields each once, the rest dropped as duplicates.
    tasks, summary = _tasks(Request("retail", 8, seed=1, families=("lookup_catalog",)))
    keys = [content_key(_story(t)) for t in tasks]
    assert len(keys) == len(set(keys))
    assert summary.dropped["duplicate"] > 0 or summary.written == 8


def _story(task: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in task.items() if k not in ("task_id", "phrasing")}


@pytest.mark.parametrize("env", ENVS)
def test_split_pools_are_disjoint(env: str) -> None:
    gen = load_generator(env)
    assert not set(split_names(gen.names, "train")) & set(split_names(gen.names, "test"))
    assert not {v for pair in VOICES["train"] for v in pair if v} & {
        v for pair in VOICES["test"] for v in pair if v
    }
    for _fn, n in gen.plan:
        train, test = set(split_variants(n, "train")), set(split_variants(n, "test"))
        assert n < 2 or not train & test


@pytest.mark.parametrize("env", ENVS)
def test_train_and_test_share_no_family_phrasing_entity(env: str) -> None:
    gen = load_generator(env)
    pool_names = {f"{a} {b}" for a, b in gen.names}
    seen: dict[str, list[dict[str, Any]]] = {}
    for split in ("train", "test"):
        pool = choices(gen, split, None)  # type: ignore[arg-type]
        drawn = [draw(gen, split, 5, i, pool).task for i in range(8)]  # type: ignore[arg-type]
        seen[split] = [t for t in drawn if t is not None]
    phrasings = [{t["phrasing"] for t in seen[s]} for s in ("train", "test")]
    assert not phrasings[0] & phrasings[1]
    people = [{p for t in seen[s] for p in t["entities"] if p in pool_names} for s in seen]
    assert not people[0] & people[1]
    # A distractor (a similar name) never is a person of the other split's pool.
    for split, other in (("train", "test"), ("test", "train")):
        pool = {f"{a} {b}" for a, b in split_names(gen.names, other)}  # type: ignore[arg-type]
        assert not {d for t in seen[split] for d in t["distractors"]} & pool
    multi = {fn.__name__ for fn, n in gen.plan if n > 1}
    held = [{(t["family"], t["variant"]) for t in seen[s] if t["family"] in multi} for s in seen]
    assert not held[0] & held[1]


@pytest.mark.scale
def test_no_duplicates_in_10000_retail_tasks(tmp_path: Path) -> None:
    tasks, summary = _tasks(Request("retail", 10_000, seed=3), jobs=2)
    assert summary.written == 10_000
    assert len({content_key(_story(t)) for t in tasks}) == 10_000
    # Stronger: no two share their seeded state, gold and answer, whatever their wording.
    assert len({_state_key(t) for t in tasks}) == 10_000


def _state_key(task: dict[str, Any]) -> str:
    return json.dumps(
        [task["seed"], task["ground_truth"], task.get("expected_outputs")], sort_keys=True
    )


@pytest.mark.parametrize(
    ("family", "expected", "kind"),
    [
        ("lookup_price", ["19.99"], "amount"),
        ("lookup_x", ["2026-03-14"], "date"),
        ("lookup_x", ["12"], "number"),
        ("lookup_x", ["#W9001000"], "id"),
        ("lookup_x", ["Anna Weber"], "name"),
        ("lookup_x", ["a", "b"], ["text", "text"]),
        ("lookup_x", ["19.99", "Anna Weber"], ["amount", "name"]),
        ("refuse_status", [], "refusal"),
        ("cancel", [], None),
    ],
)
def test_answer_kind(family: str, expected: list[str], kind: str | None) -> None:
    assert answer_kind(family, expected) == kind


def test_export_generated_train_and_validation_with_config(tmp_path: Path) -> None:
    import yaml

    files = {}
    for split in ("train", "test"):
        tasks, _ = _tasks(Request("sql", 2, seed=4, split=split))  # type: ignore[arg-type]
        files[split] = _write(tmp_path / f"{split}.jsonl", tasks)
    out, config = tmp_path / "gym" / "sql.jsonl", tmp_path / "gym" / "sql.yaml"
    args = ["export", "nemo-gym", "--env", "sql", "--tasks", str(files["train"])]
    args += ["--validation-tasks", str(files["test"]), "--config", str(config), str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    agent = yaml.safe_load(config.read_text())["stategym_sql_simple_agent"]
    sets = agent["responses_api_agents"]["simple_agent"]["datasets"]
    assert [(d["type"], Path(d["jsonl_fpath"]).name) for d in sets] == [
        ("train", "sql.jsonl"),
        ("validation", "sql_validation.jsonl"),
    ]
    for d, split in zip(sets, ("train", "test"), strict=True):
        rows = [json.loads(line) for line in Path(d["jsonl_fpath"]).read_text().splitlines()]
        assert [r["split"] for r in rows] == [split, split]
        assert all(r["agent_ref"]["name"] == "stategym_sql_simple_agent" for r in rows)
    wrong = CliRunner().invoke(
        cli, ["export", "nemo-gym", "--tasks", str(files["train"]), str(out)]
    )
    assert wrong.exit_code != 0 and "not retail" in wrong.output


def test_validator_drops_what_tasks_check_would_refuse(tmp_path: Path) -> None:
    """The in-memory validator (tracked base image, patched dumps) refuses each kind of broken
    task, through the real runner and verifier."""
    import copy

    from app.taskgen.validate import Validator

    gen = load_generator("retail")
    pool = choices(gen, "train", ["cancel"])
    drawn = (draw(gen, "train", 1, i, pool).task for i in range(10))
    # A cancel that is allowed (its forbidden twins decline and write nothing).
    writes = (
        t for t in drawn if t is not None and "cancel_pending_order" in str(t["ground_truth"])
    )
    task = next(writes)
    validator = Validator(gen.env)
    assert validator.problem(task) is None

    no_write = copy.deepcopy(task)
    no_write["ground_truth"] = [
        c for c in task["ground_truth"] if c["name"] != "cancel_pending_order"
    ]
    assert validator.problem(no_write) in ("gold changed nothing", "no-op above 0")

    failing = copy.deepcopy(task)
    cancel = next(c for c in failing["ground_truth"] if c["name"] == "cancel_pending_order")
    cancel["arguments"]["order_number"] = "#W0000000"
    assert validator.problem(failing) == "gold below 1"

    collide = copy.deepcopy(task)
    customers = collide["seed"]["rows"]["customers"]
    customers.append(dict(customers[0], email="other@example.org"))
    assert validator.problem(collide) == "id collision in customers"

    low = copy.deepcopy(task)
    low["seed"]["rows"]["customers"][0]["id"] = 99_999
    assert validator.problem(low).startswith("new customers row below the story id floor 100,000")


def test_shared_work_gives_what_running_again_gives() -> None:
    """What validation shares between the checks of one story equals computing it again: a
    story's recorded outcomes (`gold_outcomes`) equal a fresh run's, and the no-op verify handed
    the seeded image's invariant violations (ledger's self-check evaluated them on a clone of
    the same bytes) scores as evaluating them itself."""
    from app.core.tasks import task_from_data
    from app.taskgen import gold_run as runs
    from app.taskgen.validate import _OneTaskGold
    from app.verify.gold import GoldState
    from app.verify.session_verify import verify_state
    from app.verify.state.diff import diff_states
    from app.verify.state.dump import dump_state

    gen = load_generator("ledger")
    env, tables, compare = gen.env, gen.env.metadata.tables, gen.env.compare
    pool = choices(gen, "train", None)
    task = next(t for t in (draw(gen, "train", 5, i, pool).task for i in range(9)) if t)
    seed, gold = task["seed"], task["ground_truth"]
    recorded = runs.gold_outcomes(env, seed, gold)
    runs.forget(env, seed, gold)
    fresh = runs.gold_run(env, seed, gold)
    assert recorded == (list(fresh.outcomes), fresh.changed)
    assert runs.gold_outcomes(env, seed, gold) == recorded
    with runs.bound(fresh.seeded) as c, c.begin():
        seeded = dump_state(c, tables, compare)
    with fresh.final.begin():
        final = dump_state(fresh.final, tables, compare)
    reference = GoldState(seeded, final, diff_states(seeded, final, compare, exact=True), ())
    results = []
    for violations in (None, []):
        with runs.bound(fresh.seeded) as again:
            results.append(
                verify_state(
                    env=env,
                    gold=_OneTaskGold(reference),  # type: ignore[arg-type]
                    engine=again,  # type: ignore[arg-type]
                    task=task_from_data(task),
                    response={"output": []},
                    diff_limit=0,
                    with_steps=False,
                    invariant_violations=violations,
                )
            )
    assert results[0] == results[1]
    assert results[0]["reward"] == 0.0
    assert results[0]["reward_components"]["invariants_ok"] == 1.0
