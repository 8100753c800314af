"""What an environment author imports, in two tiers.

Declarations (a low layer: they import only app.core and the shared modules): `Environment`
(environment.py), `tool`, `ToolArgs`, `ToolError` (tool.py), the compare spec
(compare_spec.py), the answer tools (answer.py), `AnyRow` (rows.py), money helpers (money.py)
and the tool schemas (tool_schema.py). Storage, verify and the runtime build on them.

Facades over the engine (a top layer, above the runtime and task generation): `app.sdk.replay`
(a task's database in memory, tools replayed through the real runner), `app.sdk.testing` (test
helpers) and `app.sdk.taskgen` (the task generation kit). Environments import them by these
paths; this package imports neither tier, so importing a declaration never loads the engine.
"""
