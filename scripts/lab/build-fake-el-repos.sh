#!/usr/bin/env bash
# Build LOCAL, SIGNED rpm repositories that stand in for NVIDIA's and the distribution's on EL 9
# and EL 10 nodes (the el9 and el10 images of scripts/build-el-images.sh). Test doubles: tiny packages without
# files of their own (except where said), under the real names, versions laid out as NVIDIA
# lays them out, signed with a throwaway GPG key made here. What comes from where:
#
#   OUTDIR/compute/cuda/repos/rhel9/x86_64   NVIDIA's CUDA repository (nvidia_driver's default
#       baseurl https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64, with the
#       key file D42D0685.pub next to the packages as the module expects). Its driver packages are
#       modular: one `nvidia-driver` module with, per branch, the streams `<branch>-dkms`
#       (proprietary kernel modules, kmod-nvidia-latest-dkms) and `<branch>-open`
#       (kmod-nvidia-open-dkms), and the virtual streams `latest-dkms` and `open-dkms` that follow
#       the newest branch; profiles default, fm, ks and src. Sources:
#         - NVIDIA Driver Installation Guide, "Kernel Modules"
#           (docs.nvidia.com/datacenter/tesla/driver-installation-guide/, table "Open GPU kernel
#           module installation": RHEL 8/9 `dnf module enable nvidia-driver:open-dkms` and
#           `nvidia-driver:580-open`; RHEL 10 has no module, `dnf versionlock` instead);
#         - github.com/NVIDIA/yum-packaging-dkms-nvidia README (streams latest-dkms and XXX-dkms:
#           kmod-nvidia-latest-dkms-${version}-${rel}.el9.x86_64; open-dkms and XXX-open from 515:
#           kmod-nvidia-open-dkms-${version}-${rel}.el9.x86_64);
#         - github.com/NVIDIA/yum-packaging-nvidia-driver docs/guide-rhel8.md (streams latest,
#           latest-dkms, XXX, XXX-dkms; profiles default, ks, fm, src; the packages nvidia-driver-cuda,
#           nvidia-driver-cuda-libs, nvidia-kmod-common, nvidia-modprobe, nvidia-persistenced).
#       OUTDIR/compute/cuda/repos/rhel10/x86_64 is the same packages (.el10) WITHOUT module
#       metadata: RHEL 10 carries no modular content (Red Hat, "Considerations in adopting RHEL 10",
#       Software management: modularity deprecated, no modular content) and NVIDIA's guide installs
#       the driver there with `dnf install` and `dnf versionlock` alone (the table cited above).
#       Epoch 3, as NVIDIA's driver packages carry. NOT built: the precompiled streams (`<branch>`,
#       `latest`: kmod-nvidia-<version>-<kernel> packages for RHEL's kernels, which a container on
#       this machine's kernel cannot use), the desktop packages, the fabric manager. No default
#       stream is declared (the documentation cited does not name one): the driver's packages stay
#       hidden until a stream is enabled, the strictest case for the module. One deliberate
#       fault: 570.172.08's nvidia-persistenced requires a package no repository carries, so that
#       installing branch 570 fails in dnf's transaction (the scenarios' rollback).
#       nvidia-driver-cuda carries /usr/bin/nvidia-smi, a script that fails as the real one does
#       where no driver is loaded (so that the lab's discovery finds the package that owns it).
#   OUTDIR/stable/rpm/x86_64, OUTDIR/gpgkey   NVIDIA's container toolkit repository
#       (https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch and its gpgkey, as the
#       NVIDIA Container Toolkit install guide's "With dnf" section configures it): the four
#       packages at 1.17.8-1, 1.20.0-1, 1.20.1-1 (as scripts/lab/build-fake-nvidia-repo.sh), each
#       requiring the others at its own version; repodata/repomd.xml signed (repo_gpgcheck).
#       nvidia-container-toolkit-base carries /usr/bin/nvidia-container-runtime (a script that
#       hands the call to runc), /usr/bin/nvidia-ctk (a script that answers --version only: what
#       discovery reads on an rpm node) and /etc/nvidia-container-runtime/config.toml.
#   OUTDIR/el9-distro, OUTDIR/el10-distro   the distribution's repositories (BaseOS, AppStream, EPEL) for the three
#       packages the roles install from them: dkms (EPEL), python3-dnf-plugin-versionlock
#       (BaseOS), python3-tomlkit. Empty: the image holds the real code of each from Debian
#       (dnf-plugins-core's versionlock, python3-tomlkit), so only the rpm database entry is a
#       stand-in.
#   OUTDIR.tgz   all of the above in one archive, which the lab copies into its EL nodes.
#   build-fake-el-repos.sh OUTDIR
set -euo pipefail
out=$1
arch=x86_64
majors="9 10"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$out"
toolkit=$out/stable/rpm/$arch
mkdir -p "$toolkit" "$work/rpmbuild"
for major in $majors; do
  mkdir -p "$out/compute/cuda/repos/rhel$major/$arch" "$out/el$major-distro"
