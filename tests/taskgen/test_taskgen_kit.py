"""The generator kit in the SDK (app/sdk/seed_builder.py, people.py, phrasing.py) and the
`stategym tasks generate` errors an author meets: a missing generator, a failing shipped story."""

from __future__ import annotations

import ast
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.sdk.people import PEOPLE, PersonColumns, name_grid, name_pool
from app.sdk.phrasing import Phrasing, opening, sentence_starting
from app.sdk.seed_builder import BLOCK, STORY_ID_FLOOR, SeedBuilder
from app.taskgen.kit import decline_subjects
from app.taskgen.phrasing import rephrase

REPO = Path(__file__).resolve().parents[2]
KIT = ("seed_builder", "people", "phrasing")


def test_new_rows_take_ids_from_the_story_block_per_table() -> None:
    b = SeedBuilder(3, ("parents", "children"), "2026-03-14T10:00:00")
    first = b.add("children", name="x")  # tables listed in the declared order, not call order
    parent = b.add("parents", name="p")
    second = b.add("children", name="y", parent_id=parent["id"])
    assert first["id"] == STORY_ID_FLOOR + BLOCK * 3 and second["id"] == first["id"] + 1
    assert parent["id"] == STORY_ID_FLOOR + BLOCK * 3 and b.count("children") == 2
    assert b.next_id("parents") == parent["id"] + 1
    seed = b.seed()
    assert list(seed) == ["now", "rows"] and list(seed["rows"]) == ["parents", "children"]
    assert list(first) == ["id", "name"]  # the id first, as written to the task file


def test_updates_of_base_rows_follow_the_new_rows_and_seed_changes_nothing() -> None:
    b = SeedBuilder(1, ("stock", "orders"))
    b.update("stock", 7, quantity=2)
    b.add("stock", quantity=5)
    seed = b.seed(updates={"stock": [{"id": 3, "quantity": 0}]})
    assert seed == {
        "rows": {
            "stock": [
                {"id": 7, "quantity": 2},
                {"id": 100100, "quantity": 5},
                {"id": 3, "quantity": 0},
            ]
        }
    }
    assert len(b.seed()["rows"]["stock"]) == 2  # the end-of-story updates were not kept
    with pytest.raises(ValueError, match="not a base row"):
        b.update("stock", STORY_ID_FLOOR + 5, quantity=1)
    with pytest.raises(KeyError, match="not one of the seed's tables"):
        b.add("customers", name="z")


def test_table_order_can_come_from_the_metadata() -> None:
    from envs.retail import ENVIRONMENT

    b = SeedBuilder(1, ENVIRONMENT.metadata)
    names = list(b.rows)
    assert names.index("customers") < names.index("orders") < names.index("order_items")


def test_name_pools() -> None:
    assert len(set(PEOPLE)) == len(PEOPLE) and name_pool(3) == list(PEOPLE[:3])
    assert name_pool(2, replace={1: ("Ada", "Lovelace")}) == [PEOPLE[0], ("Ada", "Lovelace")]
    assert name_grid(["A", "B"], ["X", "Y"]) == [("A", "X"), ("A", "Y"), ("B", "X"), ("B", "Y")]
    assert sorted(name_grid(["A", "B"], ["X"], shuffle="s")) == [("A", "X"), ("B", "X")]


def test_people_are_where_the_environment_says() -> None:
    seed = {
        "rows": {
            "users": [{"id": 1, "first_name": "Mia", "last_name": "Chen"}],
            "members": [{"id": 2, "name": "Ada Moreno"}, {"id": 3, "name": None}],
        }
    }
    assert PersonColumns().of(seed) == ["Mia Chen"]
    whole = PersonColumns(first="name", last=None, tables=frozenset({"members"}))
    assert whole.of(seed) == ["Ada Moreno"]


def test_rewording_is_what_the_environment_declares() -> None:
    prompt = "Hello there, I'm Ada (ada@example.org). Please renew book 5."
    declared = Phrasing(
        request=sentence_starting("Please"), greeting=opening(("Hello there",), ("I'm",))
    )
    tags: set[str] = set()
    for seed in range(60):
        rng = random.Random(seed)
        out = rephrase(prompt, "train", rng, declared)
        tags.update(t.rstrip("0123456789") for t in out.tags)
        plain = rephrase(prompt, "train", random.Random(seed), Phrasing())
        assert {t.rstrip("0123456789") for t in plain.tags} <= {"aside"}  # nothing declared
    assert tags == {"ask", "late-id", "aside"}


