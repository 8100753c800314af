"""The NeMo Gym kit: the shim starts StateGym from NeMo Gym's config variables, the generated
configs name only things that exist, and exported rows offer exactly the served tools."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from app.cli.export import AGENT_REF_TYPE, export_nemo_gym
from app.cli.main import cli
from app.registry import ENVIRONMENTS, load_environment
from app.server.api import create_app
from app.settings import Settings
from tests.conftest import REPO, TEST_SECRET, free_port, stop_server
from tests.support.rollouts import gold_answer, load_tasks, response_object

KIT = REPO / "integrations" / "nemo_gym"
SHIM = KIT / "stategym_resources"
# Where NeMo Gym looks for the server: <root>/resources_servers/<implementation>.
SHIM_AS_FOUND = KIT / "resources_servers" / "stategym_resources"
CONFIGS = sorted((KIT / "configs").glob("*.yaml"))
# The same configs with NeMo Gym's `legacy_agent` relay in front of the agent instead of 0.7.0's
# typed `single_agent_turn_legacy` environment server.
RELAY_CONFIGS = sorted((KIT / "configs" / "legacy_agent").glob("*.yaml"))
NEMO_GYM_LICENSES = {
    "Apache 2.0",
    "MIT",
    "TBD",
    "Creative Commons Attribution 4.0 International",
    "Creative Commons Attribution-ShareAlike 4.0 International",
}


def _load(name: str, path: Path):
    """Import a file that is not on the package path (a script, the shim named `app.py`)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


gen = _load("gen_nemo_gym_configs", REPO / "scripts" / "gen_nemo_gym_configs.py")
shim = _load("stategym_nemo_gym_shim", SHIM / "app.py")


def _needs_tasks(env_name: str) -> None:
    if not load_environment(env_name).tasks_path.is_file():
        pytest.skip(f"{env_name} has no task file yet (test_env_tasks.py reports it)")


