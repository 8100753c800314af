"""The run explorer in headless Chromium against `stategym browse` serving rollouts that really
ran (pass, fail, fork, refusal), on SQLite and PostgreSQL: every page loads with its content,
no script, nothing from another origin, labelled inputs, one h1.

With STATEGYM_SCREENSHOT_DIR set (scripts/test-browser.sh --screenshots: docs/images), each
page of the SQLite run is saved there as PNG for docs/inspecting.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import (
    PG_URL,
    REPO,
    backend_settings,
    drop_pg_schemas,
    free_port,
    new_pg_prefix,
    pg_unavailable_reason,
    stop_server,
)
from tests.support.explorer_runs import PENDING, build_explorer_runs

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        os.environ.get("STATEGYM_BROWSER_TESTS") != "1",
        reason="browser test: run scripts/test-browser.sh (sets STATEGYM_BROWSER_TESTS=1)",
    ),
]


def start_explorer(data_dir: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """`stategym browse` on a free port; (process, base URL) once it answers."""
    port = free_port()
    cmd = [sys.executable, "-m", "app", "browse", "--data-dir", str(data_dir),
           "--port", str(port)]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=REPO, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            output = proc.stdout.read().decode() if proc.stdout else ""
            raise RuntimeError(f"browse exited early ({proc.returncode}):\n{output}")
        try:
            if httpx.get(url + "/-/static/explorer.css", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    stop_server(proc)
    raise RuntimeError("stategym browse did not answer within 60 s")


@pytest.fixture(params=["sqlite", "postgres"])
def served(request, tmp_path) -> Iterator[tuple[str, dict[str, str], str]]:
    """(base URL, rollout ids, backend) of a `stategym browse` over the four rollouts."""
    prefix, env = None, {}
    if request.param == "postgres":
        reason = pg_unavailable_reason()
        if reason:
            pytest.skip(reason)
        prefix = new_pg_prefix()
        env = {"STATEGYM_DATABASE_URL": PG_URL, "STATEGYM_PG_SCHEMA_PREFIX": prefix}
    data_dir = tmp_path / "data"
    try:
        ids = build_explorer_runs(backend_settings(request.param, data_dir, prefix))
        proc, url = start_explorer(data_dir, env)
        try:
            yield url, ids, request.param
        finally:
            stop_server(proc)
    finally:
        if prefix:
            drop_pg_schemas(prefix)


def _check_page(driver: Any, url: str, name: str, backend: str) -> None:
    """Load `url`; the page is whole, script-free, same-origin only and labelled."""
    from selenium.webdriver.common.by import By

    driver.set_window_size(1400, 1000)
    driver.get(url)
    assert driver.find_elements(By.TAG_NAME, "h1"), f"{name}: no h1"
    assert len(driver.find_elements(By.TAG_NAME, "h1")) == 1
    assert driver.find_elements(By.TAG_NAME, "script") == []  # no JavaScript needed
    origin = url.split("/", 3)[:3]
    for entry in driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    ):
        assert entry.split("/", 3)[:3] == origin, f"{name} fetched {entry}"
    unlabelled = driver.find_elements(
        By.XPATH,
        "//input[not(@type='hidden') and not(ancestor::label)] | //select[not(ancestor::label)]",
    )
    assert unlabelled == [], f"{name}: inputs without a label"
    shots = os.environ.get("STATEGYM_SCREENSHOT_DIR")
    if shots and backend == "sqlite":
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1400, min(height + 120, 3600))
        Path(shots).mkdir(parents=True, exist_ok=True)
        path = Path(shots) / f"explorer-{name}.png"
        driver.save_screenshot(str(path))
        from PIL import Image  # matplotlib's dependency: a 256-colour PNG is a third the size

        Image.open(path).convert("RGB").quantize(256).save(path, optimize=True)


def test_every_explorer_page_in_chromium(served, chromium):
    from selenium.webdriver.common.by import By

    url, ids, backend = served
    driver = chromium
    _check_page(driver, f"{url}/", "runs", backend)
    rows = driver.find_elements(By.CSS_SELECTOR, "table.runs tr.run")
    assert len(rows) == 4
    assert "final state differs from gold" in driver.find_element(By.TAG_NAME, "main").text
    assert driver.find_elements(By.CSS_SELECTOR, "svg[role=img]")  # the reward histogram
    # A filter through the form: runs under 0.5 only. The wait is on the new document (its URL
    # carries the filter, and it has loaded), not on the old table going stale: Chromium may
    # answer a query on a node of the unloading page with an inspector error instead.
    from selenium.webdriver.support.wait import WebDriverWait

    driver.find_element(By.NAME, "reward_max").send_keys("0.5")
    driver.find_element(By.CSS_SELECTOR, "form.filters button").click()
    WebDriverWait(driver, 30).until(
        lambda d: (
            "reward_max=0.5" in d.current_url
            and d.execute_script("return document.readyState") == "complete"
        )
    )
    assert len(driver.find_elements(By.CSS_SELECTOR, "table.runs tr.run")) == 1

    _check_page(driver, f"{url}/rollouts/{ids['pass']}", "rollout", backend)
    steps = driver.find_elements(By.CSS_SELECTOR, "li.step")
    assert len(steps) == 3 and "cancel_pending_order" in steps[-1].text
    changed = driver.find_elements(By.CSS_SELECTOR, "table.change tr.changed")
    assert any("pending" in r.text and "cancelled" in r.text for r in changed)
    assert driver.find_element(By.CSS_SELECTOR, "strong.reward").text in ("+0", "+1")

    _check_page(driver, f"{url}/rollouts/{ids['fail']}", "rollout-failed", backend)
    assert driver.find_elements(By.CSS_SELECTOR, ".badge.error")
    assert "expected (gold)" in driver.find_element(By.ID, "main").text

    _check_page(driver, f"{url}/rollouts/{ids['fork']}", "rollout-fork", backend)
    assert f"Fork of {ids['pass']} at step 2" in driver.find_element(By.ID, "main").text

    _check_page(driver, f"{url}/rollouts/{ids['refusal']}", "rollout-refusal", backend)
    assert "error: " in driver.find_element(By.CSS_SELECTOR, "li.step.failed").text

    _check_page(driver, f"{url}/tasks/retail/retail-020", "task", backend)
    group = driver.find_element(By.CSS_SELECTOR, "table.group")
    assert "≠ gold" in group.text and len(group.find_elements(By.CSS_SELECTOR, "td.differs")) == 1

    _check_page(
        driver, f"{url}/rollouts/{ids['pass']}/tables/orders?step=3&limit=10", "table", backend
    )
    written = driver.find_element(By.CSS_SELECTOR, "table.written").text
    assert PENDING in written and "cancelled" in written

    _check_page(driver, f"{url}/rollouts/{'0' * 32}", "not-found", backend)
    assert "unknown" in driver.find_element(By.CSS_SELECTOR, "[role=alert]").text
