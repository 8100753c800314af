"""GET /metrics and the per-interval log line: a long run can be watched from outside."""

from __future__ import annotations

from pathlib import Path

from app.registry import load_environment
from app.server.metrics import Stats, directory_bytes, operation_of
from tests.support.rollouts import load_tasks, run_rollout


def test_requests_are_classified_by_protocol_operation() -> None:
    assert operation_of("POST", "/seed_session") == "seed"
    assert operation_of("POST", "/verify") == "verify"
    assert operation_of("POST", "/close_session") == "close"
    assert operation_of("POST", "/cancel_pending_order") == "tool"
    assert operation_of("GET", "/tools") == "other"
    assert operation_of("POST", "/aggregate_metrics") == "other"
    assert operation_of("GET", "/admin/sessions") == "other"


async def test_metrics_count_what_a_rollout_did(client_factory, settings) -> None:
    task = load_tasks(load_environment("retail").tasks_path)[20]
    async with client_factory(load_environment("retail")) as client:
        before = (await client.get("/metrics")).text
        await run_rollout(client, task, task["ground_truth"], "")
        after = await client.get("/metrics")
        assert after.status_code == 200
        assert after.headers["content-type"].startswith("text/plain")
        text = after.text
        calls = len(task["ground_truth"])
        assert f'stategym_request_seconds_count{{operation="tool"}} {float(calls)}' in text
        assert 'stategym_request_seconds_count{operation="verify"} 1.0' in text
        assert 'stategym_request_seconds_count{operation="seed"} 1.0' in text
        assert "stategym_rss_bytes" in text and "stategym_open_fds" in text
        assert "stategym_live_sessions 0.0" in text  # the rollout closed its session
        assert 'operation="tool"' not in before


async def test_metrics_off_is_a_404_and_tools_still_route(client_factory, settings) -> None:
    off = settings.model_copy(update={"metrics": False})
    async with client_factory(load_environment("retail"), off) as client:
        answer = await client.get("/metrics")
        assert answer.status_code in (404, 405)


def test_the_interval_line_says_rate_percentiles_and_resources(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x" * 4096)
    stats = Stats(tmp_path, lambda: 3)
    for ms in range(1, 101):
        stats.observe("tool", ms / 1000, 200)
    stats.observe("verify", 0.004, 500)
    line = stats.summary_line(60.0)
    assert "tool=1.7/s p50=51.0ms p99=100.0ms" in line, line
    assert "live=3" in line and "errors_5xx=1" in line and "rollouts=1" in line
    assert directory_bytes(tmp_path) == 4096
    assert not any(stats.window.values())  # the next interval starts empty
