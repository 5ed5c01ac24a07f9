# Everything a fresh machine needs, from python3 alone.
VENV := .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

.PHONY: run test schemas traces fuzz fuzz-long
run: $(VENV)/.installed
	$(VENV)/bin/ykbus up

test: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests services bench
	$(PY) -m pytest

schemas: $(VENV)/.installed
	$(VENV)/bin/ykbus schema --dir schemas

traces: $(VENV)/.installed
	$(PY) tests/traces/generate.py

# The fuzz suite (tests/fuzz): `fuzz` is the short profile CI runs as part of `test`;
# `fuzz-long` counts failures over many logs and messages (the figures), then runs the
# suite with the long Hypothesis profile. FUZZ_LOGS, FUZZ_MESSAGES and FUZZ_SEED tune it.
FUZZ_LOGS ?= 20000
FUZZ_MESSAGES ?= 50000
FUZZ_SEED ?= $(shell date +%s)
fuzz: $(VENV)/.installed
	$(PY) -m pytest tests/fuzz

fuzz-long: $(VENV)/.installed
	-$(PY) -m tests.fuzz.campaign --logs $(FUZZ_LOGS) --messages $(FUZZ_MESSAGES) --seed $(FUZZ_SEED) --bus
	YKBUS_FUZZ=long YKBUS_FUZZ_MESSAGES=$(FUZZ_MESSAGES) $(PY) -m pytest tests/fuzz
