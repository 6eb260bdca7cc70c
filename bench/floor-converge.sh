#!/usr/bin/env bash
# The floor of a first converge (bench/converge.py): what site.yml's host layers install and
# write on a fresh lab node, done directly by a shell script -- no discovery, no preflight, no
# validation, no report, no idempotence checks, one apt-get update and one apt-get install.
# Run inside a fresh node prepared by scripts/lab.sh prepare (containerd, the stand-in for
# NVIDIA's repository), through `podman exec`:
#   floor-converge.sh BUNDLE
# BUNDLE, written by the bench from a node of the same OS that site.yml converged:
#   files.tar  the files site.yml writes, with their final content: Debian's sources with contrib,
#              non-free and non-free-firmware added (nvidia_driver), the driver's apt pin, its
#              unattended-upgrades blacklist, the nouveau blacklist (nvidia_driver), the toolkit's
#              source and pin (container_toolkit), containerd's config.toml with its imports line
#              and the nvidia drop-in conf.d/99-nvidia.toml (container_runtime)
#   packages   name=version, one a line: the driver's packages and the toolkit's, at the versions
#              site.yml installed, and the runtime module's python3-tomlkit
#   holds      the packages site.yml holds
#   key_url    the toolkit repository's signing key (the lab's stand-in), downloaded as site.yml does
set -euo pipefail
bundle=${1:?usage: floor-converge.sh BUNDLE}
export DEBIAN_FRONTEND=noninteractive

# The files: apt sources with non-free, pins, blacklists, the toolkit's source, containerd's config.
tar -x -C / --no-same-owner -f "$bundle/files.tar"

# The toolkit repository's signing key, downloaded.
install -d -m 0755 /etc/apt/keyrings
python3 -c 'import sys, urllib.request; open(sys.argv[2], "wb").write(urllib.request.urlopen(sys.argv[1], timeout=30).read())' \
  "$(cat "$bundle/key_url")" /etc/apt/keyrings/nvidia-container-toolkit.asc
chmod 0644 /etc/apt/keyrings/nvidia-container-toolkit.asc

# The package lists, with non-free and the toolkit's repository.
apt-get update -q

# Every package at its version, in one transaction (the driver module's apt-get options).
mapfile -t packages < "$bundle/packages"
apt-get install -y -q --no-install-recommends --allow-downgrades --allow-change-held-packages \
  -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${packages[@]}"

# Held, so that no upgrade moves them.
mapfile -t holds < "$bundle/holds"
apt-mark hold "${holds[@]}" >/dev/null

# containerd picks the nvidia runtime up: restart it and wait until it answers.
systemctl restart containerd
for _ in $(seq 1 30); do
  if ctr --address /run/containerd/containerd.sock plugins ls >/dev/null 2>&1; then
    exit 0
  fi
  sleep 1
done
echo "containerd does not answer after its restart" >&2
exit 1
