#!/usr/bin/env bash
# The other lines of the support matrix: for each tests/matrix/ansible-*.txt, a virtual
# environment of its own (.cache/venvs/<name>, made once) and, with it, ansible-test sanity
# and the unit tests. The default line (requirements.txt, .venv) runs the whole suite in
# scripts/test.sh's other stages. $MATRIX lists the lines to run (default: all of them).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
MATRIX_RAN=()
known=$(for f in tests/matrix/ansible-*.txt; do basename "$f" .txt; done)
lines=${MATRIX:-$known}
for line in $lines; do
  requirements=tests/matrix/$line.txt
  [ -f "$requirements" ] || die "no $requirements (known: ${known//$'\n'/ })"
  venv=$ROOT/.cache/venvs/$line
  "$ROOT/scripts/setup-venv.sh" "$requirements" "$venv"
  core=$("$venv/bin/python" -c 'import ansible.release as r; print(r.__version__)')
  py=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  log "support matrix: ansible-core $core on Python $py: sanity and unit tests"
  start=$(date +%s)
  PATH="$venv/bin:$PATH" GPUFLEET_VENV=$venv "$ROOT/scripts/run-sanity.sh"
  PATH="$venv/bin:$PATH" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/unit
  MATRIX_RAN+=("ansible-core $core (Python $py): sanity unit, $(($(date +%s) - start))s")
done
log "support matrix"
printf '  %s\n' "${MATRIX_RAN[@]}" >&2
