#!/usr/bin/env bash
# Browser tests (`pytest -m browser`): `stategym browse` driven by the Debian Chromium.
# Installs the Debian packages chromium and chromium-driver when missing (never a downloaded
# browser), then runs the tests marked `browser` with STATEGYM_BROWSER_TESTS=1.
# Usage: scripts/test-browser.sh [--screenshots] [extra pytest args]   (PYTHON=... picks the
# interpreter). --screenshots also saves each explorer page as docs/images/explorer-*.png.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver
fi

if ! "$PYTHON" -c "import selenium" 2>/dev/null; then
  echo "selenium is missing from $PYTHON: install the dev extras (pip install -e '.[dev]')" >&2
  exit 1
fi

if [ "${1:-}" = "--screenshots" ]; then
  shift
  export STATEGYM_SCREENSHOT_DIR="$PWD/docs/images"
fi

STATEGYM_BROWSER_TESTS=1 exec "$PYTHON" -m pytest -m browser tests/browser "$@"
