#!/usr/bin/env bash
# bench/demote-live: see run.py (Table 2 live beside the paper, and the latency ratio).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[[ -x ${EMBER:-$ROOT/target/release/ember} ]] || (cd "$ROOT" && cargo build --release -q -p ember-cli)
exec python3 "$(dirname "$0")/run.py" "$@"
