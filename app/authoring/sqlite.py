"""What an environment that declares `requires=("sqlite",)` may use of the SQLite backend.

A SQLite console (envs/sql) runs the agent's SQL on the session's own connection: it needs the
connection plumbing (in-memory images, the engine bound the way a session's is, the size cap), the
bounded SQL functions and frozen clock a session installs, and, for its in-memory replay, the
one-call transaction runner and the seed writer. This facade is the one place an environment
reaches them, so the backend's modules stay private to app/storage.
"""

from app.storage.runner import run_tool
from app.storage.seeding import apply_seed, parse_now
from app.storage.sqlite_console import (
    bind_engine,
    image_of,
    install_bounded_functions,
    install_frozen_clock,
    memory_from_image,
    open_memory,
    size_limit_hit,
)

__all__ = [
    "apply_seed",
    "bind_engine",
    "image_of",
    "install_bounded_functions",
    "install_frozen_clock",
    "memory_from_image",
    "open_memory",
    "parse_now",
    "run_tool",
    "size_limit_hit",
]
