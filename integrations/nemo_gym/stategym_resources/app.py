"""NeMo Gym entry point: start StateGym as the resources server of one config block.

NeMo Gym's launcher (`ng_run` / `gym env start`) enters this folder, installs requirements.txt
into a fresh virtualenv and runs `python app.py` with two variables in the environment:
`NEMO_GYM_CONFIG_DICT`, the whole resolved config as YAML, and `NEMO_GYM_CONFIG_PATH`, the name
of this instance. Our block is `<instance>: {resources_servers: {stategym_resources: {...}}}`,
where NeMo Gym has filled in `host` and `port`. This file reads that block and serves the
environment it names with `stategym serve` semantics; it does not import nemo_gym.

Block keys read here: `env` (required), `host`, `port`, `data_dir` (default
`<results_dir>/stategym/<instance>`: under the launcher's working directory, so a run
started from another folder leaves no session data in the checkout), `num_workers`,
`expose_tools_over_mcp` (NeMo Gym's own key: tools at `/mcp` and `resources_tools` in the seed
answer, with the instance name as `server_name`), and
`settings` (a mapping of StateGym settings, e.g. `{max_open_sessions: 1024}`). Everything else
(`entrypoint`, `domain`, ...) is NeMo Gym's. An environment server in front of this instance
that asks for MCP tool access its agent cannot take is refused before anything is served.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CONFIG_DICT_VAR = "NEMO_GYM_CONFIG_DICT"
CONFIG_PATH_VAR = "NEMO_GYM_CONFIG_PATH"
SERVER_TYPE = "resources_servers"


class ShimConfigError(SystemExit):
    """A config problem: exits with a readable message instead of a traceback."""

    def __init__(self, message: str):
        super().__init__(f"stategym_resources: {message}")


def _isolate_from_this_folder() -> None:
    """StateGym's package is named `app`, like this file: keep this folder off the import path.

    NeMo Gym puts the server folder on PYTHONPATH and Python puts the script's folder first on
    sys.path; either would make `import app` find this file instead of StateGym.
    """

    def elsewhere(entry: str) -> bool:
        try:
            return Path(entry or ".").resolve() != HERE
        except OSError:
            return True

    sys.path[:] = [p for p in sys.path if elsewhere(p)]
    python_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    # Spawned uvicorn workers start from PYTHONPATH again.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in python_path if elsewhere(p))


def _stategym_root_fallback() -> None:
    """When StateGym is not installed in this venv, use the checkout this folder lives in."""
    try:
        import app.server.api  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name != "app":
            raise  # StateGym is there but a dependency is missing: show that
        root = os.environ.get("STATEGYM_ROOT") or str(HERE.parents[2])
        if not (Path(root) / "app" / "server" / "api.py").is_file():
            raise ShimConfigError(
                "StateGym is not importable: install it (see requirements.txt) or set "
                "STATEGYM_ROOT to its checkout"
            ) from None
        sys.modules.pop("app", None)
        sys.path.insert(0, root)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH", "")) if p
        )


def load_block(config_yaml: str | None, instance: str | None) -> dict[str, Any]:
    """This instance's block out of the resolved config (NeMo Gym's three-level layout)."""
    import yaml

    if not config_yaml or not instance:
        raise ShimConfigError(
            f"{CONFIG_DICT_VAR} and {CONFIG_PATH_VAR} must be set (NeMo Gym's launcher sets them)"
        )
    try:
        config = yaml.safe_load(config_yaml)
    except yaml.YAMLError as exc:
        raise ShimConfigError(f"{CONFIG_DICT_VAR} is not valid YAML: {exc}") from None
    entry = config.get(instance) if isinstance(config, Mapping) else None
    if not isinstance(entry, Mapping) or not isinstance(entry.get(SERVER_TYPE), Mapping):
        raise ShimConfigError(f"no `{instance}: {SERVER_TYPE}: ...` block in {CONFIG_DICT_VAR}")
    implementations = list(entry[SERVER_TYPE].values())
    if len(implementations) != 1 or not isinstance(implementations[0], Mapping):
        raise ShimConfigError(f"{instance}.{SERVER_TYPE} must hold exactly one implementation")
    return dict(implementations[0])


def serve_arguments(
    block: Mapping[str, Any], instance: str, results_dir: str | None = None
) -> dict[str, Any]:
    """`stategym serve` arguments from the block; refuses what StateGym cannot serve.

    `results_dir` is NeMo Gym's run-artifact root (absolute, `<launcher cwd>/results` unless set):
    the default data dir lives there, beside the launcher's other output, not in this folder.
    """
    env = block.get("env")
    if not isinstance(env, str) or not env:
        raise ShimConfigError(f"{instance}: set `env:` to a StateGym environment name")
    port = block.get("port")
    if not isinstance(port, int) or not 0 < port < 65536:
        raise ShimConfigError(f"{instance}: `port` must be the port NeMo Gym assigned")
    host = block.get("host") or "127.0.0.1"
    data_dir = block.get("data_dir") or os.environ.get("STATEGYM_DATA_DIR")
    if data_dir is None:
        data_dir = (
            Path(results_dir) / "stategym" / instance if results_dir else HERE / "var" / instance
        )
    workers = block.get("num_workers") or 1
    if not isinstance(workers, int) or workers < 1:
        raise ShimConfigError(f"{instance}: `num_workers` must be a positive integer")
    return {
        "env": env,
        "host": str(host),
        "port": port,
        "data_dir": Path(data_dir),
        "workers": workers,
    }


def global_keys(config_yaml: str) -> Mapping[str, Any]:
    """The whole resolved config (load_block already refused one that does not parse)."""
    import yaml

    config = yaml.safe_load(config_yaml)
    return config if isinstance(config, Mapping) else {}


def transport_problems(config: Mapping[str, Any], instance: str, expose: bool) -> list[str]:
    """Environment servers in front of this instance that would fail every rollout at the seed.

    nemo-gym 0.7.0 marks MCP tool access as required, and `simple_agent` refuses required MCP
    access ("does not support required MCP tool access"); without `expose_tools_over_mcp` the
    seed answer has no `resources_tools` and the environment server fails the seed instead.
    Refusing to start keeps both from turning into a batch of failed sessions on disk.
    """
    problems = []
    for name, entry in config.items():
        servers = entry.get("environment_servers") if isinstance(entry, Mapping) else None
        for block in (servers or {}).values() if isinstance(servers, Mapping) else ():
            if not isinstance(block, Mapping):
                continue
            resources = block.get("resources_server") or {}
            transports = block.get("resources_tool_transports") or []
            if resources.get("name") != instance or "mcp" not in transports:
                continue
            agent_name = (block.get("agent_server") or {}).get("name")
            agent = config.get(agent_name) if isinstance(agent_name, str) else None
            kinds = (agent or {}).get("responses_api_agents") or {}
            if "simple_agent" in kinds:
                problems.append(
                    f"{name}: resources_tool_transports lists `mcp`, but its agent "
                    f"{agent_name} is a simple_agent, which speaks only direct_http; "
                    "use [direct_http] (tools stay reachable at /mcp for MCP harnesses)"
                )
            if not expose:
                problems.append(
                    f"{name}: resources_tool_transports lists `mcp`, but {instance} does not "
                    "set `expose_tools_over_mcp: true`"
                )
    return problems


def settings_environment(block: Mapping[str, Any], instance: str) -> dict[str, str]:
    """The block's `settings:` mapping as STATEGYM_* variables (workers read settings there)."""
    from app.settings import Settings

    extra = block.get("settings") or {}
    if not isinstance(extra, Mapping):
        raise ShimConfigError(f"{instance}: `settings` must be a mapping of StateGym settings")
    unknown = sorted(set(extra) - set(Settings.model_fields))
    if unknown:
        raise ShimConfigError(f"{instance}: unknown StateGym settings {unknown}")
    environ = {f"STATEGYM_{key.upper()}": str(value) for key, value in extra.items()}
    expose = block.get("expose_tools_over_mcp", False)
    if not isinstance(expose, bool):
        raise ShimConfigError(f"{instance}: `expose_tools_over_mcp` must be true or false")
    if expose:
        # NeMo Gym names an MCP server after its instance (`mcp__<instance>__<tool>`).
        environ["STATEGYM_EXPOSE_TOOLS_OVER_MCP"] = "true"
        environ.setdefault("STATEGYM_MCP_SERVER_NAME", instance)
    return environ


