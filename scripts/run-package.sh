#!/usr/bin/env bash
# Build the collection tarball, install it with ansible-galaxy into an empty path, and run a
# playbook that calls its content by FQCN from the installed copy only.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
out=$ROOT/.build/package
rm -rf "$out"
mkdir -p "$out/dist" "$out/collections"
ansible-galaxy collection build --output-path "$out/dist" .
tarball=$(ls "$out"/dist/gpufleet-nvidia-*.tar.gz)
# Only the empty path is configured, so the source tree's own link (scripts/env.sh) cannot be
# mistaken for an installed copy.
export ANSIBLE_COLLECTIONS_PATH=$out/collections
ansible-galaxy collection install --no-deps -p "$out/collections" "$tarball"
test -f "$out/collections/ansible_collections/gpufleet/nvidia/MANIFEST.json"
ansible-playbook -i localhost, -c local tests/package/installed.yml
