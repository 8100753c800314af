"""Settings, secrets and cookies."""

from __future__ import annotations

import stat

import pytest
from pydantic import ValidationError

from app.errors import NoSession
from app.registry import load_environment
from app.runtime.sessions import SessionManager
from app.server.cookies import CookieSigner, load_or_create_secret
from app.settings import Settings
from tests.conftest import backend_settings


def test_every_setting_is_documented():
    for name, field in Settings.model_fields.items():
        assert field.description and len(field.description) > 10, name


@pytest.mark.parametrize("weak", ["secret", "short-key", "a" * 40, "changeme"])
def test_weak_secret_is_refused(weak):
    with pytest.raises(ValidationError, match="too weak"):
        Settings(secret_key=weak)


def test_settings_read_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("STATEGYM_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("STATEGYM_MAX_OPEN_SESSIONS", "7")
    s = Settings()
    assert s.data_dir == tmp_path and s.max_open_sessions == 7


def test_an_empty_variable_means_unset(monkeypatch, tmp_path):
    monkeypatch.setenv("STATEGYM_DATA_DIR", str(tmp_path))
    for name in ("TOOL_THREADS", "OPEN_AHEAD_SESSIONS", "MAX_OPEN_SESSIONS", "ADMIN_TOKEN"):
        monkeypatch.setenv(f"STATEGYM_{name}", "")
    s = Settings()
    assert (s.tool_threads, s.open_ahead_sessions, s.admin_token) == (None, None, None)
    assert s.max_open_sessions == Settings.model_fields["max_open_sessions"].default


def test_generated_secret_is_kept_with_mode_0600(tmp_path):
    first = load_or_create_secret(None, tmp_path)
    assert len(first) >= 48
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600
    assert load_or_create_secret(None, tmp_path) == first


def test_cookie_roundtrip_and_tampering():
    signer = CookieSigner("x" * 40, 60)
    sid = "ab" * 16
    assert signer.unsign(signer.sign(sid)) == sid
    other = CookieSigner("y" * 40, 60)
    with pytest.raises(NoSession):
        other.unsign(signer.sign(sid))
    with pytest.raises(NoSession):
        signer.unsign(signer.sign("cd" * 16).replace("cd" * 16, sid))


def test_worker_threads_are_the_backends_unless_set(tmp_path):
    env = load_environment("retail")
    default = SessionManager(backend_settings("sqlite", tmp_path / "a", None), env)
    chosen = SessionManager(backend_settings("sqlite", tmp_path / "b", None, tool_threads=3), env)
    try:
        assert default.threads == 2 and default.executor._max_workers == 2
        # Tool calls and verifies on lanes of their own, each one thread more than a client's
        # share (app/runtime/lanes.py): 2 + 1, 3 + 1; verifies half the worker threads + 1.
        assert default.tool_executor._max_workers == 3
        assert chosen.threads == 3 and chosen.tool_executor._max_workers == 4
        assert default.verify_executor._max_workers == 2
        assert chosen.verify_executor._max_workers == 2
    finally:
        for manager in (default, chosen):
            manager.executor.shutdown()
            for lane in (manager.tool_lane, manager.verify_lane):
                lane.executor.shutdown()
            for lane in (manager.replay_lane, manager.gold_lane):
                lane.executor.shutdown()
            manager.backend.dispose()


def test_on_postgresql_more_threads_and_a_connection_for_each(tmp_path, pg_prefix):
    env = load_environment("retail")
    default = SessionManager(backend_settings("postgres", tmp_path / "a", pg_prefix), env)
    chosen = SessionManager(
        backend_settings("postgres", tmp_path / "b", pg_prefix, tool_threads=3, pg_pool_size=5),
        env,
    )
    sized = SessionManager(
        backend_settings("postgres", tmp_path / "c", pg_prefix, tool_threads=3), env
    )
    try:
        assert default.threads == 6 and default.tool_executor._max_workers == 7
        # One connection per thread of the three pools (6 + 6 + 3 verify threads), plus one
        # (the lanes' spare threads wait for a connection when every other one is busy).
        assert default.verify_executor._max_workers == 4
        assert default.backend.engine.pool.size() == 16  # type: ignore[attr-defined]
        assert chosen.threads == 3 and chosen.backend.engine.pool.size() == 5  # type: ignore[attr-defined]
        assert sized.backend.engine.pool.size() == 8  # type: ignore[attr-defined]
    finally:
        for manager in (default, chosen, sized):
            manager.executor.shutdown()
            for lane in (manager.tool_lane, manager.verify_lane):
                lane.executor.shutdown()
            for lane in (manager.replay_lane, manager.gold_lane):
                lane.executor.shutdown()
            manager.backend.dispose()
