# Everything a fresh machine needs, from python3 alone.
VENV := .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

.PHONY: run test schemas traces
run: $(VENV)/.installed
	$(VENV)/bin/ykbus up

test: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests services bench
	$(PY) -m pytest

schemas: $(VENV)/.installed
	$(VENV)/bin/ykbus schema --dir schemas

traces: $(VENV)/.installed
	$(PY) tests/traces/generate.py
