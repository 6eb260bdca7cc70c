#!/usr/bin/env bash
# `make bench-scale`: site.yml over a simulated fleet of 8 to 256 nodes on this machine, next to
# the floor at each size (bench/scale.py says what it measures and which BENCH_SCALE_* variables
# tune it). Needs the virtual environment only: no root, no podman, no network; nothing on this
# machine is changed (every node reads a copy of a captured host tree; the cluster layer renders
# its plan to a temporary folder and applies nothing).
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cd "$ROOT"
"$ROOT/scripts/setup-venv.sh" >&2
exec "$VENV/bin/python" "$ROOT/bench/scale.py"
