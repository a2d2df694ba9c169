# Two entry points for a newcomer: `make run` and `make test` (see README).
# `make run` installs the runtime only (`pip install -e .`); `make test` the test extras
# (Spark, the studio's synthetic copy, pytest, ruff) and axe-core. Each has its own stamp, so
# either works first on a fresh clone and neither reinstalls what the other already did.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HASH   := $(shell sha1sum pyproject.toml | cut -c1-12)
RUN_STAMP  := $(VENV)/.installed-run-$(HASH)
TEST_STAMP := $(VENV)/.installed-test-$(HASH)
AXE_VERSION := 4.11.0
AXE    := $(VENV)/axe/.installed-$(AXE_VERSION)

.PHONY: install run test lint bench clean

# The venv's own pip (≥ 23 with Python 3.11) installs editable projects: no upgrade step.
# --no-compile: modules are byte-compiled when first imported, not all 6 500 files of the
# runtime (10 700 with the test extras) at install: half the install time (bench/RESULTS.md).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The runtime: what `make run` serves with. Already there when the test extras are.
$(RUN_STAMP): pyproject.toml | $(BIN)/python
	if [ ! -e $(TEST_STAMP) ]; then $(BIN)/python -m pip install --quiet --no-compile -e "."; fi
	rm -f $(VENV)/.installed-run-* && touch $@

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --no-compile -e ".[test]"
	rm -f $(VENV)/.installed-test-* && touch $@

# axe-core (npm registry) for the browser accessibility test. Without npm that one test is
# skipped with its reason (under CI it fails: .ci/run installs npm).
$(AXE): $(TEST_STAMP)
	@if command -v npm >/dev/null; then \
	    npm install --silent --no-audit --no-fund --prefix $(VENV)/axe axe-core@$(AXE_VERSION) \
	    && rm -f $(VENV)/axe/.installed-* && touch $@; \
	else echo "npm not found: the accessibility browser test will be skipped"; fi

install: $(TEST_STAMP) $(AXE)

run: $(RUN_STAMP)
	$(BIN)/python app.py

lint: $(TEST_STAMP)
	$(BIN)/ruff check .

test: $(TEST_STAMP) $(AXE)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

bench: $(TEST_STAMP)
	$(BIN)/python -m pip install --quiet -e ".[test,bench]"
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
