#!/usr/bin/env bash
# Build the EL-family node images offline, only those missing:
#   localhost/gpufleet-node:el9    an EL 9 node as far as the package manager sees it
#   localhost/gpufleet-node:el10   the same image as an EL 10 node (derived from el9: os-release,
#                                  redhat-release and releasever of Rocky Linux 10; RHEL 10 ships
#                                  dnf 4 too, its modularity deprecated and no modular content:
#                                  Red Hat's "Considerations in adopting RHEL 10", Software management)
# No RHEL, Rocky or AlmaLinux archive is reachable here, so the image is a STAND-IN, and says so
# in /etc/gpufleet-standin, in a comment of /etc/os-release and in its commit message:
#   real:       dnf 4 (4.14, Debian's build of the same code) with dnf-plugins-core's versionlock,
#               rpm 4.18 with its database in /var/lib/rpm (where EL keeps it; Debian's rpm keeps
#               it in ~/.rpmdb), EL 9's dnf.conf (best=True, skip_if_unavailable=False),
#               createrepo_c-made repositories and module metadata (the scenario's);
#   stand-ins:  the userland under rpm is Debian 12's (glibc, systemd, python3, containerd and
#               runc from Debian, not from RPMs: the rpm database starts empty); /etc/os-release
#               is Rocky Linux 9's (ID, VERSION_ID, ID_LIKE, PLATFORM_ID="platform:el9", which
#               turns dnf's modularity on) and /etc/redhat-release its release line;
#               /etc/dnf/vars/releasever says 9 (there is no rocky-release package to say it);
#               Debian's dnf-plugins-core brings every plugin at once: versionlock is there
#               before python3-dnf-plugin-versionlock's (stand-in) rpm is installed, and local and
#               post-transaction-actions, which EL 9 ships apart and does not install, are off.
# The repositories a node uses are the scenario's business (scripts/lab/build-fake-el-repos.sh).
# FORCE=1 rebuilds it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "build-el-images.sh"

INCLUDE=python3,systemd,systemd-sysv,dbus,tini,ca-certificates,procps,kmod,gnupg,iproute2,dnf,dnf-plugins-core,rpm,python3-tomlkit,containerd

os_release_el9='# gpufleet.nvidia STAND-IN: Rocky Linux 9 as dnf and Ansible read it; the userland is
# Debian 12 with the real dnf 4 and rpm (see /etc/gpufleet-standin).
NAME="Rocky Linux"
VERSION="9.6 (Blue Onyx)"
ID="rocky"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.6"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Rocky Linux 9.6 (Blue Onyx)"
ANSI_COLOR="0;32"
LOGO="fedora-logo-icon"
CPE_NAME="cpe:/o:rocky:rocky:9::baseos"
HOME_URL="https://rockylinux.org/"
ROCKY_SUPPORT_PRODUCT="Rocky-Linux-9"
ROCKY_SUPPORT_PRODUCT_VERSION="9.6"
REDHAT_SUPPORT_PRODUCT="Rocky Linux"
REDHAT_SUPPORT_PRODUCT_VERSION="9.6"'
# EL 9's /etc/dnf/dnf.conf as dnf ships it there (Debian's sets best=False, skip_if_unavailable=True).
dnf_conf_el9='[main]
gpgcheck=1
installonly_limit=3
clean_requirements_on_remove=True
best=True
skip_if_unavailable=False'
standin_note='This node image is a STAND-IN for an EL 9 (Rocky Linux 9) node, built by gpufleet.nvidia
scripts/build-el-images.sh for its molecule scenarios and lab.
Real: dnf 4 with the versionlock plugin, rpm and its database (/var/lib/rpm), EL 9 dnf.conf.
Stand-in: the userland (Debian 12: glibc, python3, systemd, containerd, runc), /etc/os-release
and /etc/redhat-release (Rocky Linux 9.6), /etc/dnf/vars/releasever; no distribution repository
is configured: the scenarios add local stand-ins for NVIDIA'"'"'s and the distribution'"'"'s.'