def _config(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _resolved_config_dict(env: str, port: int, data_dir: Path) -> str:
    """What `ng_run` hands a server: every config merged, host/port filled in, as YAML."""
    config = _config(KIT / "configs" / f"{env}.yaml")
    config[f"stategym_{env}"]["resources_servers"]["stategym_resources"].update(
        host="127.0.0.1",
        port=port,
        data_dir=str(data_dir),
        settings={"max_open_sessions": 64},
        # Two workers: spawned processes must import StateGym's `app`, not this `app.py`.
        num_workers=2,
    )
    config[f"stategym_{env}_simple_agent"]["responses_api_agents"]["simple_agent"].update(
        host="127.0.0.1", port=free_port()
    )
    config["policy_model"] = {
        "responses_api_models": {
            "openai_model": {
                "entrypoint": "app.py",
                "openai_base_url": "${policy_base_url}",
                "openai_api_key": "${policy_api_key}",
                "openai_model": "${policy_model_name}",
                "host": "127.0.0.1",
                "port": free_port(),
            }
        }
    }
    config["head_server"] = {"host": "127.0.0.1", "port": 11000}
    config["config_paths"] = [f"configs/{env}.yaml"]
    config["policy_base_url"] = "http://127.0.0.1:1/v1"
    return yaml.safe_dump(config, sort_keys=False)


def _start_shim(env: str, tmp_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    environ = {
        **os.environ,
        "NEMO_GYM_CONFIG_DICT": _resolved_config_dict(env, port, tmp_path / "data"),
        "NEMO_GYM_CONFIG_PATH": f"stategym_{env}",
        # NeMo Gym puts the server folder first; REPO stands in for an installed StateGym.
        "PYTHONPATH": os.pathsep.join([str(SHIM_AS_FOUND), str(REPO)]),
        "STATEGYM_SECRET_KEY": TEST_SECRET,
        "STATEGYM_LOG_LEVEL": "warning",
    }
    proc = subprocess.Popen(
        [sys.executable, "app.py"],
        cwd=SHIM_AS_FOUND,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"shim exited ({proc.returncode}): {proc.stdout.read().decode()}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("the shim did not answer /health on its assigned port within 60 s")


@pytest.mark.slow  # starts the shim and a server: ~7 s
def test_shim_serves_on_the_assigned_port_from_nemo_gym_config(tmp_path):
    rows_path = tmp_path / "retail.jsonl"
    export_nemo_gym(load_environment("retail"), rows_path, limit=3)
    task = load_tasks(rows_path)[0]
    proc, url = _start_shim("retail", tmp_path)
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            assert client.get("/").json() == {"status": "ok"}
            assert client.get("/tools").json()["tools"] == task["responses_create_params"]["tools"]
            # The legacy seed: the whole row, agent_ref included, no cookie yet.
            assert client.post("/seed_session", json=task).status_code == 200
            outputs = []
            for i, call in enumerate(task["ground_truth"]):
                result = client.post(f"/{call['name']}", json=call["arguments"])
                assert result.status_code == 200 and "output" in result.json(), result.text
                outputs.append(
                    {"type": "function_call_output", "call_id": f"c{i}", "output": result.text}
                )
            body = {**task, "response": response_object(outputs, gold_answer(task))}
            verdict = client.post("/verify", json=body).json()
            assert verdict["reward"] == 1.0, verdict.get("failure_reason")
            assert verdict["agent_ref"] == task["agent_ref"]
            assert client.post("/close_session", json={}).json()["closed"] is True
    finally:
        stop_server(proc)
    # The data dir came from the config block (the closed session is kept, plain or packed).
    assert list((tmp_path / "data" / "sessions" / "retail").glob("*.sqlite*"))


def test_shim_without_installed_stategym_uses_its_checkout_and_refuses_unknown_envs(tmp_path):
    config = yaml.safe_dump(
        {
            "stategym_x": {
                "resources_servers": {
                    "stategym_resources": {
                        "entrypoint": "app.py",
                        "domain": "agent",
                        "env": "nope",
                        "host": "127.0.0.1",
                        "port": free_port(),
                        "data_dir": str(tmp_path),
                    }
                }
            }
        }
    )
    environ = {
        **os.environ,
        "NEMO_GYM_CONFIG_DICT": config,
        "NEMO_GYM_CONFIG_PATH": "stategym_x",
        "PYTHONPATH": str(SHIM_AS_FOUND),
    }  # only the server folder, as NeMo Gym sets it
    environ.pop("STATEGYM_ROOT", None)
    done = subprocess.run(
        [sys.executable, "app.py"],
        cwd=SHIM_AS_FOUND,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "unknown StateGym environment 'nope'" in done.stderr, done.stderr


def test_shim_reads_its_own_block_and_refuses_bad_ones():
    config = yaml.safe_dump(
        {
            "other": {"resources_servers": {"x": {"entrypoint": "app.py", "port": 1}}},
            "mine": {
                "resources_servers": {
                    "stategym_resources": {
                        "entrypoint": "app.py",
                        "env": "retail",
                        "host": "0.0.0.0",
                        "port": 8123,
                        "num_workers": 2,
                    }
                }
            },
        }
    )
    block = shim.load_block(config, "mine")
    args = shim.serve_arguments(block, "mine")
    assert (args["env"], args["host"], args["port"], args["workers"]) == (
        "retail",
        "0.0.0.0",
        8123,
        2,
    )
    assert args["data_dir"] == SHIM / "var" / "mine"
    with pytest.raises(SystemExit, match="NEMO_GYM_CONFIG_PATH"):
        shim.load_block(config, None)
    with pytest.raises(SystemExit, match="no `absent"):
        shim.load_block(config, "absent")
    with pytest.raises(SystemExit, match="not valid YAML"):
        shim.load_block("a: [", "mine")
    with pytest.raises(SystemExit, match="env"):
        shim.serve_arguments({"port": 8123}, "mine")
    with pytest.raises(SystemExit, match="port"):
        shim.serve_arguments({"env": "retail"}, "mine")
    with pytest.raises(SystemExit, match="unknown StateGym settings"):
        shim.settings_environment({"settings": {"no_such_setting": 1}}, "mine")
    assert shim.settings_environment({"settings": {"retention": "delete_on_close"}}, "mine") == {
        "STATEGYM_RETENTION": "delete_on_close"
    }


def test_configs_are_in_sync_with_the_registry():
    assert gen.main(["--check"]) == 0
    envs, missing = gen.available_environments()
    assert {p.stem for p in CONFIGS} == {e.name for e in envs}
    assert {p.stem for p in RELAY_CONFIGS} == {e.name for e in envs}
    assert not missing, f"environments not importable: {missing}"


@pytest.mark.slow  # minutes of CPU in make test; `make test-slow` runs it
def test_generator_writes_configs_and_datasets_into_a_kit(tmp_path):
    assert gen.main(["--export", "--kit", str(tmp_path)]) == 0
    for path in RELAY_CONFIGS:
        assert (tmp_path / "configs" / "legacy_agent" / path.name).read_text() == path.read_text()
    for path in CONFIGS:
        written = tmp_path / "configs" / path.name
        assert written.read_text() == path.read_text()
        agent = _config(written)[f"stategym_{path.stem}_simple_agent"]
        for dataset in agent["responses_api_agents"]["simple_agent"]["datasets"]:
            rows = load_tasks(tmp_path / dataset["jsonl_fpath"])
            assert len(rows) == (5 if dataset["type"] == "example" else len(rows)) > 0
    fixture = load_tasks(tmp_path / "stategym_resources" / "verifier_fixture.jsonl")
    kinds = {(row["name"].split(":")[0], row["kind"]) for row in fixture}
    assert {(path.stem, "malformed") for path in CONFIGS} <= kinds


def test_shim_folder_is_where_nemo_gym_looks_for_it():
    # NeMo Gym resolves `resources_servers/<impl>` under its roots and requires one of these.
    assert (SHIM_AS_FOUND / "requirements.txt").is_file()
    assert not (SHIM_AS_FOUND / "pyproject.toml").exists()  # both at once is refused
    assert SHIM_AS_FOUND.resolve() == SHIM.resolve()
    # Lines with `../..` are dropped by NeMo Gym's PyPI install path: none may be needed.
    lines = (SHIM / "requirements.txt").read_text().splitlines()
    assert not [line for line in lines if "../.." in line and not line.startswith("#")]


@pytest.mark.parametrize("path", CONFIGS + RELAY_CONFIGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_config_names_only_things_that_exist(path, tmp_path, monkeypatch):
    config = _config(path)
    _needs_tasks(path.stem)
    servers = {}
    for instance, by_type in config.items():
        [(server_type, impls)] = by_type.items()
        [(impl, block)] = impls.items()
        servers[instance] = (server_type, impl, block)
    resources = [i for i, (t, _, _) in servers.items() if t == "resources_servers"]
    agents = [i for i, (t, _, _) in servers.items() if t == "responses_api_agents"]
    fronts = [i for i, (t, _, _) in servers.items() if t == "environment_servers"]
    assert len(resources) == 1 and len(agents) == 1
    # NeMo Gym 0.7.0 reaches an agent only through an environment server: exactly one.
    [front] = fronts
    _, front_impl, front_block = servers[front]
    assert front_block["agent_server"] == {"type": "responses_api_agents", "name": agents[0]}
    if path.parent.name == "legacy_agent":
        assert front_impl == "legacy_agent" and "resources_server" not in front_block
        assert servers[resources[0]][2]["settings"]["close_on_verify"] is True
    else:
        assert front_impl == "single_agent_turn_legacy"
        assert front_block["resources_tool_transports"] == ["direct_http"]
        assert front_block["resources_server"] == {
            "type": "resources_servers",
            "name": resources[0],
        }
    # Sessions are cleaned up: failures are kept for inspection, the rest deleted on close.
    assert servers[resources[0]][2]["settings"]["retention"] == "keep_failed"
    _, impl, block = servers[resources[0]]
    assert (KIT / "resources_servers" / impl / block["entrypoint"]).is_file()
    assert block["domain"] == "agent" and block["verified"] is False and block["description"]
    assert block["env"] == path.stem and block["env"] in ENVIRONMENTS
    assert "host" not in block and "port" not in block  # NeMo Gym assigns them
    _, agent_impl, agent = servers[agents[0]]
    assert agent_impl == "simple_agent"
    assert agent["resources_server"] == {"type": "resources_servers", "name": resources[0]}
    assert agent["model_server"] == {"type": "responses_api_models", "name": "policy_model"}
    # Each dataset file is produced by the export command the header documents, run as written
    # from integrations/nemo_gym/ (here a scratch copy of it).
    header = path.read_text()
    monkeypatch.chdir(tmp_path)
    for dataset in agent["datasets"]:
        assert dataset["type"] in {"train", "validation", "example"}
        if dataset["type"] != "example":
            assert dataset["license"] in NEMO_GYM_LICENSES
        [command] = [
            line.split("#", 1)[1].strip()
            for line in header.splitlines()
            if line.startswith("#") and line.endswith(" " + dataset["jsonl_fpath"])
        ]
        argv = shlex.split(command)
        assert argv[:3] == ["stategym", "export", "nemo-gym"]
        result = CliRunner().invoke(cli, argv[1:])
        assert result.exit_code == 0, result.output
        rows = load_tasks(tmp_path / dataset["jsonl_fpath"])
        assert rows and all(
            r["agent_ref"] == {"type": AGENT_REF_TYPE, "name": agents[0]} for r in rows
        )


@pytest.mark.parametrize("env_name", sorted(ENVIRONMENTS))
async def test_exported_rows_offer_exactly_the_served_tools(env_name, tmp_path):
    _needs_tasks(env_name)
    env = load_environment(env_name)
    # A snapshot of the task file: task generators may rewrite it while this test runs.
    snapshot = tmp_path / "tasks.jsonl"
    shutil.copyfile(env.tasks_path, snapshot)
    env = dataclasses.replace(env, tasks_path=snapshot)
    out = tmp_path / f"{env_name}.jsonl"
    count = export_nemo_gym(env, out)
    rows = load_tasks(out)
    assert count == len(rows) == len(load_tasks(env.tasks_path))
    app = create_app(Settings(data_dir=tmp_path / "data", secret_key=TEST_SECRET), env)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://stategym"
        ) as client:
            served = (await client.get("/tools")).json()["tools"]
    routes = {getattr(r, "path", None) for r in app.routes}
    for row in rows:
        assert row["responses_create_params"]["tools"] == served
        assert all(f"/{tool['name']}" in routes for tool in served)
        assert row["agent_ref"] == {
            "type": "responses_api_agents",
            "name": f"stategym_{env_name}_simple_agent",
        }
        # Ground-truth keys travel unchanged (they reach seed and verify).
    source = {r["task_id"]: r for r in load_tasks(env.tasks_path)}
    for row in rows:
        original = source[row["task_id"]]
        params = "responses_create_params"
        assert {k: v for k, v in row.items() if k not in ("agent_ref", params)} == {
            k: v for k, v in original.items() if k != params
        }
        assert row[params]["input"] == original[params]["input"]


def test_export_refuses_an_unknown_environment(tmp_path):
    result = CliRunner().invoke(cli, ["export", "nemo-gym", "--env", "nope", str(tmp_path / "x")])
    assert result.exit_code != 0 and "unknown environment" in result.output
    assert not (tmp_path / "x").exists()


def test_export_check_replays_the_gold_solutions(tmp_path):
    out = tmp_path / "retail.jsonl"
    result = CliRunner().invoke(
        cli,
        [
            "export",
            "nemo-gym",
            "--env",
            "retail",
            "--limit",
            "2",
            "--check",
            "--data-dir",
            str(tmp_path / "d"),
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert len(load_tasks(out)) == 2


def test_nemo_gym_reads_the_configs_when_installed():
    """Extra evidence where nemo_gym is importable (it needs Python 3.13); never the only one."""
    config_types = pytest.importorskip("nemo_gym.config_types")
    omegaconf = pytest.importorskip("omegaconf")
    for path in CONFIGS + RELAY_CONFIGS:
        for instance, by_type in omegaconf.OmegaConf.load(path).items():
            config, error = config_types.maybe_get_server_instance_config(
                name=instance, server_type_config_dict=by_type
            )
            assert config is not None, f"{path.name}: {instance}: {error}"


def test_gold_policy_server_plays_each_tasks_gold_then_answers():
    """The scripted model of docs/nemo_gym.md ("Checking the wiring without a model")."""
    policy = _load("gold_policy_server", REPO / "scripts" / "gold_policy_server.py")
    app = policy.create_app(policy.load_index([load_environment("retail").tasks_path]))
    task = load_tasks(load_environment("retail").tasks_path)[0]
    messages = list(task["responses_create_params"]["input"])
    from fastapi.testclient import TestClient

    client = TestClient(app)
    for call in task["ground_truth"]:
        [item] = client.post("/v1/responses", json={"input": messages}).json()["output"]
        assert item["type"] == "function_call" and item["name"] == call["name"]
        assert json.loads(item["arguments"]) == call["arguments"]
        messages += [
            item,
            {"type": "function_call_output", "call_id": item["call_id"], "output": "{}"},
        ]
    [final] = client.post("/v1/responses", json={"input": messages}).json()["output"]
    assert final["type"] == "message"
    # The gold's answer is its submit_answer call (above); legacy rows name theirs in text.
    assert final["content"][0]["text"].startswith("Done.")
    assert all(o in final["content"][0]["text"] for o in task.get("expected_outputs") or [])
    unknown = client.post("/v1/responses", json={"input": "what is the weather"}).json()
    assert unknown["output"][0]["type"] == "message"
