"""StateGym: persistent-state environments for LLM agents, served as a NeMo Gym Resources Server.

The layers, top to bottom (a layer imports only the ones below it; docs/architecture.md):

- `app.cli`      the `stategym` command, one module per command group;
- `app.explorer` the read-only run explorer web UI that `stategym browse` serves;
- `app.server`   HTTP: NeMo Gym's routes, request/response models, cookies, middleware, admin, MCP;
- `app.runtime`  the protocol flow: sessions (seed, tool call, verify, close), the tool runner,
                 the inline policy, the lifecycle (reaper, capacity);
- `app.verify`   scoring: state comparison, rewards, evidence, answer checks, judge, metrics;
- `app.storage`  where state lives: the session backends (SQLite files, PostgreSQL schemas), the
                 control store, snapshots, migrations, read-only inspection;
- `app.sdk`      what an environment author imports: `Environment`, `tool`, `ToolArgs`,
                 `ToolError`, the compare spec, the task generation kit, test helpers;
- `app.taskgen`  task generation at training scale (drives each environment's families).

`app.settings`, `app.errors`, `app.registry`, `app.clock` and `app.jsonio` are shared by every
layer.
"""
