# ember: the two commands are `make demo` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: setup build demo test lint unit peer python doctest packaging figures crash-long fuzz soak clean \
        install install-files uninstall cli-reference report reproduce test-times

# The project's virtual environment (created by scripts/setup.sh): every Python step uses it.
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python

## Install what the demo and the tests need (Debian packages; .venv with the Python packages
## and the emberlab wheel; peer data). Idempotent.
setup:
	@bash scripts/setup.sh

build:
	$(CARGO) build --release --bin ember

## Build ember and run its main job end to end on embedded defaults.
demo: setup build
	@PATH="$(VENV)/bin:$$PATH" bash scripts/demo.sh

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings
	python3 scripts/check_layout.py

## The Rust tests through cargo-nextest (.config/nextest.toml: two tests at a time across every
## test binary, a test killed by name after 10 minutes), then the doc tests, which nextest does
## not run. EMBER_REQUIRE_TOOLS=1: setup installed every tool, so a test that finds one missing
## fails instead of skipping. scripts/hang_guard.sh stops a run that hangs after 25 minutes (the
## tests take about 10 on 2 cores, after the build) and prints every process's stacks, so CI
## fails with the hang in its log.
unit:
	EMBER_REQUIRE_TOOLS=1 bash scripts/hang_guard.sh 1500 \
	    $(CARGO) nextest run --workspace --release --no-fail-fast
	EMBER_REQUIRE_TOOLS=1 bash scripts/hang_guard.sh 600 \
	    $(CARGO) test --workspace --release --doc

## ember against libCacheSim (the libcachesim Python package) on the same traces. Guarded
## like unit: it takes about 30 s.
peer: build
	bash scripts/hang_guard.sh 300 $(PY) -m pytest -q tests/peer

## The emberlab Python package (installed by setup) against the CLI, its notebook, and
## sweeps on a real two-node Ray cluster. Guarded like unit: it takes about 40 s.
python: build
	bash scripts/hang_guard.sh 600 $(PY) -m pytest -q crates/py/tests

## The docs cannot rot: every sh and python block of README.md and docs/guide/*.md runs, in
## order, one scratch directory per file (scripts/doc_blocks.py; about a minute). The flags,
## paths and links the docs name are checked by crates/cli/tests/docs_agree.rs in `unit`.
doctest: build
	bash scripts/hang_guard.sh 600 python3 scripts/doc_blocks.py

## The systemd unit (packaging/ember@.service) as systemd reads it: `systemd-analyze verify` on an
## instance whose ExecStart is the binary just built (systemd need not be PID 1).
packaging: build
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	sed 's|/usr/local/bin/ember|$(CURDIR)/target/release/ember|' packaging/ember@.service \
	    > "$$tmp/ember@verify.service" && \
	systemd-analyze verify --man=no "$$tmp/ember@verify.service"

## Every test: formatting, lints, unit and end-to-end tests, the peer comparisons, the
## Python package (with its Ray cluster), the docs' commands and the systemd unit.
test: setup lint unit peer python doctest packaging

## The architecture pictures of docs/design, rendered from their Graphviz sources.
figures:
	for f in docs/design/*.dot; do dot -Tsvg "$$f" -o "$${f%.dot}.svg"; done

## Crash trials at length (thesis chapter 3 guarantees): 1000 SIGKILL trials through nbdsh,
## 200 SIGKILL trials per control command (ctl flush, set write-policy over every pair of
## policies, reload), 1000 power cuts per write policy, and 200 power cuts per change made
## while serving (flush on demand, write-policy switch, settings change), and 200 cache-device
## failures (degraded mode). `make test` runs a short version.
crash-long: setup
	EMBER_REQUIRE_TOOLS=1 EMBER_CRASH_TRIALS=1000 $(CARGO) test --release -p ember-cli \
	    --test writeback_kill -- --nocapture --test-threads=2
	EMBER_REQUIRE_TOOLS=1 EMBER_CTL_TRIALS=200 $(CARGO) test --release -p ember-cli \
	    --test ctl_kill -- --nocapture --test-threads=2
	EMBER_REQUIRE_TOOLS=1 EMBER_CTL_TRIALS=200 $(CARGO) test --release -p ember-cli \
	    --test ctl_volume_kill -- --nocapture --test-threads=2
	EMBER_VOLUME_POLICY_TRIALS=200 $(CARGO) test --release -p ember-cli \
	    --test serve_writeback_kill -- --nocapture --exact \
	    a_write_through_volume_under_write_back_persist_survives_sigkill
	EMBER_REQUIRE_TOOLS=1 EMBER_UPGRADE_TRIALS=200 $(CARGO) test --release -p ember-cli \
	    --test layout_fixtures -- --nocapture --test-threads=2
	EMBER_POWER_TRIALS=1000 $(CARGO) test --release -p ember-engine \
	    --test writeback_power -- --nocapture --test-threads=2
	EMBER_POWER_TRIALS=200 $(CARGO) test --release -p ember-engine \
	    --test live_power -- --nocapture --test-threads=2
	EMBER_REQUIRE_TOOLS=1 EMBER_DEGRADED_TRIALS=200 $(CARGO) test --release -p ember-cli \
	    --test serve_cache_failure -- --nocapture --include-ignored

## Coverage-guided fuzzing (AFL++ via cargo-afl, docs/design/testing.md): each target for FUZZ_TIME
## seconds. `make test` replays the stored corpora only (crates/*/tests/fuzz_corpus.rs).
FUZZ_TIME ?= 60
fuzz:
	FUZZ_TIME=$(FUZZ_TIME) bash scripts/fuzz.sh

