# Two entry points for a newcomer: `make run` and `make test` (see README).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: install run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP)

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
