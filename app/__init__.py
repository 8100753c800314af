"""StateGym: persistent-state environments for LLM agents, served as a NeMo Gym Resources Server.

The layers, top to bottom; a module imports only its own layer and those below it, lazy
imports included (tests/project/test_architecture.py `LAYERS`; each layer in docs/architecture.md):
- `app.cli` (and `app.scaffold`); `app.explorer` and `app.integrations` (OpenEnv, TRL);
- `app.server` (HTTP, MCP); `app.authoring` (the facades over the engine an author uses:
  replay, testing, taskgen, sqlite; their old paths `app.sdk.replay`, ... re-export them);
- `app.runtime` (sessions, lifecycle, replay); `app.taskgen`; `app.verify` (scoring);
- `app.storage` (session backends, control store, snapshots, migrations, the tool runner);
- `app.registry` (installed environments); `app.sdk` (what an environment author declares);
- `app.core` (leaf modules every layer needs: task row, answer values, check shape, LRU);
- shared: `app.settings`, `app.errors`, `app.clock`, `app.jsonio` (and this package).
"""