## The soak (docs/design/testing.md): `ember serve` (write-back-persist and write-through)
## over a failing, delaying nbdkit backing and a plain file, 8 verifying clients with abrupt
## disconnects, a SIGKILL + restart of each server every RESTART_EVERY seconds, and one failure of
## the write-through server's cache device (degraded mode, then back to caching at a restart on
## the healed device). Fails on any lost
## or wrong byte, unexpected error, or RSS/fd growth. Then DEGRADED_TRIALS cache-device failures
## (scripts/degraded_trials.py: the cache file's file system fails or hangs under a verifying
## client, every write policy). `make test` runs a one-minute version
## (crates/cli/tests/soak.rs). Example: make soak DURATION=1800
DURATION ?= 1800
RESTART_EVERY ?= 120-180
DEGRADED_TRIALS ?= 50
soak: setup build
	scripts/soak.py --ember target/release/ember --duration $(DURATION) \
	    --restart-every $(RESTART_EVERY) $(SOAK_ARGS)
	scripts/degraded_trials.py --ember target/release/ember --trials $(DEGRADED_TRIALS)

## Install the binary, one man page per command (ember(1), ember-serve(1), ...) and the bash,
## zsh and fish completions under PREFIX (DESTDIR stages them elsewhere, as packagers do).
## `make install-files` installs an already built EMBER_BIN without building.
PREFIX ?= /usr/local
DESTDIR ?=
EMBER_BIN ?= target/release/ember
BINDIR = $(DESTDIR)$(PREFIX)/bin
MANDIR = $(DESTDIR)$(PREFIX)/share/man/man1
BASHDIR = $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSHDIR = $(DESTDIR)$(PREFIX)/share/zsh/site-functions
FISHDIR = $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
install: build
	@$(MAKE) --no-print-directory install-files
install-files:
	install -d "$(BINDIR)" "$(MANDIR)" "$(BASHDIR)" "$(ZSHDIR)" "$(FISHDIR)"
	install -m 755 "$(EMBER_BIN)" "$(BINDIR)/ember"
	"$(BINDIR)/ember" generate man "$(MANDIR)"
	"$(BINDIR)/ember" generate completions bash >"$(BASHDIR)/ember"
	"$(BINDIR)/ember" generate completions zsh >"$(ZSHDIR)/_ember"
	"$(BINDIR)/ember" generate completions fish >"$(FISHDIR)/ember.fish"
	@echo "installed ember, its man pages and completions under $(DESTDIR)$(PREFIX)"
uninstall:
	rm -f "$(BINDIR)/ember" "$(MANDIR)"/ember.1 "$(MANDIR)"/ember-*.1 "$(BASHDIR)/ember" \
	    "$(ZSHDIR)/_ember" "$(FISHDIR)/ember.fish"

## docs/benchmarks.md (the latest result of each bench in bench/results/, which every bench
## records) and docs/reproductions.md (the papers' tables beside ember's numbers, from
## bench/results/reproduce/ and the live benches' results).
report:
	python3 bench/lib/report.py

## The papers' experiments at a small scale (about two minutes), recorded in
## bench/results/reproduce/ for `make report`.
reproduce: build
	python3 bench/reproduce

## The slowest tests: the Rust tests (cargo nextest, which times each test in its own
## process; the whole list in target/test-times.txt) and the Python suites' 20 slowest (pytest
## --durations). As long as `make unit peer python`; fails if a test failed. NEXTEST_ARGS and
## PYTEST_SUITES narrow it (e.g. NEXTEST_ARGS="-p ember-cli" PYTEST_SUITES=tests/peer).
TEST_TIMES ?= 30
NEXTEST_ARGS ?= --workspace
PYTEST_SUITES ?= tests/peer crates/py/tests
test-times: build
	@set -o pipefail; rc=0; EMBER_REQUIRE_TOOLS=1 $(CARGO) nextest run --release $(NEXTEST_ARGS) --no-fail-fast \
	    --status-level pass --final-status-level none >target/nextest.log 2>&1 || rc=$$?; \
	sed -nE 's/^ *(PASS|FAIL|SLOW|TIMEOUT|LEAK|SIGKILL|SIGSEGV|ABORT)[^[]*\[ *([0-9.]+)s\] (\([0-9]+\/[0-9]+\) )?(.*)$$/\2 \1 \4/p' \
	    target/nextest.log | sort -rn -k1,1 >target/test-times.txt; \
	echo "== the $(TEST_TIMES) slowest of $$(wc -l <target/test-times.txt) Rust tests (seconds; all in target/test-times.txt)"; \
	head -n $(TEST_TIMES) target/test-times.txt; \
	grep -E '^ +Summary' target/nextest.log || tail -n 20 target/nextest.log; \
	echo "== the Python suites' slowest tests"; \
	$(PY) -m pytest -q --durations=20 $(PYTEST_SUITES) 2>&1 \
	    | sed -n '/slowest/,/^=/p' || rc=$$?; \
	exit $$rc

## Regenerate docs/reference/cli.md from the command's definition (a test checks it is current).
cli-reference: build
	$(EMBER_BIN) generate markdown docs/reference/cli.md

clean:
	$(CARGO) clean
	rm -rf out
