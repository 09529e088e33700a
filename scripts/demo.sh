#!/usr/bin/env bash
# ember's main job on embedded defaults: generate a synthetic Zipf block trace, simulate several
# replacement policies at several cache sizes, print the table and write JSON, CSV and PNG plots
# under out/demo/. Run by `make demo` after `cargo build --release`.
set -euo pipefail
cd "$(dirname "$0")/.."

EMBER=${EMBER:-target/release/ember}
OUT=out/demo
if [[ ! -x $EMBER ]]; then
    echo "demo: $EMBER not found; run 'make build' (cargo build --release --bin ember) first" >&2
    exit 1
fi
mkdir -p "$OUT"

echo "== 1. a synthetic trace: 2M Zipf(0.9) requests over 200k blocks of 4 KiB, 20% writes, 100 req/s"
"$EMBER" trace gen zipf --alpha 0.9 --blocks 200000 --requests 2000000 --write-ratio 0.2 \
    --rate 100 --seed 42 --output "$OUT/zipf.ember"
"$EMBER" trace info "$OUT/zipf.ember"

echo
echo "== 2. six policies x six cache sizes (% of the working set), hourly timeline"
"$EMBER" sim "$OUT/zipf.ember" \
    --policy lru,fifo,clock,arc,s3fifo,opt \
    --size 1%,2%,5%,10%,20%,40% \
    --interval 1h \
    --out "$OUT"

echo
echo "== 3. SieveStore: a 12-volume ensemble over 4 days (MSR-Cambridge CSV), every sieve compared"
"$EMBER" trace gen ensemble --days 4 --accesses-per-day 500000 --seed 7 -o "$OUT/ensemble.csv"
"$EMBER" sim "$OUT/ensemble.csv" --experiment sievestore --out "$OUT/sievestore" --quiet

echo
echo "demo: wrote"
for f in sim.json sim.csv timeline.csv hit_ratio.png timeline.png; do
    printf '  %s (%s bytes)\n' "$OUT/$f" "$(stat -c %s "$OUT/$f")"
done
for f in "$OUT"/sievestore/*; do
    printf '  %s (%s bytes)\n' "$f" "$(stat -c %s "$f")"
done
if [[ -x scripts/demo-serve.sh ]]; then
    echo
    bash scripts/demo-serve.sh
fi
