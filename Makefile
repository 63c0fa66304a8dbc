# Two commands on a fresh clone: `make demo` and `make test`.
# Needs only Python >= 3.11 (python3) and make; everything else goes into .venv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(abspath $(BIN)/python)

.PHONY: demo demo-check demo-postgres test test-sqlite test-postgres lint docs docs-check wheel-check install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The package alone (enough for the demo on SQLite).
$(BIN)/.installed: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install -q --disable-pip-version-check -e .
	touch $@

# The package with its test, dev and clients extras (pytest, psycopg, ruff, mypy; the pinned
# Wagtail and django-pictures that tests/clients runs).
$(BIN)/.installed-dev: $(BIN)/.installed
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[test,dev,clients]"
	touch $@

install: $(BIN)/.installed-dev

# The demo: fresh SQLite database, an admin login, workers, the development server, a
# trickle of jobs and a live view of the queues, until Ctrl-C. BOSON_DEMO_DB=postgres runs
# it on PostgreSQL.
demo: $(BIN)/.installed
	cd example_project && $(PY) manage.py boson_demo $(DEMO_ARGS)

# The demo's non-interactive mode: drain every job, check where each ended, exit.
demo-check: $(BIN)/.installed
	cd example_project && $(PY) manage.py boson_demo --drain $(DEMO_ARGS)

demo-postgres: $(BIN)/.installed-dev
	cd example_project && BOSON_DEMO_DB=postgres $(PY) manage.py boson_demo $(DEMO_ARGS)

# The whole suite on SQLite, then on PostgreSQL (needs a server on 127.0.0.1:5432).
test: $(BIN)/.installed-dev
	BOSON_TEST_DB=sqlite $(BIN)/python -m pytest $(PYTEST_ARGS)
	BOSON_TEST_DB=postgres $(BIN)/python -m pytest $(PYTEST_ARGS)

test-sqlite: $(BIN)/.installed-dev
	BOSON_TEST_DB=sqlite $(BIN)/python -m pytest $(PYTEST_ARGS)

test-postgres: $(BIN)/.installed-dev
	BOSON_TEST_DB=postgres $(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(BIN)/.installed-dev
	$(BIN)/ruff check boson_django example_project scripts tests bench
	$(BIN)/mypy boson_django

# Regenerate the state machine in docs/concepts.md and docs/settings.md from states.py and conf.py.
docs: $(BIN)/.installed
	$(BIN)/python scripts/gen_docs.py

docs-check: docs
	git diff --exit-code -- docs/

wheel-check: $(BIN)/.installed
	PYTHON=$(PY) bash .ci/wheel-check

clean:
	rm -rf $(VENV) build dist *.egg-info example_project/demo-logs example_project/demo.sqlite3*
