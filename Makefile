# Everything a fresh machine needs, from python3 alone.
VENV := .venv
PY := $(VENV)/bin/python

# The core's sources (src/ykbus/core/compiled.py, core_source_paths): the build compiles
# some of them and checks the types of the rest, so it runs again once one changes (until
# then the core runs as pure Python, and says so). The stamp is taken before the build: a
# file saved while it runs makes the next `make` build again.
CORE_SOURCES := $(shell python3 -c "import runpy, pathlib; print(*runpy.run_path('src/ykbus/core/compiled.py')['core_source_paths'](pathlib.Path('src/ykbus')))")

# What running needs (`make run`): the package and its dependencies, nothing of the dev extras.
$(VENV)/.installed: pyproject.toml setup.py
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	YKBUS_PURE_PYTHON=1 $(PY) -m pip install -q -e .
	touch $@

# What testing needs besides (`make test`): the dev extras of pyproject.toml, their packages
# only, so that the package (and its compiled core) is not built again.
$(VENV)/.dev: $(VENV)/.installed pyproject.toml
	$(PY) -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['dev'], sep='\n')" > $(VENV)/dev-requirements.txt
	$(PY) -m pip install -q -r $(VENV)/dev-requirements.txt
	touch $@

$(VENV)/.compiled: $(VENV)/.installed $(CORE_SOURCES)
	@[ "$${YKBUS_PURE_PYTHON:-0}" != 0 ] || echo "make: compiling the scheduling core with mypyc (one to three minutes the first time; YKBUS_PURE_PYTHON=1 skips it)"
	touch $@.next
	$(PY) -m pip install -q --no-deps -e .
	mv $@.next $@

# What the tests need from the system, from Debian's packages: Prometheus (promtool and a
# server scraping a core: tests/integration/test_metrics.py) and Chromium (the web UI as a
# person sees it: tests/integration/test_web_ui.py). Installed once, as root or through sudo.
SYSTEM_PACKAGES := prometheus chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
$(VENV)/.system: Makefile
	@command -v promtool >/dev/null && command -v prometheus >/dev/null && command -v chromium >/dev/null || \
		{ $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $(SYSTEM_PACKAGES); }
	mkdir -p $(VENV) && touch $@

.PHONY: build run test schemas traces fuzz fuzz-long faults-long
build: $(VENV)/.installed  # compile the core now, whatever the last build was (a pure one, say)
	rm -f $(VENV)/.compiled
	$(MAKE) --no-print-directory $(VENV)/.compiled

run: $(VENV)/.compiled
	$(VENV)/bin/ykbus up $(ARGS)

test: $(VENV)/.compiled $(VENV)/.dev $(VENV)/.system
	$(VENV)/bin/ruff check src tests services benchmarks setup.py
	$(PY) -m pytest -n 2 --dist loadgroup

schemas: $(VENV)/.compiled
	$(VENV)/bin/ykbus schema --dir schemas

traces: $(VENV)/.compiled $(VENV)/.dev
	$(PY) tests/traces/generate.py

# The fuzz suite (tests/fuzz): `fuzz` is the short profile CI runs as part of `test`;
# `fuzz-long` counts failures over many logs and messages (the figures), then runs the
# suite with the long Hypothesis profile. FUZZ_LOGS, FUZZ_MESSAGES and FUZZ_SEED tune it.
FUZZ_LOGS ?= 20000
FUZZ_MESSAGES ?= 50000
FUZZ_SEED ?= $(shell date +%s)
fuzz: $(VENV)/.compiled $(VENV)/.dev
	$(PY) -m pytest tests/fuzz

fuzz-long: $(VENV)/.compiled $(VENV)/.dev
	-$(PY) -m tests.fuzz.campaign --logs $(FUZZ_LOGS) --messages $(FUZZ_MESSAGES) --seed $(FUZZ_SEED) --bus
	YKBUS_FUZZ=long YKBUS_FUZZ_MESSAGES=$(FUZZ_MESSAGES) $(PY) -m pytest tests/fuzz

# The fault suite (tests/faults: kill -9 of the core and of the leader, a paused leader, a
# NATS server of three killed and restarted, a full snapshot disk, RMs that go quiet): its
# short profile runs in `test`; `faults-long` kills the leader 10 times and each NATS
# server of the cluster in turn.
faults-long: $(VENV)/.compiled $(VENV)/.dev
	YKBUS_FAULTS=long $(PY) -m pytest tests/faults -s
