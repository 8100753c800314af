"""The SQLite plumbing an environment with `requires=("sqlite",)` runs its agent's SQL on.

Storage's one export of backend internals to environments (through `app.authoring.sqlite`): the
connection helpers a session uses (in-memory images, the engine bound per call, the size cap) and
the bounded SQL functions and frozen clock every SQLite session connection gets.
"""

from app.storage.sqlite.db import (
    bind_engine,
    image_of,
    memory_from_image,
    open_memory,
    size_limit_hit,
)
from app.storage.sqlite.sql_functions import install_bounded_functions, install_frozen_clock

__all__ = [
    "bind_engine",
    "image_of",
    "install_bounded_functions",
    "install_frozen_clock",
    "memory_from_image",
    "open_memory",
    "size_limit_hit",
]
