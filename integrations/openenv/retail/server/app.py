"""OpenEnv's app for StateGym's retail environment (settings from STATEGYM_*).

Serve it with `uvicorn server.app:app --port 8000` from this folder (StateGym installed), or
`stategym serve --env retail --protocol openenv` from anywhere (docs/integrations.md).
"""

from __future__ import annotations

import os

os.environ.setdefault("STATEGYM_ENV", "retail")

from app.integrations.openenv_server import app_from_env  # noqa: E402

app = app_from_env()


def main() -> None:
    """`server` entry point: `stategym serve --env retail --protocol openenv` on $PORT."""
    from app.cli.main import cli

    port = os.environ.get("PORT", "8000")
    cli(["serve", "--protocol", "openenv", "--host", "0.0.0.0", "--port", port])


if __name__ == "__main__":
    main()
