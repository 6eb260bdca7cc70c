# Shared helpers for the scripts under scripts/ (sourced, not run).
# shellcheck shell=bash

# Read by the scripts that source this file.
# shellcheck disable=SC2034
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC2034
VENV=${GPUFLEET_VENV:-$ROOT/.venv}
# Images the lab and the molecule scenarios run: one per Debian release, with systemd
# installed (PID 1 when a scenario needs services) and tini (PID 1 otherwise).
# shellcheck disable=SC2034
IMAGE_REPO=${GPUFLEET_IMAGE_REPO:-localhost/gpufleet-node}

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

need_root() {
  [ "$(id -u)" -eq 0 ] || die "$1 must run as root (it installs system packages and runs rootful podman)"
}

# The Debian mirror this host's apt already uses: the images are built from it, so the
# repository never names a mirror host itself.
host_debian_mirror() {  # host_debian_mirror [debian|debian-security]
  local want=${1:-debian} uri
  uri=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
        | grep -oE '(https?|file)://[^ ]+' | sed 's:/*$::' | grep -E "/${want}\$" | head -n1)
  [ -n "$uri" ] || die "no '${want}' repository in this host's apt sources; cannot derive a Debian mirror"
  printf '%s\n' "$uri"
}

# Run a stage, print how long it took, stop on its failure.
STAGE_TIMES=()
stage() {  # stage NAME COMMAND...
  local name=$1 start rc
  shift
  log "stage: $name"
  start=$(date +%s)
  "$@"
  rc=$?
  STAGE_TIMES+=("$(printf '%-22s %5ss  %s' "$name" "$(($(date +%s) - start))" "$([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc)")")")
  if [ $rc -ne 0 ]; then
    print_stage_times
    die "stage '$name' failed (exit $rc); the stages after it did not run"
  fi
}
print_stage_times() {
  log "stage timings"
  printf '  %s\n' "${STAGE_TIMES[@]}" >&2
}
