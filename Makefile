# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
BASE_STAMP := $(VENV)/.installed-base-stamp
# Two pytest-xdist workers: half the suite's time is spent waiting on processes, the other half is the simulator's
# CPU, so two workers on two cores take 18 minutes where one takes 30 (`make test PYTEST_ARGS=` runs it in one).
PYTEST_ARGS ?= -n 2

.PHONY: install bytecode demo lint test test-json-fallback test-deps sim soak soak-short bench bench-queue bench-round bench-deps \
	bench-requests bench-submit clean

install: $(STAMP)

# What the tools need (make demo), then what the tests need on top (make test: pytest, SeaweedFS, ...).
$(BASE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[ui]'
	touch $@

$(STAMP): $(BASE_STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

# Every job starts a CLI and a supervisor: give them compiled modules even where the environment
# sets PYTHONDONTWRITEBYTECODE (Python still reads .pyc files it is told not to write).
bytecode: $(BASE_STAMP)
	$(BIN)/python -m compileall -q src > /dev/null

# Extra set-up the test suite needs (object-store servers, ...): mk/*.mk add to this rule.
test-deps:: $(STAMP)

# The linter and the type checker, at zero findings; first in `make test`, so a finding fails fast. Their rule
# set and scope are in pyproject.toml ([tool.ruff], [tool.mypy]: add a package to `files` to type-check it).
lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

test: $(STAMP) lint bytecode test-deps
	$(BIN)/python -m pytest $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-json-fallback
	$(MAKE) --no-print-directory soak-short

# runkit.core.jsonfast leans on CPython's private _json and falls back to the json package when it cannot: run the
# JSON tests, jobman's unit tier and the handoff (ack, events, spec) once more with the fallback forced (~15 s).
test-json-fallback: $(STAMP) bytecode
	RUNKIT_JSON_FALLBACK=1 $(BIN)/python -m pytest -q tests/runkit/test_jsonfast.py tests/jobman/unit tests/jobman/test_handoff.py

# stado's deterministic simulator (tests/sim/README.md). `make sim` explores RUNS seeds (default 10000) on every
# core; `make sim SEED=N` replays one seed and prints its failure shrunk; `make sim SCENARIO=race1` (race2,
# race3) replays a race of issue 8 and explores its world. `make test` runs the same exploration (tests/sim).
RUNS ?= 10000
sim: $(STAMP)
	$(BIN)/python -m tests.sim $(if $(SEED),--seed $(SEED)) $(if $(SCENARIO),--scenario $(SCENARIO)) \
		$(if $(SEED)$(SCENARIO),,--runs $(RUNS))

# The chaos soak of both tools (bench/soak.py, docs/testing.md, "The simulator and the soak"): jobman, stado on the local directory
# and stado on SeaweedFS, 2,000 jobs each, under random faults; it stops by itself within SECONDS (default 600) and
# prints its table. `make soak-short` runs a one-minute one (tests/soak). SOAK_ARGS: more options (--help), e.g.
# SOAK_ARGS='--phases stado-s3 --stado-jobs 1000 --faults 20' (the fault proxy's regime: 5, 20, burst).
SECONDS ?= 600
# The one-minute version, with its invariants asserted (tests/soak/test_soak.py). `make test` runs it last, on its
# own (never beside other tests under -n: its bounds are timings on a machine it has to itself).
soak-short: $(STAMP) bytecode test-deps
	$(BIN)/python -m pytest -m soak tests/soak/test_soak.py

soak: $(STAMP) bytecode test-deps
	$(BIN)/python bench/soak.py --seconds $(SECONDS) $(SOAK_ARGS)

demo: $(BASE_STAMP) bytecode
	PATH="$(CURDIR)/$(BIN):$$PATH" sh demo/demo.sh

# The peers the benchmarks compare against, from Debian's packages.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
bench-deps:
	command -v tsp > /dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq task-spooler; }
	command -v nq > /dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq nq; }

bench: $(STAMP) bytecode bench-deps
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python bench/run.py $(BENCH_ARGS)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python bench/stado_bench.py

# A queue held and drained at 100, 2,000 and 10,000 jobs, beside task-spooler and nq (about 45 minutes; it stops
# submitting, with one line, while the machine has under 2 GiB available).
bench-queue: $(STAMP) bytecode bench-deps
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python bench/queue_bench.py $(BENCH_ARGS)

# One lease round's CPU time at 2,000, 10,000 and 50,000 waiting jobs, on a database built for it (bench/round_bench.py).
bench-round: $(STAMP) bytecode
	$(BIN)/python bench/round_bench.py $(BENCH_ARGS)

# What a stado job costs in object-store requests, counted on the wire of a SeaweedFS the bench starts (every
# scenario of docs/performance-requests.md; about 2 minutes), and where `stado submit` spends its
# time, beside a bare `python -c pass` (about a minute). BENCH_ARGS: their options (--help).
bench-requests: $(STAMP) bytecode stado-servers-check
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python bench/stado_requests.py $(BENCH_ARGS)

bench-submit: $(STAMP) bytecode stado-servers-check
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python bench/stado_submit_time.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .cache .pytest_cache

-include mk/*.mk
