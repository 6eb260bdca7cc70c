#!/usr/bin/env bash
# Run `molecule test` for every scenario under extensions/molecule/ (or those in $SCENARIOS).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
scenarios=${SCENARIOS:-$(for f in extensions/molecule/*/molecule.yml; do basename "$(dirname "$f")"; done)}
for s in $scenarios; do
  [ "$s" = shared ] && continue
  log "molecule scenario: $s"
  start=$(date +%s)
  molecule test -s "$s"
  log "molecule scenario $s passed in $(($(date +%s) - start))s"
done
