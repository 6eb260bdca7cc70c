#!/usr/bin/env bash
# The other lines of the support matrix: for each tests/matrix/ansible-*.txt, a virtual
# environment of its own (.cache/venvs/<name>, made once) and, with it, ansible-test sanity
# and the unit tests. The default line (requirements.txt, .venv) runs the whole suite in
# scripts/test.sh's other stages. $MATRIX lists the lines to run (default: all of them).
#
# The lines run side by side, each in its own sanity copy (/var/tmp/gpufleet-sanity/<line>) and
# ansible-test's own virtual environments (one per ansible-core and Python version): ansible-test
# runs one sanity test at a time, so two lines keep two CPUs busy. Each line's output goes to
# tests/output/matrix/<line>.log and is printed whole once the line ends; a failed line fails the
# stage after the others end.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
known=$(for f in tests/matrix/ansible-*.txt; do basename "$f" .txt; done)
lines=${MATRIX:-$known}
logs=$ROOT/tests/output/matrix
mkdir -p "$logs"

run_line() {  # run_line LINE: the line's venv, sanity and unit tests; its summary on the last line
  local line=$1 venv=$ROOT/.cache/venvs/$1 core py start
  "$ROOT/scripts/setup-venv.sh" "tests/matrix/$line.txt" "$venv"
  core=$("$venv/bin/python" -c 'import ansible.release as r; print(r.__version__)')
  py=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  log "support matrix: ansible-core $core on Python $py: sanity and unit tests"
  start=$(date +%s)
  PATH="$venv/bin:$PATH" GPUFLEET_VENV=$venv GPUFLEET_SANITY_DIR=/var/tmp/gpufleet-sanity/$line \
    "$ROOT/scripts/run-sanity.sh"
  PATH="$venv/bin:$PATH" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/unit
  echo "ansible-core $core (Python $py): sanity unit, $(($(date +%s) - start))s"
}

declare -A pid
for line in $lines; do
  [ -f "tests/matrix/$line.txt" ] || die "no tests/matrix/$line.txt (known: ${known//$'\n'/ })"
  run_line "$line" > "$logs/$line.log" 2>&1 &
  pid[$line]=$!
done
failed=() summary=()
for line in $lines; do
  rc=0
  wait "${pid[$line]}" || rc=$?
  log "support matrix: line $line (its log: $logs/$line.log)"
  cat "$logs/$line.log" >&2
  if [ $rc -eq 0 ]; then summary+=("$(tail -n1 "$logs/$line.log")"); else failed+=("$line (exit $rc)"); fi
done
log "support matrix"
printf '  %s\n' "${summary[@]}" >&2
[ ${#failed[@]} -eq 0 ] || die "support matrix: failed: ${failed[*]}"
