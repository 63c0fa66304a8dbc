# Two commands on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: test test-sqlite test-postgres install clean

$(BIN)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $@

install: $(BIN)/.installed

# The whole suite on SQLite, then on PostgreSQL (needs a server on 127.0.0.1:5432).
test: install
	BOSON_TEST_DB=sqlite $(BIN)/python -m pytest $(PYTEST_ARGS)
	BOSON_TEST_DB=postgres $(BIN)/python -m pytest $(PYTEST_ARGS)

test-sqlite: install
	BOSON_TEST_DB=sqlite $(BIN)/python -m pytest $(PYTEST_ARGS)

test-postgres: install
	BOSON_TEST_DB=postgres $(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info
