#!/usr/bin/env bash
# Speed of `ember trace gen zipf` (alpha 0.9, 1M blocks, 10M requests, written to an ember
# file) against the peer: libCacheSim's Python Zipf generator (numpy; object ids only, no
# file written), measured in the same run. Prints `ratio: peer_seconds / ember_seconds` last
# (above 1: ember is faster). Records the result in bench/results/ (bench/lib/record.py).
set -euo pipefail
cd "$(dirname "$0")/.."
REC=$(python3 bench/lib/record.py start gen-zipf --peer "libCacheSim's Zipf generator" \
  --title "Generating a Zipf(0.9) trace: ember trace gen zipf against libCacheSim's _gen_zipf" \
  --ratio-of "libCacheSim seconds / ember seconds" -- "$0" "$@")
# libcachesim is installed in the project's virtual environment (scripts/setup.sh).
PATH="$PWD/.venv/bin:$PATH"
BLOCKS=${BLOCKS:-1000000}
REQUESTS=${REQUESTS:-10000000}
ALPHA=${ALPHA:-0.9}
cargo build --release --bin ember >/dev/null 2>&1 || cargo build --release --bin ember
out=$(mktemp -d)
trap 'rm -rf "$out" "$REC"' EXIT
ember_s=$(python3 - "$out/z.ember" "$BLOCKS" "$REQUESTS" "$ALPHA" <<'PY'
import subprocess, sys, time
path, n, m, a = sys.argv[1:]
t = time.perf_counter()
subprocess.run(["./target/release/ember", "trace", "gen", "zipf", "--alpha", a, "--blocks", n,
                "--requests", m, "--seed", "1", "-o", path], check=True, stdout=subprocess.DEVNULL)
print(time.perf_counter() - t)
PY
)
peer_s=$(python3 - "$BLOCKS" "$REQUESTS" "$ALPHA" <<'PY'
import sys, time
from libcachesim.synthetic_reader import _gen_zipf
n, m, a = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
t = time.perf_counter()
ids = _gen_zipf(n, a, m, 0)
assert len(ids) == m
print(time.perf_counter() - t)
PY
)
printf 'ember: %.3f s for %s requests (%s bytes)\n' "$ember_s" "$REQUESTS" "$(stat -c %s "$out/z.ember")"
printf 'libcachesim _gen_zipf: %.3f s\n' "$peer_s"
ratio=$(python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$peer_s" "$ember_s")
python3 bench/lib/record.py figure "$REC" "ember trace gen zipf" --unit s --who ember "$ember_s"
python3 bench/lib/record.py figure "$REC" "libCacheSim _gen_zipf" --unit s --who peer "$peer_s"
python3 bench/lib/record.py note "$REC" "$REQUESTS requests over $BLOCKS blocks, alpha $ALPHA, one round"
python3 bench/lib/record.py finish "$REC" "$ratio"
echo "ratio: $ratio"
