#!/usr/bin/env bash
# bench/deployment: see run.py (two client tiers over one array, four configurations, live and
# simulated from the same config files; the inclusive configuration's latency over the best).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[[ -x ${EMBER:-$ROOT/target/release/ember} ]] || (cd "$ROOT" && cargo build --release -q -p ember-cli)
exec python3 "$(dirname "$0")/run.py" "$@"
