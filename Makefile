# Everything runs through .venv/bin/... so no activation is needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv node run serve test bench lint format

# The venv is created only when missing; requirements are reinstalled only when
# requirements.txt is newer than the stamp written after the last install.
venv: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): requirements.txt | $(PY)
	$(PY) -m pip install -r requirements.txt
	touch $@

# The MCP servers the proxy's tests and bench wrap (the reference filesystem server),
# exactly as package-lock.json pins them, in ./node_modules; again only when the lock
# file is newer than the stamp.
NODE_STAMP := node_modules/.installed
node: $(NODE_STAMP)

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

# The site with demo data on SQLite in ./data, at http://127.0.0.1:8000 (or
# `make run PORT=8001`), with development settings (DEBUG on).
PORT ?= 8000
run: venv
	$(PY) manage.py serve_demo 127.0.0.1:$(PORT)

# The production server for a team (docs/team.md, "Run it for a team"), set up from the
# environment. It refuses to start with DEBUG on, without SECRET_KEY or ALLOWED_HOSTS
# before anything else runs; then migrates, collects static files, removes what crashed
# writers left in the data folder, prints the deployment checks and runs gunicorn
# (blobviewer/gunicorn.conf.py), which replaces the shell and gets make's signals.
serve: venv
	$(PY) -m blobviewer.serve_preflight
	$(PY) manage.py migrate --no-input
	$(PY) manage.py collectstatic --no-input --verbosity 0
	$(PY) manage.py blobs gc
	$(PY) manage.py blobs index
	$(PY) manage.py check --deploy
	exec $(PY) -m gunicorn --config blobviewer/gunicorn.conf.py

# The whole suite on as many workers as the machine has cores (pytest-xdist); ARGS goes
# to pytest: `make test ARGS="-k share"`, `make test ARGS="tests/web/reader -n0 -x"`.
ARGS ?=
test: venv node
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy core blobviewer
	$(PY) -m pytest -n auto --dist loadgroup $(ARGS)

bench: venv node
	$(PY) bench/core_bench.py
	$(PY) bench/promotion_bench.py
	$(PY) bench/site_bench.py
	$(PY) bench/ingest_bench.py
	$(PY) bench/watch_bench.py
	$(PY) bench/mcp_bench.py
	$(PY) bench/store_bench.py
	$(PY) bench/peer_bench.py
	$(PY) bench/search_bench.py
	$(PY) bench/compare_bench.py
	$(PY) bench/otlp_bench.py

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy core blobviewer

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .
