#!/usr/bin/env bash
# Fetch the containerd binaries of Debian 13 (trixie, containerd 1.7) and Debian unstable
# (containerd 2.x) into .cache/containerd/<version>/, so the unit tests can check the runtime
# configs the collection writes with each real containerd (`containerd config dump`); Debian
# 12's containerd 1.6 comes from setup-host.sh. Packages come from the Debian mirror this host
# already uses, through a private apt state; nothing is installed. Skipped once done.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
dest=$ROOT/.cache/containerd
stamp=$dest/.fetched
if [ -f "$stamp" ]; then
  log "containerd test binaries present ($(find "$dest" -mindepth 1 -maxdepth 1 -type d -printf '%f '))"
  exit 0
fi
mirror=$(host_debian_mirror debian)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
for suite in trixie sid; do
  printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' "$mirror" "$suite"
done > "$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
log "fetching containerd from Debian trixie and sid (test binaries, not installed)"
apt-get "${apt_opts[@]}" -q update >/dev/null
cd "$work"
for suite in trixie sid; do
  apt-get "${apt_opts[@]}" -q download "containerd/$suite" >/dev/null
done
for deb in "$work"/containerd_*.deb; do
  x=$(mktemp -d -p "$work")
  dpkg-deb -x "$deb" "$x"
  version=$("$x/usr/bin/containerd" --version | awk '{print $3}' | sed 's/[~+].*//')
  mkdir -p "$dest/$version/usr/bin"
  cp "$x/usr/bin/containerd" "$dest/$version/usr/bin/containerd"
  log "containerd $version from $(basename "$deb")"
done
touch "$stamp"
