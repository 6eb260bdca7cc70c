#!/usr/bin/env bash
# Install what the tests and the lab need on a Debian 12 host, as root. Safe to re-run.
#  - rootful podman from bookworm, configured for this kind of host (runc, ulimits),
#  - mmdebstrap to build the node images offline from Debian's packages,
#  - containerd (its binary validates runtime configs in the unit tests),
#  - shellcheck, which ansible-test sanity runs on the shell scripts,
#  - rpm (rpmbuild, rpmsign) and createrepo-c, which build the stand-in rpm repositories of the EL
#    scenarios (scripts/lab/build-fake-el-repos.sh); dnf itself runs only inside the EL images.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "setup-host.sh"

# chromium: the fleet report page's test in a real browser (tests/unit/plugins/plugin_utils/report/test_report_page.py,
# headless, screenshots): about 81 MB to download, 300 MB on disk without recommends; the test skips without it.
PACKAGES=(podman runc uidmap slirp4netns fuse-overlayfs catatonit containernetworking-plugins
          mmdebstrap debian-archive-keyring containerd python3-venv git rsync shellcheck rpm createrepo-c chromium)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing system packages: ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  # The containerd package starts its daemon; the tests only need the binary.
  systemctl disable --now containerd >/dev/null 2>&1 || true
else
  log "system packages present"
fi

# crun refuses this kind of host's hybrid cgroup layout: use runc. Default ulimits must not
# exceed the hard limits of the shell that starts podman.
nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] && nofile=1048576
nproc=$(ulimit -Hu); { [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; } && nproc=32768
conf=/etc/containers/containers.conf.d/50-gpufleet.conf
want=$(cat <<CONF
# Written by gpufleet.nvidia scripts/setup-host.sh
[containers]
default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=${nproc}:${nproc}"]

[engine]
runtime = "runc"
CONF
)
if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
  log "configuring podman ($conf)"
  mkdir -p "$(dirname "$conf")"
  printf '%s\n' "$want" > "$conf"
fi
podman info --format '{{.Host.OCIRuntime.Name}}' | grep -qx runc || die "podman does not use runc; check $conf"