done

export GNUPGHOME=$work/gnupg
mkdir -m 0700 "$GNUPGHOME"
keyname='gpufleet molecule fake NVIDIA rpm repositories <tests@gpufleet.invalid>'
gpg --batch --quiet --passphrase '' --quick-gen-key "$keyname" rsa2048 sign never
gpg --batch --quiet --armor --export > "$out/gpgkey"
for major in $majors; do
  cp "$out/gpgkey" "$out/compute/cuda/repos/rhel$major/$arch/D42D0685.pub"
  cp "$out/gpgkey" "$out/el$major-distro/RPM-GPG-KEY-standin"
done

# One spec per (set, version): each `pkg NAME REQUIRES [FILE MODE CONTENT]...` line becomes a
# subpackage of that name. RPM's automatic dependencies are off (the packages hold no ELF files,
# and the node's libraries are Debian's, not in its rpm database).
spec_begin() {  # spec_begin FILE VERSION RELEASE EPOCH
  {
    printf 'Name: gpufleet-standin\nVersion: %s\nRelease: %s\n' "$2" "$3"
    [ -n "$4" ] && printf 'Epoch: %s\n' "$4"
    printf 'Summary: test doubles (gpufleet.nvidia)\nLicense: GPL-3.0-or-later\nBuildArch: %s\nAutoReqProv: no\n' "$arch"
    printf '%%description\nNot NVIDIA software: empty stand-ins served from a local repository.\n'
    printf '%%install\nmkdir -p %%{buildroot}\n'
  } > "$1"
}
pkg() {  # pkg SPEC NAME "REQUIRES, ..." "CONFLICTS, ..." "PROVIDES, ..." [PATH MODE CONTENT]...
  local spec=$1 name=$2 requires=$3 conflicts=$4 provides=$5 files=""
  shift 5
  local body
  body=$(printf '%%package -n %s\nSummary: test double of %s (gpufleet.nvidia tests)\nAutoReqProv: no\n' "$name" "$name")
  [ -n "$requires" ] && body+=$(printf '\nRequires: %s' "$requires")
  [ -n "$conflicts" ] && body+=$(printf '\nConflicts: %s' "$conflicts")
  [ -n "$provides" ] && body+=$(printf '\nProvides: %s' "$provides")
  body+=$(printf '\nProvides: gpufleet-test-double\n%%description -n %s\nTest double of %s: not NVIDIA software.\n' "$name" "$name")
  while [ $# -ge 3 ]; do
    printf 'mkdir -p %%{buildroot}%s\ncat > %%{buildroot}%s <<'"'"'GPUFLEET_EOF'"'"'\n%s\nGPUFLEET_EOF\nchmod %s %%{buildroot}%s\n' \
      "$(dirname "$1")" "$1" "$3" "$2" "$1" >> "$spec.install"
    case $1 in /etc/*) files+="%config(noreplace) $1"$'\n' ;; *) files+="$1"$'\n' ;; esac
    shift 3
  done
  printf '%s\n%%files -n %s\n%s\n' "$body" "$name" "$files" >> "$spec.pkgs"
}
spec_build() {  # spec_build SPEC DESTDIR
  local spec=$1
  [ -f "$spec.install" ] && cat "$spec.install" >> "$spec"
  cat "$spec.pkgs" >> "$spec"
  rpmbuild --quiet -bb --define "_topdir $work/rpmbuild" --define "_rpmdir $work/rpms" \
    --define "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" --define "_dbpath $work/rpmdb" "$spec" >/dev/null
  mv "$work"/rpms/*.rpm "$2/"
  rm -f "$spec" "$spec.install" "$spec.pkgs"
}

# --- NVIDIA's CUDA repository: the driver, per version ------------------------------------------
driver_versions=(550.163.01 570.172.08 580.95.05 580.105.08)
# nvidia-driver-cuda's /usr/bin/nvidia-smi (NVIDIA's package ships it there): a test double that
# answers as the real one does where no driver is loaded, which is always so in a container (the
# discovery of the lab's EL node asks rpm which package owns it, as on an EL node).
smi_script='#!/bin/sh
# test double of nvidia-smi (gpufleet.nvidia stand-in repository): no driver is loaded here
echo "NVIDIA-SMI has failed because it couldn'"'"'t communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
exit 9'
for major in $majors; do
for v in "${driver_versions[@]}"; do
  dist=el$major
  cuda=$out/compute/cuda/repos/rhel$major/$arch
  evr="3:$v-1.$dist"
  s=$work/driver-$v.spec
  spec_begin "$s" "$v" "1.$dist" 3
  pkg "$s" nvidia-driver-cuda "nvidia-driver-cuda-libs = $evr, nvidia-kmod-common = $evr, nvidia-persistenced = $evr, nvidia-modprobe = $evr" "" "" \
    /usr/bin/nvidia-smi 0755 "$smi_script"
  pkg "$s" nvidia-driver-cuda-libs "" "" ""
  pkg "$s" nvidia-kmod-common "nvidia-kmod = $evr" "" ""
  pkg "$s" nvidia-modprobe "" "" ""
  # 570's nvidia-persistenced needs what no repository carries: the scenarios' failed install
  pkg "$s" nvidia-persistenced "$([ "$v" = 570.172.08 ] && echo gpufleet-missing-dependency)" "" ""
  # the two kernel module packages both provide nvidia-kmod and exclude each other
  pkg "$s" kmod-nvidia-latest-dkms "dkms, nvidia-kmod-common = $evr" "kmod-nvidia-open-dkms" "nvidia-kmod = $evr"
  pkg "$s" kmod-nvidia-open-dkms "dkms, nvidia-kmod-common = $evr" "kmod-nvidia-latest-dkms" "nvidia-kmod = $evr"
  spec_build "$s" "$cuda"
done
done

# --- the toolkit ------------------------------------------------------------------------------
runtime_script='#!/bin/sh
# test double of nvidia-container-runtime: hands the OCI call to runc unchanged
exec runc "$@"'
config_toml='#accept-nvidia-visible-devices-as-volume-mounts = false
#accept-nvidia-visible-devices-envvar-when-unprivileged = true
disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"
#swarm-resource = "DOCKER_RESOURCE_GPU"

[nvidia-container-cli]
environment = []
ldconfig = "@/sbin/ldconfig"
load-kmods = true

[nvidia-container-runtime]
log-level = "info"
mode = "auto"
runtimes = ["runc", "crun"]'
# nvidia-container-toolkit-base's /usr/bin/nvidia-ctk: a test double that says its version (what
# discovery reads on an rpm node) and refuses everything else.
# shellcheck disable=SC2016  # the script's own $1, not this one's
ctk_script='#!/bin/sh
# test double of nvidia-ctk (gpufleet.nvidia stand-in repository): --version only
case "$1" in
  --version|-v|version) echo "NVIDIA Container Toolkit CLI version VERSION"; echo "commit: gpufleet-standin"; exit 0 ;;
esac
echo "nvidia-ctk test double (gpufleet.nvidia stand-in): only --version is answered" >&2
exit 1'
for vr in 1.17.8-1 1.20.0-1 1.20.1-1; do
  v=${vr%-*} r=${vr#*-}
  s=$work/toolkit-$vr.spec
  spec_begin "$s" "$v" "$r" ""
  pkg "$s" libnvidia-container1 "" "" ""
  pkg "$s" libnvidia-container-tools "libnvidia-container1 = $vr" "" ""
  pkg "$s" nvidia-container-toolkit-base "" "" "" \
    /usr/bin/nvidia-container-runtime 0755 "$runtime_script" \
    /usr/bin/nvidia-ctk 0755 "${ctk_script//VERSION/$v}" \
    /etc/nvidia-container-runtime/config.toml 0644 "$config_toml"
  pkg "$s" nvidia-container-toolkit "nvidia-container-toolkit-base = $vr, libnvidia-container-tools = $vr" "" ""
  spec_build "$s" "$toolkit"
done

# --- the distribution's packages the roles install --------------------------------------------
for major in $majors; do
  s=$work/distro.spec
  spec_begin "$s" 1 "1.el$major" ""
  pkg "$s" dkms "" "" ""
  pkg "$s" python3-dnf-plugin-versionlock "" "" ""
  pkg "$s" python3-tomlkit "" "" ""
  spec_build "$s" "$out/el$major-distro"
done

repos=("$toolkit")
for major in $majors; do repos+=("$out/compute/cuda/repos/rhel$major/$arch" "$out/el$major-distro"); done
for repo in "${repos[@]}"; do
  rpmsign --define "__gpg /usr/bin/gpg" --define "_gpg_name $keyname" --define "_gpg_path $GNUPGHOME" --addsign \
    "$repo"/*.rpm 2>&1 >/dev/null | { grep -v GPG_TTY >&2 || true; }
done

# --- metadata: module metadata for EL 9 only (RHEL 10 carries no modular content) ---------------
for repo in "${repos[@]}"; do
  createrepo_c --quiet --no-database "$repo"
done
python3 "$(dirname "$0")/el-modules.py" el9 "${driver_versions[@]}" > "$work/modules.yaml"
modifyrepo_c --mdtype=modules "$work/modules.yaml" "$out/compute/cuda/repos/rhel9/$arch/repodata" >/dev/null
for repo in "${repos[@]}"; do
  gpg --batch --quiet --yes --armor --detach-sign -o "$repo/repodata/repomd.xml.asc" "$repo/repodata/repomd.xml"
done
gpgconf --kill all 2>/dev/null || true
# Everything above in one archive next to it, OUTDIR.tgz: the lab copies it into a node in one
# transfer (scripts/lab/prepare.yml), not a round trip per file.
out_abs=$(cd "$out" && pwd)
tar -C "$out_abs" -czf "$work/lab.tgz" .
mv "$work/lab.tgz" "$out_abs.tgz"
printf '%s\n' "$out"
