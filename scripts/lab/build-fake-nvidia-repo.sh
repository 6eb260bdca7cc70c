#!/usr/bin/env bash
# Build a LOCAL, SIGNED apt repository that stands in for NVIDIA's
# (https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH), a flat repository: suite "/").
# It is a test double: four tiny packages with the toolkit's real names, at three versions
# (1.20.0-1, the container_toolkit role's default that the scenarios pin; 1.17.8-1, the release
# before the four had to move together, for inventories that still pin it; and a newer 1.20.1-1
# that the pin must keep out), signed with a throwaway GPG key made here. As NVIDIA's, each
# package depends on the others at exactly its own version. nvidia-container-toolkit-base ships
# /usr/bin/nvidia-container-runtime as a shell script that execs runc, so containerd's nvidia
# handler really runs containers, and /etc/nvidia-container-runtime/config.toml as a conffile
# (NVIDIA's postinst writes it) in the toolkit's default layout, for the role's isolation edit.
#   build-fake-nvidia-repo.sh OUTDIR
# Layout: OUTDIR/gpgkey (armored public key), OUTDIR/stable/deb/<arch>/{*.deb,Packages*,Release,InRelease,Release.gpg}
set -euo pipefail
out=$1
arch=${ARCH:-$(dpkg --print-architecture)}
repo=$out/stable/deb/$arch
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$out"
mkdir -p "$repo"

deb() {  # deb NAME VERSION DEPENDS [FILE MODE CONTENT]... (a FILE under etc/ is a conffile)
  local name=$1 version=$2 depends=$3 dir=$work/$1_$2
  shift 3
  mkdir -p "$dir/DEBIAN" "$dir/usr/share/doc/$name"
  {
    printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: gpufleet.nvidia tests <tests@gpufleet.invalid>\n' \
      "$name" "$version" "$arch"
    [ -n "$depends" ] && printf 'Depends: %s\n' "$depends"
    printf 'Section: utils\nPriority: optional\nDescription: test double of NVIDIA %s (gpufleet.nvidia lab and tests)\n' "$name"
    printf ' Not NVIDIA software: an empty stand-in served from a local repository.\n'
  } > "$dir/DEBIAN/control"
  printf 'test double of %s %s, built for the gpufleet.nvidia lab and tests\n' "$name" "$version" \
    > "$dir/usr/share/doc/$name/README"
  while [ $# -ge 3 ]; do
    mkdir -p "$dir/$(dirname "$1")"
    printf '%s\n' "$3" > "$dir/$1"
    chmod "$2" "$dir/$1"
    case $1 in etc/*) printf '/%s\n' "$1" >> "$dir/DEBIAN/conffiles" ;; esac
    shift 3
  done
  dpkg-deb --root-owner-group --build "$dir" "$repo/${name}_${version}_${arch}.deb" >/dev/null
}

runtime_script='#!/bin/sh
# test double of nvidia-container-runtime: hands the OCI call to runc unchanged
exec runc "$@"'
# The top of the toolkit's default config.toml (nvidia-ctk config default); the role edits the
# two accept-nvidia-visible-devices keys in place and must keep the rest.
config_toml='#accept-nvidia-visible-devices-as-volume-mounts = false
#accept-nvidia-visible-devices-envvar-when-unprivileged = true
disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"
#swarm-resource = "DOCKER_RESOURCE_GPU"

[nvidia-container-cli]
environment = []
ldconfig = "@/sbin/ldconfig.real"
load-kmods = true

[nvidia-container-runtime]
log-level = "info"
mode = "auto"
runtimes = ["runc", "crun"]'
# The versions, and the toolkit version the lab and the scenarios pin by default
# (roles/container_toolkit/defaults/main.yml's container_toolkit_version).
for v in 1.17.8-1 1.20.0-1 1.20.1-1; do
  deb libnvidia-container1 "$v" ""
  deb libnvidia-container-tools "$v" "libnvidia-container1 (= $v)"
  deb nvidia-container-toolkit-base "$v" "" \
    usr/bin/nvidia-container-runtime 0755 "$runtime_script" \
    etc/nvidia-container-runtime/config.toml 0644 "$config_toml"
  deb nvidia-container-toolkit "$v" "nvidia-container-toolkit-base (= $v), libnvidia-container-tools (= $v)"
done

cd "$repo"
dpkg-scanpackages --multiversion . /dev/null 2>/dev/null > Packages
gzip -9nk Packages
{
  printf 'Origin: gpufleet-test-double\nLabel: fake libnvidia-container (gpufleet.nvidia lab and tests)\nSuite: stable\nArchitectures: %s\n' "$arch"
  printf 'Date: %s\n' "$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S UTC')"
  printf 'SHA256:\n'
  for f in Packages Packages.gz; do
    printf ' %s %s %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "$(stat -c %s "$f")" "$f"
  done
} > Release

export GNUPGHOME=$work/gnupg
mkdir -m 0700 "$GNUPGHOME"
gpg --batch --quiet --passphrase '' --quick-gen-key 'gpufleet molecule fake NVIDIA repo <tests@gpufleet.invalid>' ed25519 sign never
gpg --batch --quiet --armor --export > "$out/gpgkey"
gpg --batch --quiet --yes --clearsign -o InRelease Release
gpg --batch --quiet --yes --armor --detach-sign -o Release.gpg Release
gpgconf --kill all 2>/dev/null || true
printf '%s\n' "$repo"
