#!/usr/bin/env bash
# Writes the layout-v1 fixtures (crates/cli/tests/layout_fixtures.rs reads them): a
# write-through cache that cached blocks 0..511 and took a write of blocks 100..199, and a
# write-back-persist cache killed with blocks 100..199 and 300..363 dirty. Each block of the
# 8 MiB backing starts "ember-fixture blkNNNNNN genG" and is filled with (block + G) & 255.
# The backing is the file served by nbdkit on /tmp/ember-layout-v1-KIND/nbdkit.sock and ember
# runs with --trust-nbd-backing: the backing's identity is then that URI, which the test
# recreates (a file's identity is its inode, which no copy keeps).
# Usage: EMBER=target/release/ember crates/cli/tests/data/layout-v1/make.sh DIR
# (run only to make fixtures for a new layout version: these must stay as the old code wrote them).
set -euo pipefail
export PATH=/usr/bin:$PATH
E=${EMBER:-ember}
OUT=$1
mkdir -p "$OUT"; cd "$OUT"; rm -f -- *.img *.zst ctl.sock
pattern() { python3 - "$@" <<'PY'
import sys
first, count, gen = map(int, sys.argv[1:4])
out = sys.stdout.buffer
for i in range(first, first + count):
    head = b"ember-fixture blk%06d gen%d\n" % (i, gen)
    out.write(head + bytes([(i + gen) & 0xff]) * (4096 - len(head)))
PY
}
write_blocks() { # URI FIRST COUNT GEN
  pattern "$2" "$3" "$4" > blocks.tmp
  nbdsh -u "$1" -c "
data = open('blocks.tmp', 'rb').read()
h.pwrite(data, $2 * 4096)
h.flush()"
  rm blocks.tmp
}
read_blocks() { nbdsh -u "$1" -c "h.pread($3 * 4096, $2 * 4096)"; }
serve() { # POLICY
  "$E" serve --cache "$CACHE" --backing vol="$NBD" --trust-nbd-backing --listen 127.0.0.1:0 \
    --write-policy "$1" --min-dirty 100% --max-dirty 100% --control "$PWD/ctl.sock" > serve.out &
  PID=$!
  for _ in $(seq 100); do grep -q '^export' serve.out 2>/dev/null && break; sleep 0.1; done
  URI=$(grep -o 'nbd://[^ ]*' serve.out | head -1)
}
for kind in write-through write-back-persist; do
  CACHE=$kind.cache.img BACKING=$kind.backing.img
  pattern 0 2048 1 > "$BACKING"
  SOCKDIR=/tmp/ember-layout-v1-$kind
  rm -rf "$SOCKDIR"; mkdir -p "$SOCKDIR"
  nbdkit -P "$SOCKDIR/nbdkit.pid" -U "$SOCKDIR/nbdkit.sock" file "$PWD/$BACKING"
  NBD="nbd+unix:///?socket=$SOCKDIR/nbdkit.sock"
  "$E" cache format --cache "$CACHE" --size 4M --journal 1M --volume vol="$NBD" > /dev/null
  serve "$kind"
  read_blocks "$URI" 0 512
  write_blocks "$URI" 100 100 2
  if [ "$kind" = write-back-persist ]; then
    write_blocks "$URI" 300 64 3
    kill -KILL "$PID"; wait "$PID" || true
  else
    kill -TERM "$PID"; wait "$PID"
  fi
  "$E" cache inspect --cache "$CACHE" --json > "$kind.inspect.json"
  kill "$(cat "$SOCKDIR/nbdkit.pid")"; rm -rf "$SOCKDIR"
done
rm -f serve.out ctl.sock
zstd -q -19 --rm -- *.img