def gym_module(name: str) -> Any:
    """NeMo Gym's module `name` (e.g. `base_resources_server`, `testing.session_conformance`):
    from `nemo_gym.server_runtime`, where Gym's main moved the server bases after 0.7.0, or from
    0.7.0's `nemo_gym.<name>`, whichever this install has. Raises ImportError without Gym."""
    import importlib

    try:
        return importlib.import_module(f"nemo_gym.server_runtime.{name}")
    except ImportError as exc:
        if exc.name not in (None, "nemo_gym.server_runtime", f"nemo_gym.server_runtime.{name}"):
            raise  # the new module is there but broken: show that
        return importlib.import_module(f"nemo_gym.{name}")


def _verifier_fixture() -> Any:
    """Gym's onboarding check (`gym env test`) imports this file and runs `VERIFIER_FIXTURE`:
    every StateGym environment's verifier cases, in Gym's format
    (`verifier_fixture.jsonl` here, written by `scripts/gen_nemo_gym_configs.py --export`,
    app/integrations/gym_fixture.py), verified in process. None when Gym is not installed."""
    try:
        from nemo_gym.verifier_fixture import VerifierFixture
        from pydantic import BaseModel, ConfigDict
    except ImportError:
        return None

    class VerifyRequest(BaseModel):
        """A verify body as StateGym takes it: a task row and `response`, fields kept as sent."""

        model_config = ConfigDict(extra="allow")

    def fresh_server() -> Any:
        _isolate_from_this_folder()
        _stategym_root_fallback()
        from app.integrations.gym_fixture import FixtureServer

        return FixtureServer()

    async def reseed(server: Any, request: Any) -> None:
        """Nothing to seed: a verify without a session replays the request's calls."""

    return VerifierFixture(
        server_factory=fresh_server,
        request_model=VerifyRequest,
        cases_path=HERE / "verifier_fixture.jsonl",
        reseed=reseed,
    )


