"""The long twin of tests/server/test_hostile_input.py's fuzzing: every schemathesis phase,
coverage included, and many more examples per operation (`make test-slow`, which CI runs).

Schemathesis builds the coverage phase's cases when it collects, seconds per pytest process run
or not: tests/conftest.py (`SLOW_ONLY_MODULES`) leaves this module unimported unless the marker
expression selects `slow`.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from tests.server.test_hostile_input import APP, BYSTANDER, BYSTANDER_BEFORE, check_case, dump

pytestmark = pytest.mark.slow
schema = schemathesis.openapi.from_asgi("/openapi.json", APP).exclude(path_regex="^/admin")


@schema.parametrize()
@hypothesis_settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
def test_schemathesis_longer_run_finds_no_5xx(case):
    check_case(case)


def test_bystander_session_untouched_by_the_long_fuzz():
    # Runs after the fuzz cases in this module (pytest keeps file order).
    assert dump(BYSTANDER) == BYSTANDER_BEFORE
