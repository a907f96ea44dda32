# Plain entry points for a fresh machine: everything goes into ./.venv.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
# Two installs, each remembered by a stamp that pyproject.toml outdates: running the bridge needs
# only its own dependencies; the checks add the `test` extra (pytest, ruff, mypy, the tests' relay…).
# The test install includes the run one, so it refreshes both stamps.
RUN_STAMP  := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test unit lint typecheck pytest bench clean web

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUN_STAMP)

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(TEST_STAMP) $(RUN_STAMP)

# The web client's npm packages (web/node_modules) for the checks only: the build check and the
# browser tier (playwright-core drives Debian's Chromium). `make run` never needs them: the built
# app ships in the package. `npm ci` runs again when web/package-lock.json is newer than the
# stamp. Without npm, CI (`CI` set) stops here; locally those tests skip and say what to install.
WEB_LOCK  := $(wildcard web/package-lock.json)
WEB_STAMP := web/node_modules/.installed-ci

$(WEB_STAMP): $(WEB_LOCK)
	@if [ -z "$(WEB_LOCK)" ]; then exit 0; \
	elif command -v npm >/dev/null 2>&1; then \
		cd web && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed-ci; \
	elif [ -n "$$CI" ]; then \
		echo "make: npm is missing; CI runs the web client's checks (apt-get install nodejs npm)" >&2; \
		exit 1; \
	else \
		echo "make: npm is missing: the web client's checks and browser tests will skip" \
			"(apt-get install nodejs npm)" >&2; \
	fi

## Rebuild CodeDeck Web from web/ into bridge/webclient/static/ (commit both).
web: $(WEB_STAMP)
	cd web && npm run build

## Run the bridge in the foreground on its embedded defaults (Ctrl-C stops it).
run: $(RUN_STAMP)
	$(BIN)/codedeck-bridge run $(ARGS)

## The whole test suite: lint, type check, then every test tier.
test: lint typecheck pytest

## The pure and in-process tiers only (no relay, no process started): under a minute, on one
## pytest-xdist worker per core (PYTEST_ARGS="-n 0" runs them in this process, e.g. for pdb).
## The process tiers' folders are not collected at all, and compiled modules are kept under
## .venv whatever PYTHONDONTWRITEBYTECODE says, so a rerun does not compile the tree again.
UNIT_SKIPS := $(foreach tier,integration e2e differential redteam,--ignore=tests/$(tier))
unit: $(TEST_STAMP)
	env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(CURDIR)/$(VENV)/pycache \
		$(BIN)/pytest -q -n auto -m "not integration and not e2e" $(UNIT_SKIPS) $(PYTEST_ARGS)

lint: $(TEST_STAMP)
	$(BIN)/ruff check bridge relaypolicy store tests
	$(BIN)/ruff format --check bridge relaypolicy store tests

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

pytest: $(TEST_STAMP) $(WEB_STAMP)
	$(BIN)/pytest -q $(PYTEST_ARGS)

## Benchmarks, side by side with their baselines; writes docs/BENCHMARKS.md.
bench: $(TEST_STAMP) $(WEB_STAMP)
	$(BIN)/python -m tests.bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache tests/bench/.node web/node_modules

## The full chaos runs: 10,000 commands through real relays under seeded faults (tests/chaos),
## then the real-CLI run (tests/chaos/cli). Both run; the target fails if either found a violation.
CHAOS_SEED  ?= 1
CHAOS_KILLS ?= 120
.PHONY: chaos chaos-cli
chaos: $(TEST_STAMP)
	$(BIN)/python -m tests.chaos --commands 10000; scripted=$$?; \
	$(BIN)/python -m tests.chaos.cli --kills $(CHAOS_KILLS) --seed $(CHAOS_SEED); cli=$$?; \
	exit $$(( scripted || cli ))

## The real-CLI chaos run alone: kill -9 of the daemon, session hosts and Claude Code at every
## kill point, 120 kills (CHAOS_KILLS=, CHAOS_SEED=, CHAOS_ARGS="--only host-kill" to narrow it).
chaos-cli: $(TEST_STAMP)
	$(BIN)/python -m tests.chaos.cli --kills $(CHAOS_KILLS) --seed $(CHAOS_SEED) $(CHAOS_ARGS)
