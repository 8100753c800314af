"""Settings, secrets and cookies."""

from __future__ import annotations

import stat

import pytest
from pydantic import ValidationError

from app.errors import NoSession
from app.server.cookies import CookieSigner, load_or_create_secret
from app.settings import Settings


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
