#!/usr/bin/env bash
# bench/lib/hit_instructions.sh BIN MODE DEPTH [N]: the user-space instructions (and, with
# CACHESIM=yes, simulated cache misses) the server spends per 4 KiB random-read hit, counted
# by valgrind's callgrind, so two builds can be compared on a noisy machine where wall time
# cannot tell a few percent apart (and where no hardware counters are available).
#
# BIN is an ember binary, MODE buffered or direct (`ember serve --direct`), DEPTH fio's
# iodepth, N the measured requests (5000). The server runs under callgrind with a 128 MiB
# file cache over a 64 MiB backing file; an 8 MiB working set is prefilled and read once,
# a random-read pass reads every block of it once more (fio's random map: no block twice, so
# the pass continues no stream and a sequential cutoff, which may have kept the sequential
# prefill out of the cache, lets it in: every measured read is a hit), then the counters are
# zeroed, fio sends N random reads (a fixed seed: the same requests for every build) and the
# counters are dumped: the figures cover exactly those N requests, every server thread
# summed. Prints one line of
# `EVENT/req=VALUE`; with TOP=K, also the K functions that spent the most instructions.
# SERVE_ARGS (words) are added to `ember serve`'s arguments, to compare settings of one build.
# Slow (the server runs some 50 times slower): a tool for comparing builds, not a benchmark.
set -euo pipefail
BIN=$1 MODE=$2 DEPTH=$3 N=${4:-5000}
for tool in valgrind callgrind_control callgrind_annotate fio python3; do
  command -v "$tool" >/dev/null || { echo "hit_instructions: $tool is required" >&2; exit 1; }
done
W=$(mktemp -d /tmp/ember-hit-instructions.XXXXXX)
VP=""
cleanup() {
  if [[ -n $VP ]]; then kill "$VP" 2>/dev/null || true; wait "$VP" 2>/dev/null || true; fi
  rm -rf "$W"
}
trap cleanup EXIT
truncate -s 64M "$W/backing.img"
flags=()
case $MODE in
  buffered) ;;
  direct) flags=(--direct) ;;
  *) echo "hit_instructions: MODE is buffered or direct" >&2; exit 2 ;;
esac
valgrind --tool=callgrind --cache-sim="${CACHESIM:-no}" --callgrind-out-file="$W/cg.out" \
  "$BIN" serve --cache "$W/cache.img" --cache-size 128M --format-if-needed \
  --backing "disk=$W/backing.img" --unix "$W/s.sock" "${flags[@]}" ${SERVE_ARGS:-} >"$W/log" 2>&1 &
VP=$!
for _ in $(seq 600); do grep -q "ember serve: ready" "$W/log" && break; sleep 0.1; done
grep -q "ember serve: ready" "$W/log" || { cat "$W/log" >&2; exit 1; }
URI="nbd+unix:///disk?socket=$W/s.sock"
io() { fio --name=h --ioengine=nbd --uri="$URI" --bs=4k --size=8M "$@" >/dev/null 2>&1; }
io --rw=write --iodepth=32
io --rw=read --iodepth=32
io --rw=randread --iodepth="$DEPTH" --randrepeat=1
callgrind_control -z "$VP" >/dev/null 2>&1
io --rw=randread --iodepth="$DEPTH" --io_size=$((N * 4))k --randrepeat=1 --randseed=7
callgrind_control -d "$VP" >/dev/null 2>&1
# The dump of the measured requests is the output file with a part number.
for _ in $(seq 100); do ls "$W"/cg.out.* >/dev/null 2>&1 && break; sleep 0.1; done
DUMP=$(ls "$W"/cg.out.* | head -1)
python3 - "$DUMP" "$N" <<'PY'
import sys
path, n = sys.argv[1], int(sys.argv[2])
events, totals = None, None
for line in open(path, errors="replace"):
    if line.startswith("events:"):
        events = line.split()[1:]
    elif line.startswith(("summary:", "totals:")):
        totals = [int(x) for x in line.split()[1:]]
if not events or not totals:
    sys.exit("hit_instructions: no totals in the dump")
print(" ".join("%s/req=%.0f" % (e, v / n) for e, v in zip(events, totals)))
PY
if [[ -n ${TOP:-} ]]; then
  callgrind_annotate --threshold=100 --auto=no "$DUMP" 2>/dev/null |
    awk '/file:function/ {p = 1; next} p && NF' | head -n "$((TOP + 2))" | tail -n "$TOP"
fi
