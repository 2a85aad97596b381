# One command each: `make serve` runs the governor, `make test` runs every check and test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed-runtime
DEV := $(VENV)/.installed-dev
# Where `make serve` and `make demo` listen: `make demo PORT=8001` beside a running `make serve`.
PORT ?= 8000

.PHONY: serve demo test lint

$(VENV):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The governor itself: what `make serve` needs.
$(RUNTIME): pyproject.toml | $(VENV)
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUNTIME)

# Plus the test tools and what the tests drive (torch CPU, transformers, Lightning, Playwright).
$(DEV): pyproject.toml | $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
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

# Two workers even on two cores: most end-to-end tests wait on servers they started.
test: lint
	$(BIN)/pytest -n 2 --dist loadfile
