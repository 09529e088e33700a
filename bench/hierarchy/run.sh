#!/usr/bin/env bash
# Cost of the adaptive array cache (Wong & Wilkes 2002: two ghost caches and insertion into one
# of N_segs = 10 exponential segments) against the policy crate's plain LRU, timing the array
# side alone: 8 clients' LRU caches turn 10 million READS (Zipf alpha 1, half of each working
# set shared) into one stream of array READs and DEMOTEs, computed once before any timing; then
# DEMOTE-ADAPT-EXP's array and `ember_policy::Lru` (as DEMOTE-LRU) replay that same stream,
# alternately first, RUNS times. ember against ember (two of its own structures), not against a
# peer. Prints each run, the medians and spreads, and last `ratio: X` = median of adaptive time
# / LRU time over the runs. The program is bench/hierarchy/array_side.rs.
#
# Env: CLIENTS (8), REQUESTS (10000000), RUNS (5). Records the result in bench/results/
# (bench/lib/record.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
record() { python3 bench/lib/record.py "$@"; }
REC=$(record start hierarchy --peer "ember's plain LRU (as DEMOTE-LRU)" --target "<= 3" \
  --title "The adaptive array cache (DEMOTE-ADAPT-EXP) against plain LRU, array side alone" \
  --ratio-of "adaptive time / LRU time, median over the runs" -- "$0" "$@")
log=$(mktemp)
trap 'rm -f "$log" "$REC"' EXIT
cargo build --release -q -p ember-sim --example hierarchy_array_side
./target/release/examples/hierarchy_array_side "${CLIENTS:-8}" "${REQUESTS:-10000000}" "${RUNS:-5}" \
  | tee "$log"
record grep "$REC" "DEMOTE-ADAPT-EXP array" "$log" 'DEMOTE-ADAPT-EXP array ([0-9.]+) s,' --unit s --who ember
record grep "$REC" "LRU array" "$log" 'LRU array ([0-9.]+) s,' --unit s --who peer
record grep "$REC" "adaptive / LRU" "$log" '^run [0-9]+:.*ratio ([0-9.]+)$' --who ratio
record finish "$REC" "$(sed -n 's/^ratio: //p' "$log" | tail -n 1)"
