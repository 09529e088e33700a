#!/usr/bin/env bash
# demo-serve.sh: the real cache in one minute. A slow backing disk (nbdkit's delay filter:
# 5 ms per read) gets a pattern written over a trace's footprint; `ember serve` puts a
# cache file in front of it; `ember replay` replays the trace twice, verifying every read:
# the first pass misses (5 ms each), the second hits. Then a clean stop.
#
# Env: EMBER (the ember binary; default: target/release/ember, else target/debug/ember).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
EMBER=${EMBER:-}
if [[ -z $EMBER ]]; then
  if [[ -x $ROOT/target/release/ember ]]; then EMBER=$ROOT/target/release/ember
  else (cd "$ROOT" && cargo build -q -p ember-cli); EMBER=$ROOT/target/debug/ember; fi
fi
WORK=$(mktemp -d /tmp/ember-demo-serve.XXXXXX)
SERVE_PID=""
NBDKIT_PID=""
cleanup() {
  [[ -n $SERVE_PID ]] && kill "$SERVE_PID" 2>/dev/null || true
  [[ -n $NBDKIT_PID ]] && kill "$NBDKIT_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }

step "a slow backing disk: nbdkit file plugin with --filter=delay rdelay=5ms"
truncate -s 64M "$WORK/backing.img"
nbdkit -P "$WORK/nbdkit.pid" -U "$WORK/nbdkit.sock" --filter=delay file "$WORK/backing.img" rdelay=5ms
for _ in $(seq 100); do [[ -s $WORK/nbdkit.pid ]] && break; sleep 0.05; done
NBDKIT_PID=$(cat "$WORK/nbdkit.pid")
BACKING="nbd+unix:///?socket=$WORK/nbdkit.sock"

step "a trace: 600 reads of 4 KiB over a 2 MiB working set (Zipf-like reuse), 1 volume"
python3 - "$WORK/trace.csv" <<'PY'
import random, sys
random.seed(7)
blocks = list(range(0, 16384))
random.shuffle(blocks)
hot = blocks[:512]
with open(sys.argv[1], "w") as f:
    for i in range(600):
        b = hot[min(int(random.paretovariate(1.2)) - 1, 511)] if i >= 512 else hot[i]
        f.write(f"{i * 1000000},disk,r,{b * 4096},4096\n")
PY

step "write the replay pattern over the trace's footprint, straight to the backing"
"$EMBER" replay "$WORK/trace.csv" --format csv --server "$BACKING" --prefill-only | grep -E "^(prefill|requests)"

step "ember serve: a 32 MiB cache file in front of it"
"$EMBER" serve --cache "$WORK/cache.img" --cache-size 32M --format-if-needed \
  --backing "disk=$BACKING" --listen 127.0.0.1:0 --metrics 127.0.0.1:0 >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
for _ in $(seq 200); do grep -q "ember serve: ready" "$WORK/serve.log" && break; sleep 0.05; done
cat "$WORK/serve.log"
URI=$(grep -o 'nbd://[^ ]*' "$WORK/serve.log" | head -1)
METRICS=$(grep -o 'http://[^ ]*' "$WORK/serve.log" | head -1)

for pass in 1 2; do
  step "replay pass $pass (queue depth 1, every read verified)"
  "$EMBER" replay "$WORK/trace.csv" --format csv --server "$URI" --assume-prefilled \
    --metrics-url "$METRICS" --json >"$WORK/pass$pass.json"
  python3 - "$WORK/pass$pass.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
v, s, read = r["verification"], r["server_metrics"], r["ops"][0]
print(f"  {r['seconds']:.3f} s, {r['iops']:.0f} IOPS, read p50 {read['latency']['p50_us']:.0f} us, "
      f"p99 {read['latency']['p99_us']:.0f} us")
print(f"  verified {v['reads_verified']} of {read['count']} reads, {v['reads_failed']} failed")
print(f"  server hit ratio {100 * s['hit_ratio']:.1f}% ({s['hits']} hits, {s['misses']} misses)")
PY
done
python3 -c "
import json
a, b = (json.load(open('$WORK/pass%d.json' % i))['seconds'] for i in (1, 2))
print(f'\nsecond pass {a / b:.1f}x faster than the first')"

step "ember stats"
"$EMBER" stats --metrics "$METRICS" | head -8

step "stop: SIGTERM (drain, persist the map), then the backing"
kill -TERM "$SERVE_PID"; wait "$SERVE_PID" || true; SERVE_PID=""
tail -2 "$WORK/serve.log"
kill "$NBDKIT_PID"; NBDKIT_PID=""
