"""Adapters that let other RL ecosystems drive StateGym environments (docs/integrations.md).

- `app.integrations.episodes`: one episode = one StateGym session, seeded from a task set, ended
  by a terminal tool, scored by verify. Imports nothing outside StateGym.
- `app.integrations.openenv_server`: that episode as an OpenEnv `Environment` served by OpenEnv's
  own `create_app` (`stategym serve --protocol openenv`; needs the `stategym[openenv]` extra).
- `app.integrations.http_client`: a small httpx client of a running StateGym server.
- `app.integrations.trl`: a TRL `environment_factory` class over that client.

Nothing in the core layers imports this package: an ecosystem's package is imported only by the
adapter that serves it, and only when that adapter is used.
"""
