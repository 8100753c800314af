"""Every registered environment, the shipped five included, meets the contract its authors get
(`stategym envs check NAME`, app/cli/env_contract.py), through the real CLI; the shipped
prompts come from the SDK (policy.md plus the declared decline codes) and their models'
header too, so no environment carries a copy of it."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from importlib import resources

import pytest
from sqlalchemy import insert
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.cli.env_contract import base_data_failures
from app.cli.main import cli
from app.registry import environment_names, load_environment
from app.sdk.policy import CODES_MARKER, decline_code_lines, policy_text
from tests.conftest import REPO
from tests.support.warehouse_env import ENVIRONMENT as WAREHOUSE
from tests.support.warehouse_env import Item

SHIPPED = ("airline", "ledger", "retail", "sql", "workplace")


# `make test` runs the contract on sql (the console kind, the cheapest); retail's (half a minute of
# gold, no-op and nudged replays) runs in `make test-slow` with the other shipped environments'
# (tests/conftest.py), its golds and no-ops are held to their recorded digests in `make test`
# (test_verify_identical.py, test_replay_identical.py).
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n == "retail" else n for n in environment_names()],
)
def test_every_registered_environment_meets_the_contract(name: str) -> None:
    result = CliRunner().invoke(cli, ["envs", "check", name, "--json"])
    report = json.loads(result.stdout)
    assert report["failures"] == [] and report["ok"] is True, report["failures"][:20]
    assert result.exit_code == 0


def test_the_shipped_environments_are_registered() -> None:
    assert set(SHIPPED) <= set(environment_names())


# Cheap checks loop over the five in one test (a test parametrised by airline, ledger or
# workplace is a slow sweep: tests/conftest.py).
def test_each_shipped_policy_is_its_markdown_file_with_the_declared_codes() -> None:
    for name in SHIPPED:
        env = load_environment(name)
        text = resources.files(f"envs.{name}").joinpath("policy.md").read_text(encoding="utf-8")
        assert text.count(CODES_MARKER) == 1, name
        before, after = text.split(CODES_MARKER)
        assert env.policy.startswith(before) and env.policy.endswith(after), name
        listing = env.policy[len(before) : len(env.policy) - len(after)]
        codes = [line.split(":")[0].strip(" -") for line in listing.splitlines()]
        assert codes == list(env.decline_codes), name


def test_no_shipped_environment_copies_the_sdks_model_header() -> None:
    for name in SHIPPED:
        models = (REPO / "envs" / name / "models.py").read_text()
        for copy in ("= Numeric(12, 2", "def _in(", "naming_convention=", "NAMING_CONVENTION"):
            assert copy not in models, f"envs/{name}/models.py copies {copy!r} (app/sdk/models.py)"
        policy = (REPO / "envs" / name / "policy.py").read_text()
        assert "DECLINE_REASONS.items()" not in policy, f"{name}: app/sdk/policy.py lists codes"


def test_decline_code_lines_keep_the_declared_order_and_form() -> None:
    reasons = {"b_rule": "the second letter", "a_rule": "the first"}
    assert decline_code_lines(reasons) == "- b_rule: the second letter\n- a_rule: the first"
    assert decline_code_lines(reasons, indent="  ", full_stop=True) == (
        "  - b_rule: the second letter.\n  - a_rule: the first."
    )


def test_a_policy_file_without_the_marker_is_refused() -> None:
    # A package's README has no place for the codes: declaring codes the prompt never lists fails.
    with pytest.raises(ValueError, match="decline_codes"):
        policy_text("envs.retail", {"rule": "a rule"}, filename="README.md")


def _drifting_base(db: Session, rng: random.Random) -> None:
    """Draws from the process-wide generator, not from `rng`: two builds differ."""
    row = {"sku": "S-1", "name": "n", "quantity": random.randrange(10**9), "price": 1.0}
    db.execute(insert(Item), [row])


def test_a_base_that_ignores_its_rng_is_reported() -> None:
    assert list(base_data_failures(WAREHOUSE)) == []
    [line] = base_data_failures(replace(WAREHOUSE, build_base=_drifting_base))
    assert "not deterministic" in line and "items" in line
