#!/usr/bin/env bash
# Build the lab/molecule node images offline from Debian's packages, only those missing:
#   localhost/gpufleet-node:debian12  (bookworm, one-line /etc/apt/sources.list)
#   localhost/gpufleet-node:debian13  (trixie, deb822 /etc/apt/sources.list.d/debian.sources)
# Each holds systemd (PID 1 for scenarios that need services) and tini (PID 1 otherwise),
# python3 and python3-apt for Ansible, openssh-server (the bench's SSH transport; it runs only
# under systemd, as PID 1), and only the `main` component, as Debian installs it.
# FORCE=1 rebuilds them.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "build-images.sh"

mirror=$(host_debian_mirror debian)
security=$(host_debian_mirror debian-security)
INCLUDE=python3,python3-apt,systemd,systemd-sysv,dbus,tini,ca-certificates,procps,kmod,gnupg,iproute2,openssh-server

build() {  # build TAG SUITE FORMAT
  local suite=$2 format=$3 image="$IMAGE_REPO:$1" sources
  if [ "${FORCE:-0}" != 1 ] && podman image exists "$image"; then
    log "image $image present"
    return 0
  fi
  if [ "$format" = deb822 ]; then
    sources=$(printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$mirror" "$suite" "$suite" "$security" "$suite")
    dest=/etc/apt/sources.list.d/debian.sources
  else
    sources=$(printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n' \
      "$mirror" "$suite" "$mirror" "$suite" "$security" "$suite")
    dest=/etc/apt/sources.list
  fi
  log "building $image from Debian $suite"
  local tmp
  tmp=$(mktemp -d)
  printf '%s\n' "$sources" > "$tmp/sources"
  # The hooks are run by mmdebstrap's shell with the new root as $1: single quotes on purpose.
  # The hooks clean apt's lists and cache, not mmdebstrap's cleanup (whose apt-get run would date
  # the lists directory now), and date the emptied lists directory 1970: apt's cache_valid_time
  # reads its mtime when no update ever ran, and an image built less than an hour ago must not
  # pass for a fresh cache.
  # shellcheck disable=SC2016
  mmdebstrap --variant=apt --format=tar --include="$INCLUDE" --skip=cleanup/apt \
    --aptopt='Acquire::Languages "none"' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -f "$1/etc/apt/sources.list" "$1"/etc/apt/sources.list.d/*' \
    --customize-hook="upload $tmp/sources $dest" \
    --customize-hook='echo gpufleet-node > "$1/etc/hostname"' \
    --customize-hook='rm -f "$1/etc/machine-id"; : > "$1/etc/machine-id"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/cache/apt/archives/*.deb' \
    --customize-hook='touch -d @0 "$1/var/lib/apt/lists"' \
    "$suite" - "$mirror $suite main" | \
    podman import \
      --change 'CMD ["/usr/bin/tini", "--", "sleep", "infinity"]' \
      --change 'ENV container=podman' \
      --message "gpufleet.nvidia lab node, Debian $suite" - "$image" >/dev/null
  rm -rf "$tmp"
  podman run --rm "$image" python3 -c 'import apt, platform; print(platform.freedesktop_os_release()["PRETTY_NAME"])'
}

build debian12 bookworm oneline
build debian13 trixie deb822
