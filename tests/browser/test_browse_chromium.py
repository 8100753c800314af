"""`stategym browse` in headless Chromium: a session's rows are on Datasette's raw SQL view.

Needs the Debian packages `chromium` and `chromium-driver` (never a downloaded browser);
run it with `scripts/test-browser.sh`.
"""

from __future__ import annotations

import os

import pytest

from tests.authoring.test_sessions_cli import build_rollouts
from tests.conftest import stop_server
from tests.explorer.test_browse import start_browse

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        os.environ.get("STATEGYM_BROWSER_TESTS") != "1",
        reason="browser test: run scripts/test-browser.sh (sets STATEGYM_BROWSER_TESTS=1)",
    ),
]


def test_session_rows_show_in_chromium(tmp_path, chromium):
    from selenium.webdriver.common.by import By

    data_dir = tmp_path / "data"
    ids = build_rollouts(data_dir)
    proc, url = start_browse(data_dir)
    sql = f"{url}/-/datasette"
    try:
        chromium.get(f"{sql}/")
        assert ids["gold"] in chromium.page_source  # the newest sessions are listed by id
        # The order the gold rollout cancelled, as that session's database holds it.
        chromium.get(f"{sql}/{ids['gold']}/orders?id=102002")
        table = chromium.find_element(By.CSS_SELECTOR, "table.rows-and-columns").text
        assert "#W90200010" in table and "cancelled" in table
        # The same order in the rollout that did nothing is still pending.
        chromium.get(f"{sql}/{ids['noop']}/orders?id=102002")
        table = chromium.find_element(By.CSS_SELECTOR, "table.rows-and-columns").text
        assert "#W90200010" in table and "pending" in table and "cancelled" not in table
    finally:
        stop_server(proc)


def test_old_timeline_address_shows_the_rollout_in_chromium(tmp_path, chromium):
    """/-/timeline/<id> leads to the rollout page: each step's call, rows, step reward."""
    from selenium.webdriver.common.by import By

    data_dir = tmp_path / "data"
    ids = build_rollouts(data_dir)
    proc, url = start_browse(data_dir)
    try:
        chromium.get(f"{url}/-/timeline/{ids['gold']}")
        steps = chromium.find_elements(By.CSS_SELECTOR, "li.step")
        assert len(steps) == 3
        cancel = steps[-1].text
        assert "cancel_pending_order" in cancel and "#W90200010" in cancel
        assert "pending" in cancel and "cancelled" in cancel  # the order's row, before -> after
        rewards = [e.text for e in chromium.find_elements(By.CSS_SELECTOR, "strong.reward")]
        assert rewards[-1] == "+1"
    finally:
        stop_server(proc)
