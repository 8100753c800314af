# The two-command promise: `make run` serves the default environment, `make test` runs the suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
ENV ?= retail
HOST ?= 127.0.0.1
PORT ?= 8000
DATA_DIR ?= var

.PHONY: install run test test-fast test-slow test-scale test-all test-browser test-nemo-gym test-nemo-gym-guide test-openenv test-verifiers lint bench bench-targets bench-profile bench-taskgen shipped-tasks clean

$(BIN)/stategym-installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/stategym-installed

run: install
	$(BIN)/stategym prepare --env $(ENV) --data-dir $(DATA_DIR)
	$(BIN)/stategym serve --env $(ENV) --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

# Some machines set PYTHONDONTWRITEBYTECODE=1 for every process: then each pytest worker compiles
# and assertion-rewrites every module anew (collection 17 s instead of 10 s here). Not for us.
unexport PYTHONDONTWRITEBYTECODE

# pytest exits 5 when it collected nothing: a broken suite, so fail loudly. One worker per core
# and one more (pytest-xdist, work stealing so one long test does not hold the end): the suite
# waits on servers it starts and on sleeps, so a third worker on 2 cores took `make test` from
# 5:00 to 4:18 (a fourth: 5:00 again; 1:41 since the CLI loads lazily and workers collect less).
# TEST_WORKERS=0 runs in this process (for pdb).
TEST_WORKERS ?= $(shell python3 -c 'import os; print(len(os.sched_getaffinity(0)) + 1)' 2>/dev/null || echo auto)
XDIST = -n $(TEST_WORKERS) $(if $(filter 0,$(TEST_WORKERS)),,--dist worksteal)
test: install
	@$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$status

