#!/usr/bin/env bash
# ember's main job on embedded defaults (grown by each issue).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "demo: not yet assembled"
