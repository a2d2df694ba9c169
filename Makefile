# Two entry points for a newcomer: `make run` and `make test` (see README).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
AXE_VERSION := 4.11.0
AXE    := $(VENV)/axe/.installed-$(AXE_VERSION)

.PHONY: install run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	rm -f $(VENV)/.installed-* && touch $(STAMP)

# axe-core (npm registry) for the browser accessibility test. Without npm that one test is
# skipped with its reason (under CI it fails: .ci/run installs npm).
$(AXE): $(STAMP)
	@if command -v npm >/dev/null; then \
	    npm install --silent --no-audit --no-fund --prefix $(VENV)/axe axe-core@$(AXE_VERSION) \
	    && rm -f $(VENV)/axe/.installed-* && touch $@; \
	else echo "npm not found: the accessibility browser test will be skipped"; fi

install: $(STAMP) $(AXE)

run: install
	$(BIN)/python app.py

lint: install
	$(BIN)/ruff check .

test: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python -m pip install --quiet -e ".[test,bench]"
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