# The edit-run loop: `make test` without what starts real servers or needs PostgreSQL (the
# `server` and `postgres` markers, put on by tests/conftest.py). Not a CI target: CI runs both.
test-fast: install
	@$(BIN)/python -m pytest $(XDIST) -m 'not slow and not scale and not server and not postgres' \
		$(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$status

# The marked sets `make test` leaves out (pyproject.toml): `slow` runs in CI, `scale` by hand.
# One worker per core: the slow set holds the load and crash-under-load tests.
SLOW_WORKERS ?= auto
test-slow: install
	$(BIN)/python -m pytest -n $(SLOW_WORKERS) --dist worksteal -m slow $(PYTEST_ARGS)

test-scale: install
	$(BIN)/python -m pytest -m scale $(PYTEST_ARGS)

test-all: test test-slow

# Headless Chromium against `stategym browse` (installs Debian's chromium + chromium-driver).
test-browser: install
	PYTHON=$(BIN)/python scripts/test-browser.sh

# NeMo Gym 0.7.0's own session conformance check (tests/nemo_gym_conformance/) in a Python 3.13
# virtualenv: nemo-gym needs 3.13 and declares >= 3.13.14, so it is installed with
# --ignore-requires-python when only an older 3.13 is around (docs/nemo_gym.md).
GYM_PYTHON ?= $(shell scripts/find-python313.sh)
GYM_VENV ?= .venv-gym
NEMO_GYM_VERSION ?= 0.7.0

$(GYM_VENV)/stategym-installed: pyproject.toml
	@test -n "$(GYM_PYTHON)" || { echo "test-nemo-gym needs Python 3.13 (set GYM_PYTHON=...)" >&2; exit 1; }
	test -x $(GYM_VENV)/bin/python || $(GYM_PYTHON) -m venv $(GYM_VENV)
	$(GYM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(GYM_VENV)/bin/python -m pip install --quiet --ignore-requires-python 'nemo-gym==$(NEMO_GYM_VERSION)'
	$(GYM_VENV)/bin/python -m pip install --quiet -e . 'pytest>=8' 'pytest-asyncio>=0.23'
	touch $@

test-nemo-gym: $(GYM_VENV)/stategym-installed
	$(GYM_VENV)/bin/python -m pytest -p no:cacheprovider -o addopts=-ra tests/nemo_gym_conformance \
		tests/integrations/test_nemo_gym_kit.py::test_nemo_gym_reads_the_configs_when_installed

# docs/nemo_gym.md word for word (scripts/run_doc_guide.py): NeMo Gym's launcher, collector and
# `gym eval reverify` with the gold policy as the model, both flows, under a throwaway $HOME;
# blocks that need a real model or the network are skipped with their reason. ~5 min on 2 cores.
test-nemo-gym-guide: $(GYM_VENV)/stategym-installed
	$(GYM_VENV)/bin/python scripts/run_doc_guide.py docs/nemo_gym.md --venv $(GYM_VENV) \
		--allow integrations/nemo_gym/stategym_resources/data/

# OpenEnv's own clients drive `stategym serve --protocol openenv` (tests/openenv_clients/) in a
# virtualenv with the stategym[openenv] extra (the real openenv package from the registry). The
# same virtualenv has transformers (no torch), whose get_json_schema is how TRL reads the tools of
# app/integrations/trl.py; trl itself needs torch, too heavy for CI (docs/integrations.md).
OPENENV_PYTHON ?= $(shell command -v python3.11 || command -v python3)
OPENENV_VENV ?= .venv-openenv

$(OPENENV_VENV)/stategym-installed: pyproject.toml
	test -x $(OPENENV_VENV)/bin/python || $(OPENENV_PYTHON) -m venv $(OPENENV_VENV)
	$(OPENENV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(OPENENV_VENV)/bin/python -m pip install --quiet -e '.[openenv]' 'pytest>=8' 'pytest-asyncio>=0.23' \
		'transformers>=5.2'
	touch $@

test-openenv: $(OPENENV_VENV)/stategym-installed
	$(OPENENV_VENV)/bin/python -m pytest -p no:cacheprovider -o addopts=-ra tests/openenv_clients \
		tests/integrations/test_trl_environment.py

# verifiers' own NeMoGymTaskset against a live StateGym (tests/verifiers_taskset/). verifiers pins
# mcp 2.x and StateGym needs mcp 1.x, so verifiers gets a virtualenv of its own and the server
# runs from the project's ($(BIN)/python); --noconftest keeps StateGym's fixtures out of it.
VERIFIERS_PYTHON ?= $(shell command -v python3.11 || command -v python3)
VERIFIERS_VENV ?= .venv-verifiers
VERIFIERS_VERSION ?= 0.4.0

$(VERIFIERS_VENV)/installed:
	test -x $(VERIFIERS_VENV)/bin/python || $(VERIFIERS_PYTHON) -m venv $(VERIFIERS_VENV)
	$(VERIFIERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VERIFIERS_VENV)/bin/python -m pip install --quiet 'verifiers==$(VERIFIERS_VERSION)' \
		'pytest>=8' 'pytest-asyncio>=0.23'
	touch $@

test-verifiers: install $(VERIFIERS_VENV)/installed
	STATEGYM_PYTHON=$(abspath $(BIN)/python) $(VERIFIERS_VENV)/bin/python -m pytest --noconftest \
		-p no:cacheprovider -o addopts=-ra tests/verifiers_taskset

# The types gate CI too: mypy's settings are in pyproject.toml ([tool.mypy]: app, envs, bench).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# One benchmark by name, the full HTTP suite unless BENCH names another (`make bench BENCH=cpu_split
# BENCH_ARGS='--env sql'`); `python -m bench --list` names them, bench/README.md indexes them.
BENCH ?= suite
BENCH_ARGS ?=
bench: install
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench $(BENCH) $(BENCH_ARGS)

# The targets in one table: rollout traffic vs the lean baseline per environment, server-side
# p50/p90/p99, the 2,000-request burst, PostgreSQL vs SQLite (bench/targets.py, bench/README.md).
bench-targets: install
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench targets

# Where each ms of seed, tool call, verify and close goes (bench/profile_ops.py,
# bench/history/profile_ops.md).
bench-profile: install
	$(BIN)/python -m bench profile_ops

# Validated generated tasks per second per environment (bench/taskgen.py, bench/history/taskgen.md).
bench-taskgen: install
	$(BIN)/python -m bench taskgen

# Rewrite the shipped evaluation sets (byte-identical every run; docs/generating_tasks.md): each
# environment package of this repository keeps its own (envs/<name>/tasks.jsonl, its tasks_path).
shipped-tasks: install
	for path in envs/*/tasks.jsonl; do env=$$(basename $$(dirname $$path)); \
		$(BIN)/stategym tasks generate --env $$env --shipped $$path || exit 1; done

clean:
	rm -rf $(VENV) $(GYM_VENV) $(OPENENV_VENV) $(VERIFIERS_VENV) $(DATA_DIR) .pytest_cache
