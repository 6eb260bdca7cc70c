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

# A lab node's root from Debian SUITE, as a tar on stdout: mmdebstrap (variant apt; no manual pages,
# documentation but the copyrights, or locales) with the caller's options and hooks, then what every
# node gets: its host name, an empty machine-id, apt's lists and caches emptied, not by mmdebstrap's
# cleanup (whose apt-get run would date the lists directory now), and the emptied lists directory
# dated 1970: apt's cache_valid_time reads its mtime when no update ever ran, and an image built less
# than an hour ago must not pass for a fresh cache. The hooks are run by mmdebstrap's shell with the
# new root as $1: single quotes on purpose.
node_root() {  # node_root SUITE INCLUDE [MMDEBSTRAP-OPTION...]
  local suite=$1 include=$2 mirror
  shift 2
  mirror=$(host_debian_mirror debian)
  # shellcheck disable=SC2016
  mmdebstrap --variant=apt --format=tar --include="$include" --skip=cleanup/apt \
    --aptopt='Acquire::Languages "none"' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$@" \
    --customize-hook='echo gpufleet-node > "$1/etc/hostname"' \
    --customize-hook='rm -f "$1/etc/machine-id"; : > "$1/etc/machine-id"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/cache/apt/archives/*.deb' \
    --customize-hook='touch -d @0 "$1/var/lib/apt/lists"' \
    "$suite" - "$mirror $suite main"
}

# A node root on stdin imported as IMAGE, tini as PID 1 keeping it up (a scenario that needs
# systemd runs /sbin/init instead).
import_node() {  # import_node IMAGE MESSAGE [PODMAN-IMPORT-OPTION...]
  local image=$1 message=$2
  shift 2
  podman import --change 'CMD ["/usr/bin/tini", "--", "sleep", "infinity"]' --change 'ENV container=podman' \
    "$@" --message "$message" - "$image" >/dev/null
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
print_stage_times() {  # each stage's time, then the whole run's (the shell's SECONDS)
  log "stage timings"
  printf '  %s\n' "${STAGE_TIMES[@]}" >&2
  printf '  %-22s %5ss  (%d min %02d s)\n' "total" "$SECONDS" $((SECONDS / 60)) $((SECONDS % 60)) >&2
}
