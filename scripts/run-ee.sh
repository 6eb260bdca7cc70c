#!/usr/bin/env bash
# Run site.yml against the lab through the execution environment, as AWX runs a job: with
# ansible-runner (the engine inside AWX) and the image scripts/build-ee.sh made, twice; the
# second run must change nothing (changed=0 on every host).
# The lab's nodes are podman containers on this host: the EE reaches them with the
# containers.podman.podman connection, its podman CLI in remote mode (CONTAINER_HOST) through
# this host's podman socket, /run/podman/podman.sock, started here if it is not listening.
# The lab is brought up and prepared (scripts/lab.sh) when its nodes are not running.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "run-ee.sh"
cd "$ROOT"

EE_VENV=$ROOT/.cache/venvs/ee-builder
version=$(python3 -c 'import re,sys; print(re.search(r"^version:\s*(\S+)", open("galaxy.yml").read(), re.M).group(1))')
EE=${GPUFLEET_EE_IMAGE:-localhost/gpufleet-ee}:$version
# every node of inventory/lab, which site.yml runs against: one not started would be unreachable
NODES=(gpufleet-lab-debian12 gpufleet-lab-debian13 gpufleet-lab-el9)
SOCK=/run/podman/podman.sock
pdd=$ROOT/.build/ee/runner

podman image exists "$EE" || die "$EE is missing: run scripts/build-ee.sh first"
[ -x "$EE_VENV/bin/ansible-runner" ] || die "$EE_VENV has no ansible-runner: run scripts/build-ee.sh first"

lab() {
  local node missing=0
  for node in "${NODES[@]}"; do
    [ "$(podman inspect -f '{{.State.Running}}' "$node" 2>/dev/null)" = true ] || missing=1
  done
  [ $missing = 0 ] && { log "lab nodes running"; return 0; }
  "$ROOT/scripts/lab.sh" up "${NODES[@]}"
  "$ROOT/scripts/lab.sh" prepare inventory/lab
}

service_pid=
socket() {
  if podman --remote --url "unix://$SOCK" info >/dev/null 2>&1; then return 0; fi
  mkdir -p "$(dirname "$SOCK")"
  log "starting podman's API service on $SOCK"
  podman system service --time=0 "unix://$SOCK" >/dev/null 2>&1 &
  service_pid=$!
  for _ in $(seq 50); do
    podman --remote --url "unix://$SOCK" info >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "podman's API service did not answer on $SOCK"
}
stop_service() { [ -z "$service_pid" ] || kill "$service_pid" 2>/dev/null || true; }
trap stop_service EXIT

# ansible-runner's private data dir: the project (playbooks/), the lab's inventory, and the
# EE's environment. The container runs as root (the host's podman socket is root's), on the
# host's network, with the socket mounted.
private_data_dir() {
  rm -rf "$pdd"
  mkdir -p "$pdd/project" "$pdd/env" "$pdd/inventory"
  cp -r playbooks/. "$pdd/project/"
  cp -r inventory/lab/. "$pdd/inventory/"
  cat > "$pdd/env/envvars" <<YAML
---
CONTAINER_HOST: unix://$SOCK
ANSIBLE_FORCE_COLOR: "0"
YAML
}

run() {  # run IDENT [idempotent]
  "$EE_VENV/bin/ansible-runner" run "$pdd" -p site.yml --ident "$1" \
    --process-isolation --process-isolation-executable podman --container-image "$EE" \
    --container-option="--user=0" --container-option="--network=host" \
    --container-option="--volume=$(dirname "$SOCK"):$(dirname "$SOCK")" \
    --container-option="--security-opt=label=disable" | tail -n 12
  recap "$1" "${2:-}"
}

# The play recap of run IDENT, from ansible-runner's events: one line per host; fails when a
# host failed or was unreachable, and (with "idempotent") when one changed.
recap() {  # recap IDENT [idempotent]
  python3 - "$pdd/artifacts/$1" "${2:-}" <<'PY'
import glob, json, sys
art, want = sys.argv[1], sys.argv[2]
stats = None
for path in sorted(glob.glob(art + "/job_events/*.json")):
    with open(path) as handle:
        event = json.load(handle)
    if event.get("event") == "playbook_on_stats":
        stats = event["event_data"]
if stats is None:
    sys.exit("%s: no play recap" % art)
keys = ("ok", "changed", "unreachable", "failures", "skipped", "rescued", "ignored")
hosts = sorted(set().union(*(stats.get(k) or {} for k in keys)))
bad = []
for host in hosts:
    counts = {k: (stats.get(k) or {}).get(host, 0) for k in keys}
    print("%-24s : %s" % (host, "  ".join("%s=%d" % (k, v) for k, v in counts.items())))
    if counts["failures"] or counts["unreachable"] or (want == "idempotent" and counts["changed"]):
        bad.append(host)
status = open(art + "/status").read().strip()
if bad or status != "successful":
    sys.exit("%s: %s (hosts: %s)" % (art, status, ", ".join(bad) or "-"))
PY
}

first() { run first; }
second() { run second idempotent; }

stage "lab" lab
stage "podman socket" socket
stage "runner data" private_data_dir
stage "site.yml (1st)" first
stage "site.yml (2nd, changed=0)" second
print_stage_times
