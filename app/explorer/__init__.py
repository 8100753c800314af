"""The run explorer: a read-only web UI over a data dir's sessions, served by `stategym browse`.

Server-rendered HTML (no JavaScript needed), every page also as JSON (`?format=json`), read
through the storage interface (app/storage/base.py: the control store and the backend's
read-only view), so it works on SQLite files and PostgreSQL schemas alike. Modules:

- filters.py: query parameters of the runs page, validated (4xx on bad input).
- queries.py: the control-database reads (pages, counts, reward sums per task).
- pages.py: what each page shows, as plain data (the JSON form of the page).
- render.py + templates.py: HTML (Jinja2, autoescaped) and the small SVG charts; also the
  page and chart of `stategym report --out` (app/cli/rollout_report.py).
- web.py: the ASGI app: routes, Host check and admin token, error pages, Datasette mount.
"""