VERIFIER_FIXTURE = _verifier_fixture()


def main() -> None:
    _isolate_from_this_folder()
    _stategym_root_fallback()
    instance = os.environ.get(CONFIG_PATH_VAR)
    block = load_block(os.environ.get(CONFIG_DICT_VAR), instance)
    assert instance is not None  # load_block refused a missing one
    config = global_keys(os.environ[CONFIG_DICT_VAR])
    results_dir = config.get("results_dir")
    arguments = serve_arguments(
        block, instance, results_dir if isinstance(results_dir, str) else None
    )
    os.environ.update(settings_environment(block, instance))
    problems = transport_problems(config, instance, bool(block.get("expose_tools_over_mcp")))
    if problems:
        raise ShimConfigError("; ".join(problems))
    from app.registry import environment_names

    if arguments["env"] not in environment_names():
        known = ", ".join(environment_names())
        raise ShimConfigError(f"unknown StateGym environment {arguments['env']!r}; known: {known}")

    import logging

    from app.cli.serve import serve

    # Work from the data dir, not this folder: Alembic's `prepend_sys_path = .` would otherwise
    # put this folder (and this `app.py`) back first on the path of every spawned worker.
    data_dir = arguments["data_dir"] = Path(arguments["data_dir"]).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    os.chdir(data_dir)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("stategym.nemo_gym").info(
        "%s: serving %s on %s:%s", instance, arguments["env"], arguments["host"], arguments["port"]
    )
    serve(**arguments)


if __name__ == "__main__":
    main()
