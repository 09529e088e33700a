# ember: the two commands are `make demo` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: setup build demo test lint unit peer crash-long fuzz clean

## Install what the demo and the tests need (Debian and Python packages, peer data). Idempotent.
setup:
	@bash scripts/setup.sh

build:
	$(CARGO) build --release --bin ember

## Build ember and run its main job end to end on embedded defaults.
demo: setup build
	@bash scripts/demo.sh

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings

## EMBER_REQUIRE_TOOLS=1: setup installed every tool, so a test that finds one missing fails
## instead of skipping.
unit:
	EMBER_REQUIRE_TOOLS=1 $(CARGO) test --workspace --release --no-fail-fast

## ember against libCacheSim (the libcachesim Python package) on the same traces.
peer: build
	python3 -m pytest -q tests/peer

## Every test: formatting, lints, unit and end-to-end tests, and the peer comparisons.
test: setup lint unit peer

## Crash trials at length (thesis chapter 3 guarantees): 1000 SIGKILL trials through nbdsh and
## 1000 power cuts per write policy (about 15 minutes). `make test` runs a short version.
crash-long: setup
	EMBER_REQUIRE_TOOLS=1 EMBER_CRASH_TRIALS=1000 $(CARGO) test --release -p ember-cli \
	    --test writeback_kill -- --nocapture --test-threads=2
	EMBER_POWER_TRIALS=1000 $(CARGO) test --release -p ember-engine \
	    --test writeback_power -- --nocapture --test-threads=2

## Coverage-guided fuzzing (AFL++ via cargo-afl, docs/fuzzing.md): each target for FUZZ_TIME
## seconds. `make test` replays the stored corpora only (crates/*/tests/fuzz_corpus.rs).
FUZZ_TIME ?= 60
fuzz:
	FUZZ_TIME=$(FUZZ_TIME) bash scripts/fuzz.sh

clean:
	$(CARGO) clean
	rm -rf out
