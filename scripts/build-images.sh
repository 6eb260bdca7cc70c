#!/usr/bin/env bash
# Build the lab/molecule node images offline from Debian's packages, only those missing:
#   localhost/gpufleet-node:debian12  (bookworm, one-line /etc/apt/sources.list)
#   localhost/gpufleet-node:debian13  (trixie, deb822 /etc/apt/sources.list.d/debian.sources)
#   localhost/gpufleet-node:ubuntu2404 a STAND-IN for an Ubuntu 24.04 node (see build_ubuntu below)
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
  # shellcheck disable=SC2016
  node_root "$suite" "$INCLUDE" \
    --customize-hook='rm -f "$1/etc/apt/sources.list" "$1"/etc/apt/sources.list.d/*' \
    --customize-hook="upload $tmp/sources $dest" |
    import_node "$image" "gpufleet.nvidia lab node, Debian $suite"
  rm -rf "$tmp"
  podman run --rm "$image" python3 -c 'import apt, platform; print(platform.freedesktop_os_release()["PRETTY_NAME"])'
}

# build_ubuntu: an Ubuntu 24.04 node as apt and Ansible see it. No Ubuntu archive is reachable
# here, so the image is a STAND-IN, and says so in /etc/gpufleet-standin, in a comment of
# /etc/os-release and in its commit message:
#   real:       apt 2.6, dpkg and apt-mark (Debian 12's build of the same code; Ubuntu 24.04 ships
#               apt 2.7), the dpkg database (it starts with Debian's packages only);
#   stand-ins:  the userland is Debian 12's (glibc, python3, python3-apt, python3-tomlkit, systemd,
#               containerd and runc); /etc/os-release and /etc/lsb-release are Ubuntu 24.04's
#               (ID=ubuntu, VERSION_CODENAME=noble, ID_LIKE=debian), /etc/debian_version says
#               trixie/sid as Ubuntu's does; no apt source is configured: the scenario adds a
#               local stand-in of Ubuntu's archive (scripts/lab/build-fake-nvidia-repo.sh).
os_release_ubuntu='# gpufleet.nvidia STAND-IN: Ubuntu 24.04 as apt and Ansible read it; the userland is
# Debian 12 with the real apt, dpkg and apt-mark (see /etc/gpufleet-standin).
PRETTY_NAME="Ubuntu 24.04.3 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
VERSION="24.04.3 LTS (Noble Numbat)"
VERSION_CODENAME=noble
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
SUPPORT_URL="https://help.ubuntu.com/"
BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"
PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"
UBUNTU_CODENAME=noble
LOGO=ubuntu-logo'
lsb_release_ubuntu='DISTRIB_ID=Ubuntu
DISTRIB_RELEASE=24.04
DISTRIB_CODENAME=noble
DISTRIB_DESCRIPTION="Ubuntu 24.04.3 LTS"'
standin_ubuntu='This node image is a STAND-IN for an Ubuntu 24.04 (noble) node, built by gpufleet.nvidia
scripts/build-images.sh for its molecule scenarios and lab.
Real: apt, dpkg and apt-mark (Debian 12 build: apt 2.6) and their state under /var/lib.
Stand-in: the userland (Debian 12: glibc, python3, systemd, containerd, runc), /etc/os-release,
/etc/lsb-release and /etc/debian_version (Ubuntu 24.04.3); no apt source is configured: the
scenarios add a local stand-in of Ubuntu'"'"'s archive and of NVIDIA'"'"'s toolkit repository.'

build_ubuntu() {
  local image="$IMAGE_REPO:ubuntu2404" tmp
  if [ "${FORCE:-0}" != 1 ] && podman image exists "$image"; then
    log "image $image present"
    return 0
  fi
  log "building $image (stand-in: Debian 12 userland, real apt, dpkg and apt-mark, Ubuntu 24.04 os-release)"
  tmp=$(mktemp -d)
  printf '%s\n' "$os_release_ubuntu" > "$tmp/os-release"
  printf '%s\n' "$lsb_release_ubuntu" > "$tmp/lsb-release"
  printf '%s\n' "$standin_ubuntu" > "$tmp/standin"
  # shellcheck disable=SC2016
  node_root bookworm "$INCLUDE,python3-tomlkit,containerd" \
    --customize-hook='rm -f "$1/etc/apt/sources.list" "$1"/etc/apt/sources.list.d/* "$1/etc/os-release" "$1/usr/lib/os-release"' \
    --customize-hook="upload $tmp/os-release /usr/lib/os-release" \
    --customize-hook='ln -s ../usr/lib/os-release "$1/etc/os-release"' \
    --customize-hook="upload $tmp/lsb-release /etc/lsb-release" \
    --customize-hook="upload $tmp/standin /etc/gpufleet-standin" \
    --customize-hook='echo trixie/sid > "$1/etc/debian_version"' \
    --customize-hook='chroot "$1" systemctl disable containerd.service' |
    import_node "$image" "gpufleet.nvidia lab node, STAND-IN for Ubuntu 24.04: Debian bookworm userland with real apt, dpkg and apt-mark" \
      --change 'LABEL gpufleet.standin="Ubuntu 24.04 node: Debian 12 userland, real apt, dpkg and apt-mark, Ubuntu 24.04 os-release (/etc/gpufleet-standin)"'
  rm -rf "$tmp"
  podman run --rm "$image" sh -c 'python3 -c "import apt, platform; print(platform.freedesktop_os_release()[\"PRETTY_NAME\"])"; apt-get --version | head -n1'
}

build debian12 bookworm oneline
build debian13 trixie deb822
build_ubuntu
