#!/usr/bin/env bash
# Coverage-guided fuzzing of ember's parsers with AFL++ through cargo-afl (docs/design/testing.md).
# Installs cargo-afl and builds its AFL++ runtime idempotently, builds the targets in fuzz/
# (outside the workspace), then runs each target for FUZZ_TIME seconds, one at a time, at
# low priority. Findings land in fuzz/out/<target>/default/{crashes,hangs}; the script fails
# when any target found a crash or a hang.
#
#   FUZZ_TIME=<seconds per target>   (default 60)
#   FUZZ_TARGETS="nbd_server trace"  (default: every target)
#   FUZZ_CMIN=1                      minimize each target's queue into fuzz/cmin/<target>
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_TIME=${FUZZ_TIME:-60}
TARGETS=(${FUZZ_TARGETS:-nbd_handshake nbd_server nbd_client trace layout control config})
AFL_VERSION=0.18.2

if ! cargo afl --version 2>/dev/null | grep -q "cargo-afl $AFL_VERSION"; then
  echo "fuzz: installing cargo-afl $AFL_VERSION"
  cargo install --locked cargo-afl --version "$AFL_VERSION"
fi
# The AFL++ runtime for this rustc, built once (`config --build` refuses to run twice).
afl_help=$(cargo afl fuzz -h 2>&1 || true)
if [[ "$afl_help" != *"-V seconds"* ]]; then
  echo "fuzz: building the AFL++ runtime"
  cargo afl config --build
  afl_help=$(cargo afl fuzz -h 2>&1 || true)
fi

cd fuzz
nice -n 10 cargo afl build --release

export AFL_NO_UI=1 AFL_AUTORESUME=1 AFL_SKIP_CPUFREQ=1 AFL_NO_AFFINITY=1
export AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1
found=0
for t in "${TARGETS[@]}"; do
  echo "fuzz: $t for ${FUZZ_TIME}s"
  mkdir -p out
  # Each target process appends its CPU seconds when its persistent loop of
  # AFL_FUZZER_LOOPCOUNT inputs ends (fuzz/src/lib.rs).
  export EMBER_FUZZ_CPU_LOG="$PWD/out/$t.cpu" AFL_FUZZER_LOOPCOUNT=20000
  nice -n 19 cargo afl fuzz -i "corpus/$t" -o "out/$t" -V "$FUZZ_TIME" -t 10000 \
    -- "target/release/$t" > "out/$t.log" 2>&1 || {
    echo "fuzz: afl-fuzz failed for $t; the end of out/$t.log:"; tail -20 "out/$t.log"; exit 1; }
  touch "out/$t.cpu"
  cpu=$(awk '{s += $1} END {printf "%.0f", s}' "out/$t.cpu")
  stats="out/$t/default/fuzzer_stats"
  execs=$(awk -F': ' '/^execs_done/ {print $2}' "$stats")
  secs=$(awk -F': ' '/^run_time/ {print $2}' "$stats")
  paths=$(awk -F': ' '/^corpus_count/ {print $2}' "$stats")
  crashes=$(find "out/$t/default/crashes" -type f -name 'id:*' | wc -l)
  hangs=$(find "out/$t/default/hangs" -type f -name 'id:*' | wc -l)
  echo "fuzz: $t: ${secs}s of fuzzing in all runs, ${cpu}s CPU in the target processes" \
       "(fuzz/out/$t.cpu), $execs executions, $paths corpus entries, $crashes crashes, $hangs hangs"
  found=$((found + crashes + hangs))
  if [ "${FUZZ_CMIN:-0}" = 1 ]; then
    rm -rf "cmin/$t"
    # afl-cmin.bash (the Python afl-cmin of AFL++ 4.40c records no coverage here).
    afl_bin=$(dirname "$(grep -o '/[^ ]*/afl-fuzz' <<< "$afl_help" | head -1)")
    AFL_PATH=$afl_bin PATH=$afl_bin:$PATH nice -n 19 "$afl_bin/afl-cmin.bash" \
      -i "out/$t/default/queue" -o "cmin/$t" -t 10000 -- "target/release/$t" \
      > "out/$t.cmin.log" 2>&1
    echo "fuzz: $t: minimized queue in fuzz/cmin/$t ($(ls "cmin/$t" | wc -l) files)"
  fi
done
if [ "$found" -gt 0 ]; then
  echo "fuzz: $found crashes or hangs; inputs in fuzz/out/<target>/default/{crashes,hangs}"
  exit 1
fi
echo "fuzz: ok"
