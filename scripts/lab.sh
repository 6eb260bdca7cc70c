#!/usr/bin/env bash
# The local lab: Debian and EL nodes as rootful podman containers running systemd, privileged so
# that containerd runs in them (its state on a tmpfs: overlayfs cannot stack on the container's root).
#   lab.sh up NODE...        start the nodes that are not running; a name ending in debian12,
#                            debian13, el9 or el10 picks that image (the EL ones are STAND-INS:
#                            scripts/build-el-images.sh; LAB_IMAGE overrides: any image with systemd)
#   lab.sh prepare INVENTORY [ANSIBLE-PLAYBOOK ARGS]
#                            containerd and the stand-ins for NVIDIA's repositories (scripts/lab/prepare.yml)
#   lab.sh down NODE...      remove the nodes
#   lab.sh down-all          remove every lab node (label gpufleet-lab=1)
# LAB_RESET=1 makes `up` recreate running nodes from their image.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "lab.sh"

node_image() {
  if [ -n "${LAB_IMAGE:-}" ]; then printf '%s\n' "$LAB_IMAGE"; return; fi
  case "$1" in
    *debian12) printf '%s:debian12\n' "$IMAGE_REPO" ;;
    *debian13) printf '%s:debian13\n' "$IMAGE_REPO" ;;
    *el9) printf '%s:el9\n' "$IMAGE_REPO" ;;
    *el10) printf '%s:el10\n' "$IMAGE_REPO" ;;
    *) die "lab node '$1': its name must end in debian12, debian13, el9 or el10 (or set LAB_IMAGE)" ;;
  esac
}

up() {
  local name image
  for name in "$@"; do
    image=$(node_image "$name")
    if [ "${LAB_RESET:-0}" = 1 ]; then podman rm -f "$name" >/dev/null 2>&1 || true; fi
    # running, and really: podman's record can outlive the container's processes (a machine
    # restored from a snapshot), and then nothing can be run in it
    if [ "$(podman inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" = true ] &&
       podman exec "$name" true >/dev/null 2>&1; then
      continue
    fi
    podman rm -f "$name" >/dev/null 2>&1 || true
    log "starting lab node $name ($image)"
    podman run -d --name "$name" --hostname "$name" --systemd=always --privileged \
      --tmpfs /var/lib/containerd:rw,exec --label gpufleet-lab=1 "$image" /sbin/init >/dev/null
  done
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  up) [ $# -gt 0 ] || die "lab.sh up NODE..."; up "$@" ;;
  prepare)
    [ $# -gt 0 ] || die "lab.sh prepare INVENTORY [ARGS]"
    inventory=$1
    shift
    export PATH="$VENV/bin:$PATH"
    . "$ROOT/scripts/env.sh"
    ansible-playbook -i "$inventory" "$ROOT/scripts/lab/prepare.yml" "$@"
    ;;
  down) [ $# -gt 0 ] || die "lab.sh down NODE..."; podman rm -f "$@" >/dev/null ;;
  down-all)
    mapfile -t nodes < <(podman ps -a --filter label=gpufleet-lab=1 --format '{{.Names}}')
    [ ${#nodes[@]} -eq 0 ] || podman rm -f "${nodes[@]}" >/dev/null
    ;;
  *) die "usage: lab.sh up NODE... | prepare INVENTORY [ARGS] | down NODE... | down-all" ;;
esac
