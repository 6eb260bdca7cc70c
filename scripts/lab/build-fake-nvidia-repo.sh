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
#   build-fake-nvidia-repo.sh OUTDIR [--ubuntu KERNEL]
# Layout: OUTDIR/gpgkey (armored public key), OUTDIR/stable/deb/<arch>/{*.deb,Packages*,Release,InRelease,Release.gpg},
# and OUTDIR.tgz next to it (all of it in one archive, which the lab copies into its nodes)
#
# With --ubuntu KERNEL (the node's `uname -r`), it also builds OUTDIR/ubuntu: a STAND-IN of
# Ubuntu 24.04's archive (dists/noble, noble-updates, noble-security; components main,
# restricted, universe, multiverse; pool/<component>/<letter>/<source>/), signed with the same
# key, carrying test doubles of what the nvidia_driver module installs on Ubuntu, under the names,
# versions and dependencies of Canonical's packages:
#   - the Enterprise Ready Driver packages of nvidia-graphics-drivers-<branch>-server, in
#     restricted: nvidia-headless-no-dkms-<branch>-server[-open], nvidia-utils-, libnvidia-compute-,
#     libnvidia-cfg1-, nvidia-compute-utils-, nvidia-kernel-common-<branch>-server,
#     nvidia-kernel-source-<branch>-server[-open] and nvidia-dkms-<branch>-server[-open], at
#     <driver>-0ubuntu0.24.04.N; the no-DKMS metapackage depends on the others at exactly its own
#     version (packages.ubuntu.com, noble-updates: nvidia-headless-no-dkms-470-server,
#     nvidia-headless-no-dkms-535-open; Ubuntu Server documentation, "NVIDIA drivers installation":
#     the -server packages, nvidia-headless-no-dkms-*, linux-modules-nvidia-*);
#   - the precompiled, signed kernel modules of linux-restricted-modules for the running kernel:
#     linux-modules-nvidia-<branch>-server[-open]-KERNEL at the kernel's version +N, depending on
#     linux-image-KERNEL, linux-signatures-nvidia-KERNEL and linux-objects-nvidia-...-KERNEL at
#     exactly its version, and on nvidia-kernel-common-<branch>-server (>= <driver>), the driver it
#     was built from (packages.ubuntu.com, noble: linux-modules-nvidia-550-server-generic-hwe-24.04
#     and its source linux-restricted-modules);
#   - in main: linux-image-KERNEL and linux-headers-KERNEL (the kernel of the node: a container
#     shares its host's, which Ubuntu does not package, so its package version is made up:
#     <kernel's numbers>-1.1, the modules' <that>+1) and dkms 3.0.11-1ubuntu13 (noble's).
# What the pockets hold (the scenario ubuntu2404 relies on it):
#   noble-updates   550 (and -open) 550.163.01, with precompiled modules of both flavours for
#                   KERNEL; 570 570.172.08, whose nvidia-compute-utils needs a package no pocket
#                   carries (gpufleet-missing-dependency: an install that must fail); 580 (and -open)
#                   580.95.05, without precompiled modules (DKMS);
#   noble-security  550 (and -open) 550.144.03, older;
#   noble           main: the kernel's packages and dkms.
# Not Canonical's: the packages are empty, their maintainer scripts absent (nvidia-dkms builds
# nothing), and the Conflicts/Breaks between branches and flavours are left out (the module
# removes what it replaces itself: that is what the scenario checks).
set -euo pipefail
out=$1
kernel=
[ "${2:-}" = --ubuntu ] && kernel=${3:?--ubuntu needs the kernel release}
arch=${ARCH:-$(dpkg --print-architecture)}
repo=$out/stable/deb/$arch
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$out"
mkdir -p "$repo"
out_abs=$(cd "$out" && pwd)  # for OUTDIR.tgz, at the end (the script cd's below)

