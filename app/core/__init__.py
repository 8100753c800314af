"""Leaf modules every layer needs: the task row (tasks.py), the answer value grammar (values.py,
value_grammar.py, value_tokens.py), the expected-state check shape (checks.py) and a bounded LRU.

Pure code: it imports nothing from app but app.settings, app.errors, app.clock, app.jsonio and
itself, so storage, verify, the runtime and the CLI can all build on it.
"""
