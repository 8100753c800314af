"""The `server` and `postgres` markers that tests/conftest.py puts on by what a test uses, so that
`make test-fast` (which leaves them out) really leaves out the tests that start servers."""

from __future__ import annotations

import pytest

from tests.conftest import REPO

# live_server (a fixture), a server started in a module fixture, pg_prefix, and none of them.
FILES = (
    "server/test_e2e_server.py",
    "storage/test_disk_full.py",
    "storage/test_pg_vacuum.py",
    "integrations/test_report.py",
)


class _Marks:
    """A plugin that keeps each collected test's marker names."""

    def __init__(self) -> None:
        self.marks: dict[str, set[str]] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            self.marks[item.nodeid] = {m.name for m in item.iter_markers()}


def test_server_and_postgres_tests_are_marked_by_what_they_use() -> None:
    seen = _Marks()
    args = ["--collect-only", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-o", "addopts="]
    assert (
        pytest.main(
            [*args, "--rootdir", str(REPO), *(str(REPO / "tests" / f) for f in FILES)], [seen]
        )
        == 0
    )
    marks = {nodeid.split("[")[0]: names for nodeid, names in seen.marks.items()}
    assert "server" in marks["tests/server/test_e2e_server.py::test_real_server_rollouts"]
    assert "server" in marks["tests/storage/test_disk_full.py::test_full_disk_errors_say_so"]
    vacuum = "tests/storage/test_pg_vacuum.py::test_one_pass_at_a_time_across_workers"
    assert "postgres" in marks[vacuum]
    assert (
        not {"server", "postgres"}
        & marks["tests/integrations/test_report.py::test_bad_rollout_files_are_a_message"]
    )
