# The two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint bench clean

# Create the virtualenv and install the project with its dev tools; redone when
# pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "tracegate needs Python >= 3.11 (set PYTHON=...)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	scripts/with-redis --optional $(BIN)/tracegate demo $(DEMO_ARGS)

test: $(VENV)/.installed
	scripts/with-redis $(BIN)/pytest -q

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(VENV)/.installed
	scripts/with-redis $(BIN)/python -m bench

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache *.egg-info
