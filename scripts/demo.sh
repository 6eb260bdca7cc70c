#!/usr/bin/env bash
# The collection's main job on its built-in default (`make demo`): bring up the local lab — a
# Debian 12 and a Debian 13 node as containers with systemd — and run site.yml against it.
# LAB_RESET=1 recreates the lab nodes from their images first.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "demo.sh"
cd "$ROOT"
"$ROOT/scripts/setup-host.sh"
"$ROOT/scripts/setup-venv.sh"
"$ROOT/scripts/build-images.sh"
export PATH="$VENV/bin:$PATH"
. "$ROOT/scripts/env.sh"

for node in debian12 debian13; do
  name=gpufleet-lab-$node
  if [ "${LAB_RESET:-0}" = 1 ]; then podman rm -f "$name" >/dev/null 2>&1 || true; fi
  if [ "$(podman inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" != true ]; then
    podman rm -f "$name" >/dev/null 2>&1 || true
    log "starting lab node $name"
    podman run -d --name "$name" --hostname "$name" --systemd=always \
      --label gpufleet-lab=1 "$IMAGE_REPO:$node" /sbin/init >/dev/null
  fi
done

log "running site.yml against the lab (inventory/lab)"
ansible-playbook -i inventory/lab playbooks/site.yml "$@"
cat <<'TXT'

What this lab is, and what it lacks:
  - two Debian containers (12 and 13) that share this machine's kernel;
  - no NVIDIA GPU: discovery reports none, so the GPU layers leave both nodes alone;
  - no NVIDIA package repository and no Kubernetes cluster.
TXT
