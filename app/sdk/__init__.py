"""What an environment author imports, in two tiers.

Declarations (a low layer, importing only app.core and the shared modules): `Environment`,
`tool`, `ToolArgs`, `ToolError`, the compare spec, the answer tools, `AnyRow`, money, the tool
schemas and the generator kit's pure parts (seed_builder.py, people.py, phrasing.py).

Facades over the engine (a top layer, above the runtime and task generation): `app.sdk.replay`
(a task's database in memory, tools replayed through the real runner), `app.sdk.testing`,
`app.sdk.taskgen` (the generation kit) and `app.sdk.sqlite` (a console environment's SQLite
plumbing). This package imports neither tier, so importing a declaration never loads the engine.
"""
