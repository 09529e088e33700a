#!/usr/bin/env bash
# ember's cache (the `ember-front` binary: write-through, LRU, AOD) against nbdkit's cache filter,
# both in front of the same kind of emulated hard disk: nbdkit's memory plugin behind its
# delay filter (5 ms per read and per write). fio (nbd engine) reads random 4 KiB blocks of a
# 16 MiB working set once to warm both caches, then again, timed.
# Prints both warm IOPS, then `ratio: X` = ember / nbdkit-cache (above 1: ember is faster).
# Needs nbdkit and fio (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/../../.."
cargo build --release -q -p ember-engine --bin ember-front
dir=$(mktemp -d)
cleanup() {
    exec 3>&- 2>/dev/null || true
    for p in "$dir"/*.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

disk="memory 256M rdelay=5ms wdelay=5ms"
nbdkit -U "$dir/hdd.sock" -P "$dir/hdd.pid" --filter=delay $disk
nbdkit -U "$dir/peer.sock" -P "$dir/peer.pid" --filter=cache --filter=delay $disk \
    cache-on-read=true
mkfifo "$dir/stdin"
target/release/ember-front "$dir/cache.img" 256M "nbd+unix:///?socket=$dir/hdd.sock" \
    "$dir/ember.sock" <"$dir/stdin" 2>"$dir/front.log" &
exec 3>"$dir/stdin"
for _ in $(seq 50); do [ -S "$dir/ember.sock" ] && break; sleep 0.1; done

iops() { # uri, loops
    fio --name=r --ioengine=nbd --uri="$1" --rw=randread --bs=4k --size=16m --iodepth=8 \
        --loops="$2" --output-format=json --output="$dir/fio.json" >/dev/null
    python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"]))' \
        "$dir/fio.json"
}
ember="nbd+unix:///disk?socket=$dir/ember.sock"
peer="nbd+unix:///?socket=$dir/peer.sock"
echo "cold pass (fills the caches): ember $(iops "$ember" 1) IOPS, nbdkit-cache $(iops "$peer" 1) IOPS"
e=$(iops "$ember" 3)
p=$(iops "$peer" 3)
echo "warm: ember $e IOPS, nbdkit-cache $p IOPS"
exec 3>&-
wait %1 2>/dev/null || true
grep -E "read hit ratio" "$dir/front.log" || true
python3 -c "print('ratio: %.2f' % ($e / $p))"
