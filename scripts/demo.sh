#!/usr/bin/env bash
# ember's main job on embedded defaults: generate a synthetic Zipf block trace, simulate several
# replacement policies at several cache sizes, print the table and write JSON, CSV and PNG plots
# under out/demo/, and one HTML report per experiment (`ember report`). Run by `make demo` after
# `cargo build --release`.
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
"$EMBER" sievestore "$OUT/ensemble.csv" --experiment --out "$OUT/sievestore" --quiet
sed -n '1,12p' "$OUT/sievestore/sievestore.txt"

echo
echo "== 4. Exclusive caching (Wong & Wilkes): the ZIPF workload of section 3 under every DEMOTE scheme"
"$EMBER" trace gen ww-zipf --seed 3 -o "$OUT/ww-zipf.ember" >/dev/null
"$EMBER" demote "$OUT/ww-zipf.ember" --experiment --out "$OUT/demote" --quiet
grep -E "mean speedup" "$OUT/demote/demote.txt" || true

echo
echo "== 5. Bonfire: a week of hourly reaccesses plus a nightly job; characterize, advise, warm up"
"$EMBER" trace gen bonfire --rate 2 --days 7 --seed 1 -o "$OUT/bonfire.csv" >/dev/null
"$EMBER" analyze "$OUT/bonfire.csv" --out "$OUT/analyze" >/dev/null
"$EMBER" warmup advise "$OUT/bonfire.csv" --analysis "$OUT/analyze/analyze.json"
"$EMBER" warmup run "$OUT/bonfire.csv" --th-n 0.01 --out "$OUT/warmup" | tail -n 8

echo
echo "demo: wrote"
for f in sim.json sim.csv timeline.csv hit_ratio.png timeline.png; do
    printf '  %s (%s bytes)\n' "$OUT/$f" "$(stat -c %s "$OUT/$f")"
done
for f in "$OUT"/sievestore/* "$OUT"/demote/* "$OUT"/analyze/* "$OUT"/warmup/*; do
    printf '  %s (%s bytes)\n' "$f" "$(stat -c %s "$f")"
done
if [[ -f scripts/demo-serve.sh ]]; then
    echo
    echo "== 6. the real cache: ember serve in front of a slow disk, a trace replayed twice"
    bash scripts/demo-serve.sh
fi

echo
echo "== 7. a deployment (docs/guide/deployment.md): two client tiers over a sieved DEMOTE array,"
echo "      predicted from their config files, then started, replayed through and stopped"
DEP=$OUT/deployment
rm -rf "$DEP"
mkdir -p "$DEP"
truncate -s 64M "$DEP/disk.img"
cat > "$DEP/array.toml" <<'TOML'
metrics = "127.0.0.1:0"

[cache]
device = "mem:16M"

[[volume]]
name = "disk"
backing = "disk.img"

[listen]
unix = "array.sock"

[live]
admission = "bloom"

[live.sieve]
bloom-keys = 0
bloom-fpr = 0.0

[tiers]
array-scheme = "demote"
demote-admission = "sieve"
TOML
topology=$DEP/deployment.toml
printf '[[tier]]\nname = "array"\nconfig = "array.toml"\nlatency-ms = 0.2\nbacking-latency-ms = 10.0\n' \
    > "$topology"
for k in 0 1; do
    cat > "$DEP/client$k.toml" <<TOML
metrics = "127.0.0.1:0"

[cache]
device = "mem:16M"

[[volume]]
name = "client${k}_0"
backing = "nbd+unix:///disk?socket=array.sock"

[listen]
unix = "client$k.sock"

[tiers]
demote = true
TOML
    printf '\n[[tier]]\nname = "client%s"\nconfig = "client%s.toml"\nbacking = "array"\n' \
        "$k" "$k" >> "$topology"
    printf '\n[[route]]\ntrace-volume = "client%s_0"\ntier = "client%s"\n' "$k" "$k" >> "$topology"
done
"$EMBER" trace gen multi-client --clients 2 --blocks-per-client 4000 --sharing disjoint \
    --pattern random --timed-per-client 4000 --write-ratio 0.1 --seed 5 -o "$DEP/mc.csv"
"$EMBER" sim "$DEP/mc.csv" --deployment "$topology" --out "$DEP"
trap '"$EMBER" deploy down "$topology" >/dev/null 2>&1 || true' EXIT
"$EMBER" deploy up "$topology"
replays=()
for k in 0 1; do
    grep ",client$k," "$DEP/mc.csv" > "$DEP/client$k.csv"
    "$EMBER" replay "$DEP/client$k.csv" --server "nbd+unix:///?socket=$DEP/client$k.sock" \
        --queue-depth 1 --connections 1 > "$DEP/replay$k.txt" &
    replays+=($!)
done
for pid in "${replays[@]}"; do wait "$pid"; done
"$EMBER" deploy status "$topology"
"$EMBER" deploy status "$topology" --json > "$DEP/deployment-status.json"
"$EMBER" deploy down "$topology"
trap - EXIT

echo
echo "== 8. one HTML report per experiment (configuration, tables, figures, the papers' numbers)"
"$EMBER" report "$OUT" -o "$OUT/sim.html" --title "ember sim: six policies on a Zipf trace"
for exp in sievestore demote analyze warmup deployment; do
    "$EMBER" report "$OUT/$exp" -o "$OUT/$exp.html"
done
echo "demo: reports (open them in a browser):"
for exp in sim sievestore demote analyze warmup deployment; do
    printf '  %s\n' "$OUT/$exp.html"
done
