"""Session cookies: an unguessable session id, an issue time and an HMAC over both.

Value format: `<session_id>.<issued_unix>.<signature>`. Anything that fails to parse or verify is
treated as no session; cookies of other servers are simply never read.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path

from app.errors import NoSession, SessionExpired
from app.storage.snapshots import SESSION_ID_RE

SECRET_FILE = "secret_key"


def load_or_create_secret(configured: str | None, data_dir: Path) -> str:
    """The configured secret, else one generated once and kept (mode 0600) in the data dir."""
    if configured:
        return configured
    path = data_dir / SECRET_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as fh:  # several workers may race here: O_EXCL picks one writer
        fh.write(secrets.token_urlsafe(48))
    return path.read_text().strip()


class CookieSigner:
    def __init__(self, secret: str, max_age_seconds: int, *, purpose: str = "cookie"):
        # One key per purpose: a value signed as a cookie never verifies as an MCP token.
        self._key = hashlib.sha256(f"stategym-{purpose}:{secret}".encode()).digest()
        self.max_age = max_age_seconds

    def _signature(self, payload: str) -> str:
        mac = hmac.new(self._key, payload.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def mac(self, data: bytes) -> str:
        """An HMAC of `data` under this purpose's key (session exports are signed with it)."""
        digest = hmac.new(self._key, data, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def sign(self, session_id: str, issued: int | None = None) -> str:
        payload = f"{session_id}.{int(time.time()) if issued is None else issued}"
        return f"{payload}.{self._signature(payload)}"

    def unsign(self, value: str) -> str:
        """The session id in a cookie value; NoSession when forged, malformed or expired."""
        parts = value.split(".")
        if len(parts) != 3 or not SESSION_ID_RE.fullmatch(parts[0]) or not parts[1].isdigit():
            raise NoSession(
                "the session cookie is malformed",
                hint="Call POST /seed_session and forward the cookie it sets.",
            )
        payload = f"{parts[0]}.{parts[1]}"
        if not hmac.compare_digest(self._signature(payload), parts[2]):
            raise NoSession(
                "the session cookie's signature is invalid (forged, or signed with another secret)",
                hint="Call POST /seed_session and forward the cookie it sets.",
            )
        if time.time() - int(parts[1]) > self.max_age:
            raise SessionExpired(
                "the session cookie has expired",
                hint="Start a new rollout with POST /seed_session.",
            )
        return parts[0]
