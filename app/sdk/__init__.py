"""What an environment author imports, in two tiers.

Declarations (a low layer: they import only app.core and the shared modules): `Environment`
(environment.py), `tool`, `ToolArgs`, `ToolError` (tool.py), the compare spec
(compare_spec.py), the answer tools (answer.py), `AnyRow` (rows.py), money helpers (money.py)
the tool schemas (tool_schema.py) and the generator kit's pure parts (seed_builder.py, people.py,
phrasing.py). Storage, verify and the runtime build on them.

Facades over the engine (a top layer, above the runtime and task generation): `app.sdk.replay`
(a task's database in memory, tools replayed through the real runner), `app.sdk.testing` (test
helpers), `app.sdk.taskgen` (the task generation kit) and `app.sdk.sqlite` (the SQLite plumbing
a console environment runs its agent's SQL on). Environments import them by these
paths; this package imports neither tier, so importing a declaration never loads the engine.
"""
