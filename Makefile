# Everything runs through .venv/bin/... so no activation is needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv run test bench lint format

# The venv is created only when missing; requirements are reinstalled only when
# requirements.txt is newer than the stamp written after the last install.
venv: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): requirements.txt | $(PY)
	$(PY) -m pip install -r requirements.txt
	touch $@

# The site with demo data on SQLite in ./data, at http://127.0.0.1:8000.
run: venv
	$(PY) manage.py serve_demo

test: venv
	$(VENV)/bin/ruff check .
	$(PY) -m pytest

bench: venv
	$(PY) bench/core_bench.py
	$(PY) bench/site_bench.py

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .
