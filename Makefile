# Two commands on a fresh clone: `make demo` and `make test`.
# Needs only Python >= 3.11 (python3) and make; everything else goes into .venv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(abspath $(BIN)/python)

.PHONY: demo demo-check demo-postgres test test-sqlite test-postgres test-slow test-slow-sqlite test-slow-postgres lint docs docs-check wheel-check install clean

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

# The suite on SQLite, then on PostgreSQL (needs a server on 127.0.0.1:5432), in parallel
# (pytest-xdist: XDIST="-n 0" runs it in one process; each worker has its own databases,
# tests/databases.py). The tests marked slow (fault, chaos and crash scenarios, the real
# clients, the demo) are left to `make test-slow`; MARKS="" runs everything, and
# PYTEST_ARGS passes anything else to pytest (a path, -k, -x).
XDIST ?= -n 2
MARKS ?= not slow
PYTEST = $(BIN)/python -m pytest $(XDIST) -m "$(MARKS)" $(PYTEST_ARGS)

test: $(BIN)/.installed-dev
	BOSON_TEST_DB=sqlite $(PYTEST)
	BOSON_TEST_DB=postgres $(PYTEST)

test-sqlite: $(BIN)/.installed-dev
	BOSON_TEST_DB=sqlite $(PYTEST)

test-postgres: $(BIN)/.installed-dev
	BOSON_TEST_DB=postgres $(PYTEST)

# Only the tests marked slow, on SQLite, then on PostgreSQL (CI runs them as a step of
# their own).
test-slow: $(BIN)/.installed-dev
	$(MAKE) test MARKS=slow

test-slow-sqlite: $(BIN)/.installed-dev
	$(MAKE) test-sqlite MARKS=slow

test-slow-postgres: $(BIN)/.installed-dev
	$(MAKE) test-postgres MARKS=slow

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
