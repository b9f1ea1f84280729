# The two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint eval bench bench-grounding clean lock image

# Create the virtualenv: the runtime dependencies exactly as locked (what the image
# runs), then the project editable with its dev tools; redone when either file changes.
# Installed with uv (itself a dev tool, put in the venv by pip): seconds instead of minutes.
# Compiled to bytecode at install, as pip does: with PYTHONDONTWRITEBYTECODE set, nothing
# else would, and every process would compile its libraries from source.
$(VENV)/.installed: pyproject.toml requirements.lock
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "tracegate needs Python >= 3.11 (set PYTHON=...)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -x $(BIN)/uv || $(BIN)/pip install --quiet 'uv>=0.5'
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -r requirements.lock
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	scripts/with-redis --optional $(BIN)/tracegate demo $(DEMO_ARGS)

# Side by side (pytest-xdist, 5 workers on any machine: most of a test's time is spent
# waiting on leases, retry delays and simulated services, not on the CPU): the tests that
# start processes one at a time in each of TEST_PROCESS_LANES=3 lanes, the rest wherever a
# worker is free (tests/conftest.py). TEST_WORKERS=0 runs them all one after another.
# Bytecode is written (__pycache__ is ignored by git) even where PYTHONDONTWRITEBYTECODE is
# set: otherwise each process the tests start compiles the project from source, and each
# pytest worker rewrites every test module's asserts again.
TEST_WORKERS ?= 5
test: $(VENV)/.installed
	scripts/fetch-alertmanager
	PYTHONDONTWRITEBYTECODE= scripts/with-redis $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadgroup

# The image from the Dockerfile, with whichever container engine is installed (docker first;
# ENGINE=podman to choose).
IMAGE ?= tracegate:latest
ENGINE ?= $(shell command -v docker 2>/dev/null || command -v podman 2>/dev/null)
image:
	@if [ -z "$(ENGINE)" ]; then \
		echo "make image: neither docker nor podman is installed; install one of them (or set ENGINE=...)" >&2; \
		exit 1; \
	fi
	$(ENGINE) build -t $(IMAGE) .

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Every scenario of evals/scenarios answered by the reference investigator through the real
# graph and guards; fails when a scenario's evidence is out of the tools' reach or a guard
# harms a correct answer. Writes its figures into EVALS.md.
eval: $(VENV)/.installed
	scripts/with-redis --optional $(BIN)/tracegate eval --write-evals --out .cache/eval-reports

bench: $(VENV)/.installed
	scripts/with-redis $(BIN)/python -m bench

# Grounding precision and recall alone (no Redis needed); updates its BENCHMARKS.md section.
bench-grounding: $(VENV)/.installed
	$(BIN)/python -m bench.grounding

# docs/configuration.md from the settings model (bot/process/settings.py), docs/tools.md from
# the tool registry (graph/tools/registry.py); tests fail when either page is stale.
.PHONY: docs
docs: $(VENV)/.installed
	$(BIN)/tracegate config docs --out docs/configuration.md
	$(BIN)/python -m graph.tools.registry > docs/tools.md

# Re-resolve the runtime dependencies after changing them in pyproject.toml; every
# platform's wheels are hashed, so the image installs with --require-hashes.
lock: $(VENV)/.installed
	$(BIN)/uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes \
		--no-header --quiet -o requirements.lock

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache *.egg-info
