# One command each: `make serve` runs the governor, `make test` runs every check and test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed-runtime
DEV := $(VENV)/.installed-dev
# The lock files: every package pinned, generated from pyproject.toml's ranges by `make lock`.
RUNTIME_LOCK := requirements/runtime.txt
DEV_LOCK := requirements/dev.txt
# pip-tools, in a virtualenv of its own: it resolves with pip's own configuration.
LOCK_TOOL := .venv-lock
PIP_TOOLS := pip-tools==7.7.0
# Where `make serve` and `make demo` listen: `make demo PORT=8001` beside a running `make serve`.
PORT ?= 8000

# The launchers the launch gates are tested with, each in a virtualenv of its own.
SKYPILOT := .venv-skypilot/.installed
DSTACK := .venv-dstack/.installed

.PHONY: serve demo test lint test-prerequisites launchers lock

$(VENV):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The governor itself, with the extras the container image has (the providers', the Parquet export's,
# sign-in's): what `make serve` needs.
$(RUNTIME): $(RUNTIME_LOCK) pyproject.toml | $(VENV)
	$(BIN)/python -m pip install --quiet -r $(RUNTIME_LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(RUNTIME)

# Plus the test tools and what the tests drive (torch CPU, transformers, Lightning, Playwright).
$(DEV): $(DEV_LOCK) pyproject.toml | $(VENV)
	$(BIN)/python -m pip install --quiet -r $(DEV_LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(DEV) $(RUNTIME)

serve: $(RUNTIME)
	$(BIN)/governor serve --port $(PORT)

demo: $(RUNTIME)
	$(BIN)/governor demo --port $(PORT)

lint: $(DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# What the tests run beyond Python (Chromium, promtool, systemd-analyze, curl, jq, git,
# PostgreSQL's programs) installed when missing, and PostgreSQL started on 127.0.0.1:5432.
test-prerequisites:
	bash tests/prerequisites.sh

# The FinOps Foundation's FOCUS validator, in a virtualenv of its own: its pins conflict with
# the dev lock. The export's test runs it (tests/integration/test_costs_export.py).
FOCUS_VENV := .venv-focus
FOCUS_VALIDATOR := $(FOCUS_VENV)/.installed
$(FOCUS_VALIDATOR): requirements/focus-validator.txt
	$(PYTHON) -m venv $(FOCUS_VENV)
	$(FOCUS_VENV)/bin/python -m pip install --quiet -r requirements/focus-validator.txt
	touch $(FOCUS_VALIDATOR)

# The OpenID Connect provider the sign-in tests run (oidc-provider, under Node.js), from its lock.
OIDC_PROVIDER := tests/oidc_provider
$(OIDC_PROVIDER)/node_modules/.installed: $(OIDC_PROVIDER)/package-lock.json | test-prerequisites
	npm ci --prefix $(OIDC_PROVIDER) --no-audit --no-fund
	touch $@

$(SKYPILOT): requirements/skypilot.txt
	$(PYTHON) -m venv .venv-skypilot
	.venv-skypilot/bin/python -m pip install --quiet --no-deps -r requirements/skypilot.txt
	touch $(SKYPILOT)

$(DSTACK): requirements/dstack.txt
	$(PYTHON) -m venv .venv-dstack
	.venv-dstack/bin/python -m pip install --quiet --no-deps -r requirements/dstack.txt
	touch $(DSTACK)

launchers: $(SKYPILOT) $(DSTACK)

# Two workers even on two cores: most end-to-end tests wait on servers they started.
test: test-prerequisites launchers lint $(FOCUS_VALIDATOR) $(OIDC_PROVIDER)/node_modules/.installed
	$(BIN)/pytest -n 2 --dist loadfile

$(LOCK_TOOL):
	$(PYTHON) -m venv $(LOCK_TOOL)
	$(LOCK_TOOL)/bin/python -m pip install --quiet $(PIP_TOOLS)

# Both lock files anew, each package at the newest release pyproject.toml's ranges allow. The
# runtime's extras are the image's; the dev lock takes the dev extra (and every extra it names),
# held to the runtime lock's versions. No index or wheel location of this machine is written.
COMPILE := CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_TOOL)/bin/pip-compile --quiet --upgrade \
	--strip-extras --no-emit-index-url --no-emit-find-links --no-emit-trusted-host \
	--unsafe-package gpu-governor
lock: | $(LOCK_TOOL)
	$(COMPILE) --extra aws --extra gcp --extra kubernetes --extra focus --extra oidc \
		--output-file $(RUNTIME_LOCK) pyproject.toml
	$(COMPILE) --extra dev --constraint $(RUNTIME_LOCK) --output-file $(DEV_LOCK) pyproject.toml
