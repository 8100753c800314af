"""An environment's database in memory, for tests and generators: base data, a task's seed, and
tool calls replayed through the real runner (the engine is app/runtime/replay.py)."""

from app.runtime.replay import dump, memory_engine, open_task_db, replay

__all__ = ["dump", "memory_engine", "open_task_db", "replay"]