build() {  # build TAG
  local image="$IMAGE_REPO:$1" tmp
  if [ "${FORCE:-0}" != 1 ] && podman image exists "$image"; then
    log "image $image present"
    return 0
  fi
  log "building $image (stand-in: Debian 12 userland, real dnf 4 and rpm)"
  tmp=$(mktemp -d)
  printf '%s\n' "$os_release_el9" > "$tmp/os-release"
  printf '%s\n' "$dnf_conf_el9" > "$tmp/dnf.conf"
  printf '%s\n' "$standin_note" > "$tmp/standin"
  # shellcheck disable=SC2016
  node_root bookworm "$INCLUDE" \
    --customize-hook='rm -f "$1/etc/apt/sources.list" "$1"/etc/apt/sources.list.d/* "$1/etc/os-release" "$1/usr/lib/os-release" "$1/etc/debian_version"' \
    --customize-hook="upload $tmp/os-release /usr/lib/os-release" \
    --customize-hook='ln -s ../usr/lib/os-release "$1/etc/os-release"' \
    --customize-hook='echo "Rocky Linux release 9.6 (Blue Onyx)" > "$1/etc/redhat-release"; ln -s redhat-release "$1/etc/system-release"; ln -s redhat-release "$1/etc/rocky-release"' \
    --customize-hook="upload $tmp/dnf.conf /etc/dnf/dnf.conf" \
    --customize-hook="upload $tmp/standin /etc/gpufleet-standin" \
    --customize-hook='mkdir -p "$1/etc/yum.repos.d" "$1/etc/dnf/vars" "$1/etc/rpm" "$1/var/lib/rpm"; echo 9 > "$1/etc/dnf/vars/releasever"' \
    --customize-hook='printf "%%_dbpath /var/lib/rpm\n" > "$1/etc/rpm/macros.dbpath"' \
    --customize-hook='chroot "$1" rpm --initdb' \
    --customize-hook='sed -i "s/^enabled *=.*/enabled = 0/" "$1/etc/dnf/plugins/local.conf" "$1/etc/dnf/plugins/post-transaction-actions.conf"' \
    --customize-hook='chroot "$1" systemctl disable containerd.service' |
    import_node "$image" "gpufleet.nvidia lab node, STAND-IN for EL 9: Debian bookworm userland with real dnf 4 and rpm" \
      --change 'LABEL gpufleet.standin="EL 9 node: Debian 12 userland, real dnf 4 and rpm, Rocky Linux 9 os-release (/etc/gpufleet-standin)"'
  rm -rf "$tmp"
  podman run --rm "$image" sh -c 'python3 -c "import dnf, platform; print(platform.freedesktop_os_release()[\"PRETTY_NAME\"], \"- dnf\", dnf.VERSION)"; rpm --eval "%_dbpath"'
}

# build_el10: el9's image, as Rocky Linux 10 reads (no second bootstrap: only what says the release differs)
build_el10() {
  local image="$IMAGE_REPO:el10" tmp
  if [ "${FORCE:-0}" != 1 ] && podman image exists "$image"; then
    log "image $image present"
    return 0
  fi
  log "building $image from $IMAGE_REPO:el9 (stand-in for EL 10: os-release, redhat-release, releasever)"
  tmp=$(mktemp -d)
  sed -e 's/Rocky Linux 9 as dnf/Rocky Linux 10 as dnf/; s/9\.6 (Blue Onyx)/10.0 (Red Quartz)/g; s/"9\.6"/"10.0"/g' \
      -e 's/platform:el9/platform:el10/; s/rocky:9::baseos/rocky:10::baseos/; s/Rocky-Linux-9/Rocky-Linux-10/' \
      <(podman run --rm "$IMAGE_REPO:el9" cat /usr/lib/os-release) > "$tmp/os-release"
  echo "Rocky Linux release 10.0 (Red Quartz)" > "$tmp/redhat-release"
  echo 10 > "$tmp/releasever"
  podman run --rm "$IMAGE_REPO:el9" cat /etc/gpufleet-standin | sed 's/EL 9 (Rocky Linux 9)/EL 10 (Rocky Linux 10)/; s/(Rocky Linux 9\.6)/(Rocky Linux 10.0)/' > "$tmp/standin"
  podman rm -f gpufleet-build-el10 >/dev/null 2>&1 || true
  podman create --name gpufleet-build-el10 "$IMAGE_REPO:el9" >/dev/null
  podman cp "$tmp/os-release" gpufleet-build-el10:/usr/lib/os-release
  podman cp "$tmp/redhat-release" gpufleet-build-el10:/etc/redhat-release
  podman cp "$tmp/releasever" gpufleet-build-el10:/etc/dnf/vars/releasever
  podman cp "$tmp/standin" gpufleet-build-el10:/etc/gpufleet-standin
  podman commit -q \
    --change 'LABEL gpufleet.standin="EL 10 node: Debian 12 userland, real dnf 4 and rpm, Rocky Linux 10 os-release (/etc/gpufleet-standin)"' \
    --change "LABEL gpufleet.description=\"gpufleet.nvidia lab node, STAND-IN for EL 10: Debian bookworm userland with real dnf 4 and rpm\"" \
    gpufleet-build-el10 "$image" >/dev/null
  podman rm -f gpufleet-build-el10 >/dev/null
  rm -rf "$tmp"
  podman run --rm "$image" sh -c 'python3 -c "import dnf, platform; print(platform.freedesktop_os_release()[\"PRETTY_NAME\"], \"- dnf\", dnf.VERSION)"; cat /etc/dnf/vars/releasever'
}

build el9
build_el10
