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
ansible-galaxy collection install --no-deps -p "$out/collections" "$tarball"
ANSIBLE_COLLECTIONS_PATH=$out/collections ansible-playbook -i localhost, -c local tests/package/installed.yml