def test_the_kit_modules_are_leaves_of_the_sdk() -> None:
    """They import the SDK's own declarations, SQLAlchemy and the standard library only."""
    for name in KIT:
        tree = ast.parse((REPO / "app" / "sdk" / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                assert (
                    top in sys.stdlib_module_names
                    or top == "sqlalchemy"
                    or (module.startswith("app.sdk"))
                ), f"app/sdk/{name}.py imports {module}"


# --- the CLI, in a process of its own, as an author runs it ---------------------------------
TWICE_NAMED_GENERATOR = """
from app.authoring.taskgen import TaskGenerator
from tests.support.depot_env import ENVIRONMENT
from brokengen.taskgen import other


def restock(c):
    return {}


def build(index, fn, k, rng, names):
    return fn(None)


TASKGEN = TaskGenerator(
    env=ENVIRONMENT, plan=[(restock, 1), (other.restock, 2)], names=[("A", "B")], build=build
)
"""

BROKEN_GENERATOR = """
from app.authoring.taskgen import TaskGenerator
from tests.support.depot_env import ENVIRONMENT


def restock(c):
    raise AssertionError("gold call 1 (move_item) failed: no bin B-9\\nsecond line of detail")


def build(index, fn, k, rng, names):
    return fn(None)


TASKGEN = TaskGenerator(env=ENVIRONMENT, plan=[(restock, 1)], names=[("A", "B")], build=build)
"""


def _stategym(tmp_path: Path, env_module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`stategym ARGS` with environment `plug` served from `env_module` (a throw-away plugin)."""
    script = textwrap.dedent(
        f"""
        import sys
        from app.registry import ENVIRONMENTS
        ENVIRONMENTS["plug"] = {env_module!r}
        from app.cli.main import main
        sys.argv = ["stategym", *sys.argv[1:]]
        main()
        """
    )
    path = os.pathsep.join([str(REPO), str(tmp_path)])
    env = {**os.environ, "PYTHONPATH": path}
    env.pop("STATEGYM_TASKGEN_TRACEBACK", None)
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )


def test_a_missing_generator_is_one_line_naming_the_package_to_add(tmp_path: Path) -> None:
    done = _stategym(
        tmp_path, "tests.support.depot_env", "tasks", "generate", "--env", "plug", "o.jsonl"
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert (
        "environment 'plug' has no task generator: add package tests/support/depot_env/"
        in (lines[0])
    )
    assert "docs/generating_tasks.md" in lines[0] and "ModuleNotFoundError" not in done.stderr


def test_a_failing_shipped_story_is_one_line_and_a_failure(tmp_path: Path) -> None:
    package = tmp_path / "brokengen"
    (package / "taskgen").mkdir(parents=True)
    (package / "__init__.py").write_text("from tests.support.depot_env import ENVIRONMENT\n")
    (package / "taskgen" / "__init__.py").write_text(BROKEN_GENERATOR)
    done = _stategym(tmp_path, "brokengen", "tasks", "generate", "--env", "plug", "--shipped", "o")
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "error: shipped story 1 (restock, variant 0) failed: AssertionError: gold call 1 "
        "(move_item) failed: no bin B-9 -- fix brokengen.taskgen.restock (variant 0)"
    ), lines[0]
    assert "Traceback" not in done.stderr and not (tmp_path / "o").exists()


@pytest.mark.parametrize("mode", ["--shipped", pytest.param("--count", marks=pytest.mark.slow)])
def test_two_families_of_one_name_are_refused_naming_both(tmp_path: Path, mode: str) -> None:
    """The summary, `--family` and the shipped order key on a family's function name: two PLAN
    entries of one name would silently merge."""
    package = tmp_path / "brokengen"
    (package / "taskgen").mkdir(parents=True)
    (package / "__init__.py").write_text("from tests.support.depot_env import ENVIRONMENT\n")
    (package / "taskgen" / "__init__.py").write_text(TWICE_NAMED_GENERATOR)
    (package / "taskgen" / "other.py").write_text("def restock(c):\n    return {}\n")
    args = ["--shipped", "o"] if mode == "--shipped" else ["--count", "3", "o.jsonl"]
    done = _stategym(tmp_path, "brokengen", "tasks", "generate", "--env", "plug", *args)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "PLAN lists two stories named restock (brokengen.taskgen.restock and " in lines[0]
    assert "brokengen.taskgen.other.restock)" in lines[0] and "Traceback" not in done.stderr


def test_codes_stay_unique_when_a_draw_collides():
    """Outside a world, codes past the counter's width are drawn; a colliding draw is drawn
    again (it once looped for ever on the same seed)."""
    b = SeedBuilder(118, ("stock",))
    codes = [b.code(5) for _ in range(400)]
    assert len(set(codes)) == 400 and all(len(c) == 5 for c in codes)


def test_a_refused_send_is_named_by_its_record_or_its_address():
    """A forward refused for its outside address: naming the email or the address is right
    (the policy asks to name the record or address concerned); the customer is not."""
    seed = {"rows": {"emails": [{"id": 7, "message_id": "<m81@x.org>", "from": "ana9@x.org"}]}}
    refused = {
        "name": "forward_email",
        "arguments": {"message_id": "<m81@x.org>", "to": "o5@y.com"},
    }
    subjects = decline_subjects([], seed, refused)
    assert subjects == ["<m81@x.org>", "o5@y.com"]
