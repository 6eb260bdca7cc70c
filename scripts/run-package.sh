#!/usr/bin/env bash
# Build the collection tarball, check what it holds, install it with ansible-galaxy into an
# empty path together with its declared dependencies from a local source (tarballs made from
# the `ansible` package's copies: Galaxy is not reachable here), and run a playbook that calls
# its content, and a dependency's, by FQCN from that installed copy only.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
out=$ROOT/.build/package
rm -rf "$out"
mkdir -p "$out/dist" "$out/deps" "$out/collections"
ansible-galaxy collection build --output-path "$out/dist" .
tarball=$(ls "$out"/dist/gpufleet-nvidia-*.tar.gz)
python tests/package/check_tarball.py "$tarball"
mapfile -t deps < <(python tests/package/local_source.py "$out/deps")
# Only the empty path is configured, and the collections of Python's path (the `ansible`
# package) are not scanned: what the playbook finds is what the install put there.
export ANSIBLE_COLLECTIONS_PATH=$out/collections ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false
# Without its dependencies the install must fail: galaxy.yml declares them.
if ansible-galaxy collection install --offline -p "$out/collections" "$tarball" >"$out/no-deps.log" 2>&1; then
  die "the collection installed without its dependencies (galaxy.yml declares none?): $out/no-deps.log"
fi
ansible-galaxy collection install --offline -p "$out/collections" "$tarball" "${deps[@]}"
test -f "$out/collections/ansible_collections/gpufleet/nvidia/MANIFEST.json"
test -f "$out/collections/ansible_collections/kubernetes/core/MANIFEST.json"
ansible-playbook -i localhost, -c local tests/package/installed.yml
