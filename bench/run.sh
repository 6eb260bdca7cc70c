#!/usr/bin/env bash
# `make bench`: the cost of a converge at fleet scale (bench/converge.py says what it measures and
# which BENCH_* variables tune it). Sets up what is missing (the virtual environment, the node
# images), runs the bench with the virtual environment's Python, and removes the bench's lab
# nodes (label gpufleet-bench=1) however it ends. The demo's nodes (gpufleet-lab-*) are not touched.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
need_root "bench/run.sh"
cd "$ROOT"
"$ROOT/scripts/setup-venv.sh" >&2
"$ROOT/scripts/build-images.sh" >&2

cleanup() {
  [ "${BENCH_KEEP:-0}" = 1 ] && return 0
  local nodes
  mapfile -t nodes < <(podman ps -a --filter label=gpufleet-bench=1 --format '{{.Names}}')
  [ ${#nodes[@]} -eq 0 ] || podman rm -f -t 0 "${nodes[@]}" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$VENV/bin/python" "$ROOT/bench/converge.py"
