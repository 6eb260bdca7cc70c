#!/usr/bin/env bash
# ansible-lint with the production profile (.ansible-lint); any violation fails.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
# ansible-lint also looks in ~/.ansible/collections: a copy of the collection installed there (by
# ansible-galaxy, outside these tests) would shadow the checkout and its new modules.
export ANSIBLE_HOME=$ROOT/.cache/ansible-home-lint
ansible-lint --profile production --strict
# Every shell script of the repository (-x follows what they source).
mapfile -t scripts < <(git ls-files -co --exclude-standard '*.sh' .ci/run)
shellcheck -x -P "$ROOT/scripts" "${scripts[@]}"
