#!/usr/bin/env bash
# Build the execution environment for AWX / Ansible Automation Platform, offline:
#   1. the base image localhost/gpufleet-ee-base:debian13 from Debian's packages (mmdebstrap
#      piped into `podman import`, as scripts/build-images.sh builds the lab nodes): Debian 13,
#      whose python3 (3.13) ansible-core 2.21 runs on (Debian 12's 3.11 is too old for it);
#   2. the collection tarball (ansible-galaxy collection build) and its dependencies' tarballs
#      (tests/package/local_source.py: from the `ansible` package's copies; Galaxy is not
#      reachable here), plus containers.podman for the lab's connection;
#   3. the EE with ansible-builder 3 (meta/execution-environment.yml), tagged
#      localhost/gpufleet-ee:<collection version>.
# ansible-builder and ansible-runner live in their own venv, .cache/venvs/ee-builder (not .venv).
# The build trusts this host's CA bundle (pip reaches PyPI through a TLS-intercepting proxy):
# it is copied into the build context at build time, never committed. FORCE=1 rebuilds the base.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "build-ee.sh"
cd "$ROOT"

EE_VENV=$ROOT/.cache/venvs/ee-builder
BASE=${GPUFLEET_EE_BASE:-localhost/gpufleet-ee-base:debian13}
version=$(python3 -c 'import re,sys; print(re.search(r"^version:\s*(\S+)", open("galaxy.yml").read(), re.M).group(1))')
EE=${GPUFLEET_EE_IMAGE:-localhost/gpufleet-ee}:$version
out=$ROOT/.build/ee
# The host's CA bundle is in the build context only while the build runs.
drop_ca() { rm -f "$out/files/ca-certificates.crt" "$out/def/.build/ee/files/ca-certificates.crt" "$out/context/_build/gpufleet/ca-certificates.crt"; }
trap drop_ca EXIT

ee_venv() {
  if [ ! -x "$EE_VENV/bin/ansible-builder" ] || [ ! -x "$EE_VENV/bin/ansible-runner" ]; then
    log "installing ansible-builder and ansible-runner into $EE_VENV"
    python3 -m venv "$EE_VENV"
    "$EE_VENV/bin/pip" install -q ansible-builder ansible-runner
  fi
}

base_image() {
  if [ "${FORCE:-0}" != 1 ] && podman image exists "$BASE"; then
    log "image $BASE present"
    return 0
  fi
  local mirror security tmp
  mirror=$(host_debian_mirror debian)
  security=$(host_debian_mirror debian-security)
  tmp=$(mktemp -d)
  printf 'Types: deb\nURIs: %s\nSuites: trixie trixie-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: %s\nSuites: trixie-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" "$security" > "$tmp/sources"
  log "building $BASE from Debian trixie"
  # python3-pip/-venv for ansible-builder's pip steps; git for ansible-galaxy; the podman CLI
  # for the lab's connection (remote mode, through the host's socket: scripts/run-ee.sh).
  # shellcheck disable=SC2016
  mmdebstrap --variant=apt --format=tar \
    --include=python3,python3-pip,python3-venv,git,ca-certificates,podman,openssh-client,rsync,sshpass \
    --aptopt='Acquire::Languages "none"' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -f "$1/etc/apt/sources.list" "$1"/etc/apt/sources.list.d/*' \
    --customize-hook="upload $tmp/sources /etc/apt/sources.list.d/debian.sources" \
    --customize-hook='rm -f "$1/etc/machine-id"; : > "$1/etc/machine-id"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/cache/apt/archives/*.deb' \
    trixie - "$mirror trixie main" | \
    podman import \
      --change 'ENV PIP_BREAK_SYSTEM_PACKAGES=1' \
      --change 'CMD ["/bin/bash"]' \
      --message "gpufleet.nvidia execution environment base, Debian trixie" - "$BASE" >/dev/null
  rm -rf "$tmp"
}

# The build context's files (.build/ee/files): the three collection tarballs under fixed names
# (meta/ee/requirements.yml names them) and this host's CA bundle.
build_files() {
  local files=$out/files dist=$out/dist tarball
  rm -rf "$out"
  mkdir -p "$files" "$dist"
  PATH=$VENV/bin:$PATH ansible-galaxy collection build --output-path "$dist" . >/dev/null
  cp "$dist"/gpufleet-nvidia-"$version".tar.gz "$files/gpufleet-nvidia.tar.gz"
  mapfile -t deps < <("$VENV/bin/python" tests/package/local_source.py "$dist")
  for tarball in "${deps[@]}"; do
    case "$(basename "$tarball")" in
      kubernetes-core-*) cp "$tarball" "$files/kubernetes-core.tar.gz" ;;
      *) die "galaxy.yml declares a dependency meta/ee/requirements.yml does not name: $tarball" ;;
    esac
  done
  tarball=$("$VENV/bin/python" -c 'import sys; sys.path.insert(0, "tests/package"); import local_source as s
print(s.artifact(s.installed_copy("containers.podman"), sys.argv[1]))' "$dist")
  cp "$tarball" "$files/containers-podman.tar.gz"
  cp /etc/ssl/certs/ca-certificates.crt "$files/ca-certificates.crt"
}

ee_image() {
  log "building $EE with ansible-builder (meta/execution-environment.yml)"
  local def=$out/def
  mkdir -p "$def"
  cp meta/execution-environment.yml "$def/"
  mkdir -p "$def/.build/ee"
  cp -r meta bindep.txt "$def/"
  cp -r "$out/files" "$def/.build/ee/files"
  local dangling_before new_dangling
  dangling_before=$(podman images -q --no-trunc --filter dangling=true | sort -u)
  (cd "$def" && "$EE_VENV/bin/ansible-builder" build -f execution-environment.yml -c "$out/context" \
     --container-runtime podman -t "$EE" -v 2)
  drop_ca
  # The build's intermediate stages (base, galaxy, builder) and an EE it replaced under the same
  # tag stay behind untagged (about 1.1 GB): remove those this build left, no other image.
  new_dangling=$(comm -13 <(printf '%s\n' "$dangling_before") <(podman images -q --no-trunc --filter dangling=true | sort -u))
  if [ -n "$new_dangling" ]; then
    # shellcheck disable=SC2086
    podman rmi $new_dangling >/dev/null || log "could not remove the build's dangling images: $new_dangling"
  fi
  log "$EE: $(podman image inspect -f '{{.Size}}' "$EE" | awk '{printf "%.0f MB", $1/1e6}')"
  podman run --rm "$EE" ansible-galaxy collection list 2>/dev/null | grep -E '^(gpufleet|kubernetes|containers)\.'
}

stage "ee venv" ee_venv
stage "ee base image" base_image
stage "ee build files" build_files
stage "ee image" ee_image
print_stage_times