deb() {  # deb NAME VERSION DEPENDS [FILE MODE CONTENT]... (a FILE under etc/ is a conffile), into $dest
  local name=$1 version=$2 depends=$3 dir=$work/$1_$2 dest=${dest:-$repo}
  shift 3
  mkdir -p "$dir/DEBIAN" "$dir/usr/share/doc/$name"
  {
    printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: gpufleet.nvidia tests <tests@gpufleet.invalid>\n' \
      "$name" "$version" "$arch"
    [ -n "$depends" ] && printf 'Depends: %s\n' "$depends"
    printf 'Section: utils\nPriority: optional\nDescription: test double of %s (gpufleet.nvidia lab and tests)\n' "$name"
    printf ' Not the real package: an empty stand-in served from a local repository.\n'
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
  mkdir -p "$dest"
  dpkg-deb --root-owner-group --build "$dir" "$dest/${name}_${version}_${arch}.deb" >/dev/null
  rm -rf "$dir"
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

export GNUPGHOME=$work/gnupg
mkdir -m 0700 "$GNUPGHOME"
gpg --batch --quiet --passphrase '' --quick-gen-key 'gpufleet molecule fake NVIDIA repo <tests@gpufleet.invalid>' ed25519 sign never
gpg --batch --quiet --armor --export > "$out/gpgkey"
sign() {  # sign DIR: InRelease and Release.gpg of DIR/Release
  gpg --batch --quiet --yes --clearsign -o "$1/InRelease" "$1/Release"
  gpg --batch --quiet --yes --armor --detach-sign -o "$1/Release.gpg" "$1/Release"
}

# --- the stand-in of Ubuntu 24.04's archive (--ubuntu KERNEL) ---------------------------------------
ubuntu_archive() {
  local root=$out/ubuntu kver suite comp dir
  # the kernel's package version: its leading numbers (6.8.0 of 6.8.0-90-generic), -1.1
  kver=$(printf '%s' "$kernel" | sed -E 's/^([0-9]+(\.[0-9]+)*).*/\1/')-1.1
  mkdir -p "$root"
  # udeb SUITE COMPONENT SOURCE NAME VERSION DEPENDS: one package into the pool, listed for SUITE
  udeb() {
    local dest_dir="pool/$2/${3:0:1}/$3"
    dest=$root/$dest_dir deb "$4" "$5" "$6"
    printf '%s %s\n' "$dest_dir/${4}_${5}_${arch}.deb" "$1/$2" >> "$work/ubuntu-index"
  }
  : > "$work/ubuntu-index"
  udeb noble main "linux-$kernel" "linux-image-$kernel" "$kver" ""
  udeb noble main "linux-$kernel" "linux-headers-$kernel" "$kver" ""
  udeb noble main dkms dkms 3.0.11-1ubuntu13 ""
  # driver BRANCH VERSION SUITE [EXTRA DEPENDS OF nvidia-compute-utils]: both flavours of a branch
  driver() {
    local b=$1 v=$2 suite=$3 extra=${4:-} src="nvidia-graphics-drivers-$1-server" o
    udeb "$suite" restricted "$src" "libnvidia-compute-$b-server" "$v" ""
    udeb "$suite" restricted "$src" "libnvidia-cfg1-$b-server" "$v" ""
    udeb "$suite" restricted "$src" "nvidia-utils-$b-server" "$v" "libnvidia-compute-$b-server (= $v)"
    udeb "$suite" restricted "$src" "nvidia-compute-utils-$b-server" "$v" "libnvidia-compute-$b-server (= $v)$extra"
    udeb "$suite" restricted "$src" "nvidia-kernel-common-$b-server" "$v" ""
    for o in "" -open; do
      udeb "$suite" restricted "$src" "nvidia-kernel-source-$b-server$o" "$v" ""
      udeb "$suite" restricted "$src" "nvidia-dkms-$b-server$o" "$v" \
        "dkms, nvidia-kernel-common-$b-server (= $v), nvidia-kernel-source-$b-server$o (= $v)"
      udeb "$suite" restricted "$src" "nvidia-headless-no-dkms-$b-server$o" "$v" \
        "libnvidia-cfg1-$b-server (= $v), libnvidia-compute-$b-server (= $v), nvidia-compute-utils-$b-server (= $v), nvidia-kernel-common-$b-server (= $v), nvidia-kernel-source-$b-server$o (= $v)"
    done
  }
  driver 550 550.163.01-0ubuntu0.24.04.1 noble-updates
  driver 550 550.144.03-0ubuntu0.24.04.1 noble-security
  driver 570 570.172.08-0ubuntu0.24.04.1 noble-updates ", gpufleet-missing-dependency"
  driver 580 580.95.05-0ubuntu0.24.04.2 noble-updates
  # linux-restricted-modules for KERNEL: 550's modules of both flavours, built from 550.163.01
  udeb noble-updates restricted linux-restricted-modules "linux-signatures-nvidia-$kernel" "$kver+1" ""
  for o in "" -open; do
    udeb noble-updates restricted linux-restricted-modules "linux-objects-nvidia-550-server$o-$kernel" "$kver+1" ""
    udeb noble-updates restricted linux-restricted-modules "linux-modules-nvidia-550-server$o-$kernel" "$kver+1" \
      "debconf (>= 0.5) | debconf-2.0, linux-image-$kernel | linux-image-unsigned-$kernel, linux-signatures-nvidia-$kernel (= $kver+1), linux-objects-nvidia-550-server$o-$kernel (= $kver+1), nvidia-kernel-common-550-server (>= 550.163.01)"
  done
  # the indexes: every suite has every component (an empty one where it carries nothing)
  (
    cd "$root"
    for suite in noble noble-updates noble-security; do
      dir=dists/$suite
      for comp in main restricted universe multiverse; do
        mkdir -p "$dir/$comp/binary-$arch"
        while read -r deb where; do
          [ "$where" = "$suite/$comp" ] || continue
          dpkg-deb -f "$deb"
          printf 'Filename: %s\nSize: %s\nSHA256: %s\n\n' "$deb" "$(stat -c %s "$deb")" "$(sha256sum "$deb" | cut -d' ' -f1)"
        done < "$work/ubuntu-index" > "$dir/$comp/binary-$arch/Packages"
        gzip -9nk "$dir/$comp/binary-$arch/Packages"
      done
      {
        printf 'Origin: Ubuntu\nLabel: Ubuntu\nSuite: %s\nVersion: 24.04\nCodename: noble\n' "$suite"
        printf 'Date: %s\n' "$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S UTC')"
        printf 'Architectures: %s\nComponents: main restricted universe multiverse\n' "$arch"
        printf 'Description: STAND-IN for Ubuntu 24.04 (gpufleet.nvidia tests: test-double packages, throwaway key)\nSHA256:\n'
        (cd "$dir" && for f in */binary-*/Packages*; do
          printf ' %s %s %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "$(stat -c %s "$f")" "$f"
        done)
      } > "$dir/Release"
      sign "$dir"
    done
  )
}
[ -z "$kernel" ] || ubuntu_archive

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

sign .
gpgconf --kill all 2>/dev/null || true
# Everything above in one archive next to it, OUTDIR.tgz: the lab copies it into a node in one
# transfer (scripts/lab/prepare.yml), not a round trip per file.
tar -C "$out_abs" -czf "$work/lab.tgz" .
mv "$work/lab.tgz" "$out_abs.tgz"
printf '%s\n' "$repo"
