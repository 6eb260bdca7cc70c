#!/usr/bin/env bash
# ansible-test sanity needs the collection at .../ansible_collections/<ns>/<name>: copy the
# tracked and new files there (not the links or caches) and run it in that copy. The copy lies
# outside this git work tree (ansible-test would otherwise list files from this repository's
# index, where the copy is ignored) and is made a git repository of its own.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
dest=${GPUFLEET_SANITY_DIR:-/var/tmp/gpufleet-sanity}/ansible_collections/gpufleet/nvidia
rm -rf "$dest"
mkdir -p "$dest"
git ls-files -z --cached --others --exclude-standard | rsync -a --from0 --files-from=- ./ "$dest/"
git -C "$dest" init -q
git -C "$dest" add -A
# ansible-test bootstraps pip in its virtual environments with a script it downloads from a
# host outside the reachable registries; give it the offline stand-in as its cached copy.
pip_version=$("$VENV/bin/python" -c 'from ansible_test._internal.python_requirements import get_venv_packages as g; from types import SimpleNamespace as N; print(g(N(version="3"))["pip"])')
cache=$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py
mkdir -p "$(dirname "$cache")"
# (copied, then moved into place: the support matrix runs several of these at once)
cp "$ROOT/scripts/ansible-test-get-pip.py" "$cache.$$"
mv -f "$cache.$$" "$cache"
cd "$dest"
# --venv: each test's requirements go into ansible-test's own virtual environments.
ansible-test sanity --venv --requirements --python "$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" --color "$@"
