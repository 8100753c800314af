#!/usr/bin/env bash
# Builds the server-virtualenv tree NeMo Gym's launcher reuses with
#   gym env start ... +uv_venv_dir=DIR +skip_venv_if_present=true
# for every server StateGym's configs start, the legacy relay included:
#   DIR/resources_servers/stategym_resources/.venv
#   DIR/responses_api_agents/simple_agent/.venv
#   DIR/responses_api_models/openai_model/.venv
#   DIR/environment_servers/single_agent_turn_legacy/.venv
#   DIR/environment_servers/legacy_agent/.venv
# Each `.venv` is a symlink to one virtualenv that already holds nemo-gym, StateGym and PyYAML
# (by default the active one, the venv `gym` runs from), so the launcher never runs `uv venv` +
# `uv pip install` itself. That is the way to run the launcher with a Python 3.13 older than the
# 3.13.14 nemo-gym 0.7.0 declares: its own per-server install honours requires-python and stops.
#
# Usage: scripts/gym-server-venvs.sh DIR [VENV]    (VENV defaults to $VIRTUAL_ENV)
#
# Guarantees: nothing is linked unless VENV imports nemo_gym, StateGym (`app`), yaml, fastapi and
# the five server modules; a `.venv` left by a failed launcher install (a real directory in the
# tree, which `skip_venv_if_present` would reuse and then fail with `No module named 'fastapi'`)
# is removed and replaced, with its `.venv.setup.lock`; running it twice changes nothing.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
dir=$1
venv=${2:-${VIRTUAL_ENV:-}}
if [ -z "$venv" ]; then
  echo "gym-server-venvs: no virtualenv given and none active (source ~/gym-venv/bin/activate first)" >&2
  exit 2
fi
venv=$(cd "$venv" && pwd -P)
python="$venv/bin/python"
if [ ! -x "$python" ] || [ ! -f "$venv/bin/activate" ]; then
  echo "gym-server-venvs: $venv is not a virtualenv (no bin/python or bin/activate)" >&2
  exit 2
fi

# Every server's entry point must import from this one venv before anything is linked.
if ! problem=$("$python" - <<'EOF' 2>&1
import importlib.util, sys
missing = [m for m in ("nemo_gym", "yaml", "fastapi", "app.server.api") if importlib.util.find_spec(m.split(".")[0]) is None]
try:
    import app.server.api  # StateGym
except Exception as exc:  # noqa: BLE001
    missing.append(f"app.server.api ({exc})")
import nemo_gym
root = __import__("pathlib").Path(nemo_gym.__file__).resolve().parents[1]
for folder in ("responses_api_agents/simple_agent", "responses_api_models/openai_model",
               "environment_servers/single_agent_turn_legacy", "environment_servers/legacy_agent"):
    if not (root / folder / "app.py").is_file():
        missing.append(f"{folder}/app.py under {root}")
if missing:
    sys.exit("missing: " + ", ".join(sorted(set(missing))))
EOF
); then
  echo "gym-server-venvs: $venv cannot run the servers: $problem" >&2
  echo "  install them: $python -m pip install --ignore-requires-python 'nemo-gym==0.7.0' uv -e \$STATEGYM_ROOT" >&2
  exit 1
fi

mkdir -p "$dir"
dir=$(cd "$dir" && pwd -P)
for server in resources_servers/stategym_resources responses_api_agents/simple_agent \
    responses_api_models/openai_model environment_servers/single_agent_turn_legacy \
    environment_servers/legacy_agent; do
  target="$dir/$server/.venv"
  mkdir -p "$dir/$server"
  if [ -L "$target" ] && [ "$(readlink "$target")" = "$venv" ]; then
    continue
  fi
  if [ -e "$target" ] || [ -L "$target" ]; then
    echo "gym-server-venvs: replacing $target (left by an earlier launcher install)"
    rm -rf "$target" "$target.setup.lock"
  fi
  ln -s "$venv" "$target"
done
echo "gym-server-venvs: 5 server venvs in $dir -> $venv"
echo "start with: gym env start ... +uv_venv_dir=$dir +skip_venv_if_present=true"
