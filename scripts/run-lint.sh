#!/usr/bin/env bash
# ansible-lint with the production profile (.ansible-lint); any violation fails.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
ansible-lint --profile production --strict
