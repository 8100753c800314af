"""uvicorn's entry point: builds the app from STATEGYM_* settings (each worker calls it)."""

from __future__ import annotations

import logging
import resource

from fastapi import FastAPI

from app.server.api import create_app
from app.server.timing import ProcessTimeMiddleware
from app.settings import Settings

log = logging.getLogger("stategym.server")


def raise_open_file_limit() -> int:
    """Lift the soft RLIMIT_NOFILE to the hard limit: thousands of live sessions need fds.

    Returns the soft limit in force afterwards (unchanged where the system refuses).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %s: %s", soft, exc)
    return soft


def app_from_env() -> FastAPI:
    raise_open_file_limit()
    app = create_app(Settings())
    # Outermost, so the figure covers every other middleware and the route.
    app.add_middleware(ProcessTimeMiddleware)
    return app
