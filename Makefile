# Two entry points for a fresh machine (see README.md):
#   make demo   installs everything and runs the main job
#   make test   installs everything and runs every gate and the whole test suite
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
export AIRFLOW_HOME ?= $(CURDIR)/.airflow
export AIRFLOW__CORE__LOAD_EXAMPLES ?= False

.PHONY: install postgres lint test demo clean

$(VENV)/.installed: pyproject.toml
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

test: lint postgres
	$(PY) -m pytest -q

demo: install
	$(VENV)/bin/dpone plan dags_examples/manifests/clickhouse_external_full_refresh.yaml

clean:
	rm -rf $(VENV) .airflow .mypy_cache .pytest_cache .ruff_cache
