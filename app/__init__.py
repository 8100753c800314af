"""StateGym: persistent-state environments for LLM agents, served as a NeMo Gym Resources Server.

The layers, top to bottom: a module imports only its own layer and the ones below it, lazy
imports included (tests/test_architecture.py `LAYERS`; docs/architecture.md).

- `app.cli`         the `stategym` command, one module per command group (and `app.scaffold`,
                    the template `stategym new-env` copies);
- `app.explorer`    the read-only run explorer web UI that `stategym browse` serves, and
  `app.integrations` the adapters other RL ecosystems drive environments with (OpenEnv, TRL);
- `app.server`      HTTP: NeMo Gym's routes, request/response models, cookies, middleware,
                    admin, MCP;
- SDK facades       `app.sdk.replay`, `app.sdk.testing`, `app.sdk.taskgen`: what environments
                    import of the engine below;
- `app.runtime`     the protocol flow: sessions (seed, tool call, verify, close), the inline
                    policy, the lifecycle (reaper, capacity), replay, read-only inspection;
- `app.taskgen`     task generation at training scale (drives each environment's families);
- `app.verify`      scoring: state comparison, rewards, evidence, answer checks, judge, metrics;
- `app.storage`     where state lives: the session backends (SQLite files, PostgreSQL schemas),
                    the control store, snapshots, migrations, the tool runner (one call, one
                    transaction);
- `app.registry`    the environments installed (entry points);
- `app.sdk`         declarations an environment author writes with: `Environment`, `tool`,
                    `ToolArgs`, `ToolError`, the compare spec, the answer tools, money;
- `app.core`        leaf modules every layer needs: the task row, the answer value grammar, the
                    check shape, an LRU;
- shared            `app.settings`, `app.errors`, `app.clock`, `app.jsonio` (and this package).
"""
