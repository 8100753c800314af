"""Drive app/integrations/trl.py exactly as TRL's GRPOTrainer does, with the gold calls as the
"model": trains nothing, needs no GPU, no trl and no torch. Prints each rollout's reward.

    stategym serve --env retail --port 8000 &
    STATEGYM_URL=http://127.0.0.1:8000 python scripts/trl_rollouts.py --env retail --limit 5

What GRPOTrainer does (trl 1.16, trl/trainer/grpo_trainer.py), step by step below: build one
instance per generation with no arguments; list its tools (public functions of the class, less
`reset` and `get_reward`; transformers' get_json_schema turns each into the schema the chat
template shows, when transformers is installed); call `reset(**row)` with every dataset column;
run the model's tool calls as method calls with keyword arguments, an exception becoming the
tool's text; call `get_reward()` once at the end.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.integrations.rollout import prompt_messages  # noqa: E402
from app.integrations.trl import StateGymEnvironment  # noqa: E402
from app.registry import load_environment  # noqa: E402


def dataset(env: str, limit: int) -> list[dict[str, Any]]:
    """Rows as a TRL dataset holds them: a `prompt` column and the task row as JSON."""
    rows = []
    for line in load_environment(env).tasks_path.read_text().splitlines()[:limit]:
        task = json.loads(line)
        rows.append({"prompt": prompt_messages(task), "task": line})
    return rows


def tools_of(environment: Any) -> dict[str, Any]:
    """GRPOTrainer's tool discovery, verbatim in effect."""
    return {
        name: getattr(environment, name)
        for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    }


def schemas(tools: dict[str, Any]) -> list[dict[str, Any]] | None:
    try:
        from transformers.utils import get_json_schema
    except ImportError:
        return None
    return [get_json_schema(method) for method in tools.values()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="retail", help="environment whose shipped tasks to play")
    parser.add_argument("--limit", type=int, default=5, help="how many tasks")
    args = parser.parse_args()
    environment = StateGymEnvironment()  # GRPOTrainer: factory() with no arguments
    tools = tools_of(environment)
    parsed = schemas(tools)
    seen = "transformers read" if parsed is not None else "no transformers; found"
    print(f"{seen} {len(tools)} tools: {', '.join(tools)}")
    rewards = []
    for row in dataset(args.env, args.limit):
        task = json.loads(row["task"])
        shown = environment.reset(**row)  # None: the prompt column is what the model sees
        assert shown is None
        for call in task["ground_truth"]:  # the "model" makes the reference calls
            try:
                tools[call["name"]](**call["arguments"])
            except Exception as exc:  # noqa: BLE001 - TRL shows an exception as the tool's text
                print(f"  {call['name']} raised {exc!r}")
        tools["finish"](message="Done. " + " ".join(task.get("expected_outputs") or []))
        reward = environment.get_reward()
        rewards.append(reward)
        print(f"{task['task_id']}: reward {reward}")
    print(f"mean reward {sum(rewards) / len(rewards):.3f} over {len(rewards)} rollouts")
    return 0 if all(r == 1.0 for r in rewards) else 1


if __name__ == "__main__":
    raise SystemExit(main())
