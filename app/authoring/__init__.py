"""The facades over the engine an environment author uses beside the declarations of `app.sdk`:
`replay` (a task's database in memory, tools replayed through the real runner), `testing`
(call tools like the framework does), `taskgen` (the generation kit) and `sqlite` (a console
environment's SQLite plumbing).

This package sits above the runtime and task generation; `app.sdk` below them, so importing a
declaration never loads the engine. The old paths `app.sdk.replay`, `.testing`, `.taskgen` and
`.sqlite` still import (thin re-exports for packages written against them).
"""
