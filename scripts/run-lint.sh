#!/usr/bin/env bash
# ansible-lint with the production profile (.ansible-lint); any violation fails.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
ansible-lint --profile production --strict
# Every shell script of the repository (-x follows what they source).
mapfile -t scripts < <(git ls-files -co --exclude-standard '*.sh' .ci/run)
shellcheck -x -P "$ROOT/scripts" "${scripts[@]}"
