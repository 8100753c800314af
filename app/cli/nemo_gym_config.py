"""NeMo Gym config blocks for one environment: resources server, simple_agent, datasets, and
the environment server fronting the agent. scripts/gen_nemo_gym_configs.py writes the shipped
configs from it; `stategym export nemo-gym --config` writes one for exported (generated) sets.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.sdk.environment import Environment

# NeMo Gym's server-reference type of an agent instance (see its config-file anatomy docs).
AGENT_REF_TYPE = "responses_api_agents"
# The resources-server folder under `integrations/nemo_gym/` (NeMo Gym's level-3 key).
RESOURCES_IMPL = "stategym_resources"


def resources_instance_name(env: str) -> str:
    """Instance id (level-1 key) of the resources server in the generated config."""
    return f"stategym_{env}"


def agent_instance_name(env: str) -> str:
    """Instance id of the `simple_agent` wired to it; what `agent_ref.name` points at."""
    return f"stategym_{env}_simple_agent"


ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "integrations" / "nemo_gym"
CONFIG_DIR = KIT / "configs"
SERVER_DIR = f"resources_servers/{RESOURCES_IMPL}"  # relative to KIT (a symlink to the shim)
EXAMPLE_ROWS = 5  # NeMo Gym's example datasets hold five rows
MAX_STEPS = 30  # model turns per rollout before simple_agent stops
# The two environment servers NeMo Gym 0.7.0 offers for a resources server + simple_agent pair.
TYPED_SERVER, RELAY_SERVER = "single_agent_turn_legacy", "legacy_agent"
FLAVOURS = {TYPED_SERVER: Path("configs"), RELAY_SERVER: Path("configs") / RELAY_SERVER}
# What cleans up after a run: the typed flow closes every session after verify, so closed
# sessions that earned 1.0 go and failures stay for inspection; the relay never calls
# /close_session, so verify closes instead (docs/nemo_gym.md, "Cleaning up").
SETTINGS: dict[str, dict[str, Any]] = {
    TYPED_SERVER: {"retention": "keep_failed"},
    RELAY_SERVER: {"retention": "keep_failed", "close_on_verify": True},
}


@dataclass(frozen=True)
class Dataset:
    name: str
    type: str  # NeMo Gym: train, validation or example
    jsonl_fpath: str  # relative to KIT
    limit: int | None

    def export_command(self, env: str) -> str:
        limit = f" --limit {self.limit}" if self.limit else ""
        return f"stategym export nemo-gym --env {env}{limit} {self.jsonl_fpath}"


def datasets(env: str) -> list[Dataset]:
    data = f"{SERVER_DIR}/data"
    return [
        Dataset(f"{env}_example", "example", f"{data}/{env}_example.jsonl", EXAMPLE_ROWS),
        Dataset(f"{env}_train", "train", f"{data}/{env}.jsonl", None),
    ]


def environment_server_block(flavour: str, server: str, agent: str) -> dict[str, Any]:
    """Gym 0.7.0's environment server fronting `agent` (its config's defaults, spelled out)."""
    block: dict[str, Any] = {"entrypoint": "app.py"}
    if flavour == TYPED_SERVER:
        block["resources_server"] = {"type": "resources_servers", "name": server}
    block["agent_server"] = {"type": "responses_api_agents", "name": agent}
    if flavour == TYPED_SERVER:
        # Its default is no tool access at all: simple_agent then refuses every tool call
        # ("this agent session has no direct HTTP tool access"). simple_agent speaks HTTP only.
        block["resources_tool_transports"] = ["direct_http"]
    block.update(
        max_concurrent_episodes=None,
        queue_timeout_seconds=None,
        default_episode_timeout_seconds=21600,
        cleanup_timeout_seconds=180,
    )
    return {"environment_servers": {flavour: block}}


def config_for(
    env: Environment, flavour: str = TYPED_SERVER, sets: list[Dataset] | None = None
) -> dict[str, Any]:
    """The config; `sets` replaces the shipped datasets (e.g. a generated train/validation)."""
    server = resources_instance_name(env.name)
    agent = agent_instance_name(env.name)
    dataset_entries: list[dict[str, Any]] = []
    for d in datasets(env.name) if sets is None else sets:
        entry: dict[str, Any] = {"name": d.name, "type": d.type, "jsonl_fpath": d.jsonl_fpath}
        if d.type != "example":
            entry["license"] = "TBD"  # NeMo Gym requires one for train/validation sets
        dataset_entries.append(entry)
    return {
        server: {
            "resources_servers": {
                RESOURCES_IMPL: {
                    "entrypoint": "app.py",
                    "domain": "agent",
                    "verified": False,
                    "description": " ".join(env.description.split()),
                    "env": env.name,
                    "settings": dict(SETTINGS[flavour]),
                    # true: tools also over MCP at /mcp, `resources_tools` in seed answers.
                    "expose_tools_over_mcp": False,
                }
            }
        },
        agent: {
            "responses_api_agents": {
                "simple_agent": {
                    "entrypoint": "app.py",
                    "resources_server": {"type": "resources_servers", "name": server},
                    "model_server": {"type": "responses_api_models", "name": "policy_model"},
                    "max_steps": MAX_STEPS,
                    "datasets": dataset_entries,
                }
            }
        },
        f"stategym_{env.name}_environment_server": environment_server_block(flavour, server, agent),
    }
