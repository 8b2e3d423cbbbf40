# Entry points for a fresh machine (see README.md):
#   make demo            installs everything and runs the main job (external replication)
#   make demo-internal   the same for internal replication (ReplicatedMergeTree, internal_replication=true)
#   make demo-quality    the internal one with durable quality replay (docs/quality-replay.md)
#   make test            installs everything and runs every gate, the strict docs build and the whole test suite
#   make dist            builds the wheels and sdists of the provider and of the embedded cluster into dist/
#                        (see docs/getting-started.md)
#   make docs            builds the docs site from docs/ into build/site (strict: a broken link fails)
#   make test-distributed  the opt-in multi-worker suite: a Celery deployment, workers SIGKILLed mid-task
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
# the demo's Airflow home; the test suite ignores it (tests/support/airflow_home.py gives each session its own)
export AIRFLOW_HOME ?= $(CURDIR)/.airflow
export AIRFLOW__CORE__LOAD_EXAMPLES ?= False
# the demo is one process (dag.test): its worker-local artifact store is the only store
export AIRFLOW__DPONE__SINGLE_WORKER ?= True

.PHONY: install postgres lint docs dist test test-real test-distributed demo demo-internal demo-quality synthetic-receipt clean

$(VENV)/.installed: pyproject.toml packages/dpone-embedded/pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check uv
	VIRTUAL_ENV=$(VENV) $(UV) pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# The PostgreSQL transfer-target tests start their own throwaway server from these binaries.
postgres:
	bash scripts/ci/postgres.sh >/dev/null

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# The docs site (mkdocs.yml: strict, so a broken link between pages, a missing anchor or a link out of docs/ fails).
docs: install
	$(VENV)/bin/mkdocs build --strict --quiet

# The wheel (the example DAGs and the docs pages inside the package) and the sdist, built from this checkout.
# Built in isolation: uv runs from its own throwaway environment under build/ and builds each distribution in a fresh
# build environment, so nothing is installed into the active or the project's virtual environment.
DIST_TOOLS := build/dist-tools
dist:
	rm -rf dist $(DIST_TOOLS)
	python3 -m venv $(DIST_TOOLS)
	$(DIST_TOOLS)/bin/python -m pip install --quiet --disable-pip-version-check uv
	env -u VIRTUAL_ENV $(DIST_TOOLS)/bin/uv build --quiet --out-dir dist
	env -u VIRTUAL_ENV $(DIST_TOOLS)/bin/uv build --quiet --out-dir dist packages/dpone-embedded

# The suite runs in two processes (pytest-xdist), one test file per process at a time, so a file's module fixtures
# (its embedded clusters) start once; every cluster, server and Airflow home takes its own ports and directories.
test: lint docs postgres
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=15

# The opt-in real-server suite (not part of `make test`), the one command for everything that needs real servers. Needs
# a Docker engine. Starts the compose cluster (three Keeper servers, two ClickHouse servers of the release the embedded
# cluster embeds, SQL Server 2022) and the one-shot SQL Server init step; runs, against them: the port contract suite
# (its `real` backend), the cluster checks, both publication routes end to end through the example DAGs (a killed
# task's retry, a member paused with `docker compose pause` during publish, quality replay) and the SQL Server transfer
# with every loader; prints what passed, failed and was skipped (with the reasons), and stops the servers whatever
# happens (their logs are kept in build/test-real-servers.log). DPONE_REQUIRE_REAL=1 turns an unreachable server
# into a failure, never a skip.
# every case marked real_cluster, wherever it is (-m real_cluster selects them)
REAL_SUITE := tests
REAL_REPORT := build/test-real.xml

test-real: install
	@set -euo pipefail; \
	mkdir -p build; \
	trap 'docker compose --profile init logs --no-color > build/test-real-servers.log 2>&1 || true; docker compose --profile init down -v > /dev/null 2>&1 || true' EXIT; \
	docker compose up -d --wait; \
	docker compose run --rm mssql-init; \
	rm -f $(REAL_REPORT); status=0; \
	DPONE_REQUIRE_REAL=1 $(PY) -m pytest -q -rfEs -m real_cluster --junitxml=$(REAL_REPORT) $(REAL_SUITE) || status=$$?; \
	$(PY) scripts/ci/real_summary.py $(REAL_REPORT) || status=$$((status == 0 ? 1 : status)); \
	exit $$status

# The opt-in multi-worker suite (not part of `make test`, and not run in the 20-minute CI: it builds its own Celery
# deployment and runs for longer than that budget leaves). From PyPI and Debian packages only, no Docker: Airflow with
# the Celery provider in build/distributed/venv (installed as docs/several-workers.md says), PostgreSQL (metadata and
# transfer target), Redis (`apt-get install -y redis-server`), moto's S3 server as both stores, the embedded cluster,
# an api-server, scheduler, dag-processor, triggerer and two Celery workers with their own homes and log ports. The
# external, internal and PostgreSQL examples each lose their worker (SIGKILL) mid-stage, mid-publish, mid-transfer;
# the summary names the time, the kills and every invariant. A piece this machine cannot provide exits 2, never a pass.
test-distributed: install postgres
	$(PY) scripts/distributed/run.py

# The local synthetic fault profile (seed 000): writes test_artifacts/clickhouse-external-publication/
# synthetic-receipt.json (scope local_synthetic, live_certification UNVERIFIED); see docs/limitations.md.
synthetic-receipt: install
	$(PY) bench/synthetic_receipt.py

DEMO_DIR ?= $(CURDIR)/.demo-cluster

# The demos: admission and plan of the example manifest, then the example DAG (dag.test) on the embedded cluster,
# printing the receipt; the cluster is stopped whatever happens.
demo: EXAMPLE := clickhouse_external_full_refresh
demo: CLUSTER_OPTIONS :=
demo-internal: EXAMPLE := clickhouse_internal_full_refresh
demo-internal: CLUSTER_OPTIONS := --members 3
demo-quality: EXAMPLE := clickhouse_internal_quality_replay
demo-quality: CLUSTER_OPTIONS := --members 3
demo demo-internal demo-quality: install
	$(VENV)/bin/dpone plan dags_examples/manifests/$(EXAMPLE).yaml
	$(VENV)/bin/airflow db migrate > /dev/null
	@set -euo pipefail; \
	$(PY) -m dpone_embedded down --dir "$(DEMO_DIR)" > /dev/null 2>&1 || true; rm -rf "$(DEMO_DIR)"; \
	trap '$(PY) -m dpone_embedded down --dir "$(DEMO_DIR)" > /dev/null' EXIT; \
	cluster="$$($(PY) -m dpone_embedded up --dir "$(DEMO_DIR)" $(CLUSTER_OPTIONS))"; \
	field() { printf '%s' "$$cluster" | $(PY) -c "import json, sys; v = json.load(sys.stdin)[sys.argv[1]]; print(v if isinstance(v, str) else json.dumps(v))" "$$1"; }; \
	export AIRFLOW_CONN_DPONE_CLICKHOUSE_DEFAULT="$$(field airflow_connection_json)"; \
	export AIRFLOW__CORE__DAGS_FOLDER="$(CURDIR)/dags_examples" PYTHONPATH="$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH}"; \
	$(PY) dags_examples/$(EXAMPLE).py

clean:
	rm -rf $(VENV) .airflow .demo-cluster .mypy_cache .pytest_cache .ruff_cache build dist
