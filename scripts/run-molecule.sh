#!/usr/bin/env bash
# Run `molecule test` for every scenario under extensions/molecule/ (or those in $SCENARIOS).
#
# $MOLECULE_JOBS scenarios run at once (default: the number of CPUs, at most 2): each has its
# own containers, ephemeral directory and stand-in repositories, and most of a scenario's time is
# spent waiting on its nodes (systemd, dpkg, rpm), so two of them share two CPUs well. Each
# scenario's output goes to tests/output/molecule/<scenario>.log and is printed whole when the
# scenario ends. After a failure no other scenario starts; those running are let finish.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
scenarios=${SCENARIOS:-$(for f in extensions/molecule/*/molecule.yml; do basename "$(dirname "$f")"; done)}
jobs=${MOLECULE_JOBS:-$(( $(nproc) < 2 ? $(nproc) : 2 ))}
logs=$ROOT/tests/output/molecule
mkdir -p "$logs"

run_scenario() {  # run_scenario NAME: molecule test, its time on the last line
  local start
  start=$(date +%s)
  molecule test -s "$1"
  echo "molecule scenario $1 passed in $(($(date +%s) - start))s"
}

declare -A running=()  # pid -> scenario
failed=()
finish_one() {  # wait for any running scenario, print its log, note a failure
  local pid rc=0 s
  wait -n -p pid "${!running[@]}" || rc=$?
  s=${running[$pid]}
  unset "running[$pid]"
  log "molecule scenario $s ended (its log: $logs/$s.log)"
  cat "$logs/$s.log" >&2
  if [ $rc -eq 0 ]; then log "$(tail -n1 "$logs/$s.log")"; else failed+=("$s (exit $rc)"); fi
}

for s in $scenarios; do
  [ "$s" = shared ] && continue
  while [ ${#running[@]} -ge "$jobs" ]; do finish_one; done
  [ ${#failed[@]} -eq 0 ] || break
  log "molecule scenario: $s"
  run_scenario "$s" > "$logs/$s.log" 2>&1 &
  running[$!]=$s
done
while [ ${#running[@]} -gt 0 ]; do finish_one; done
[ ${#failed[@]} -eq 0 ] || die "molecule: failed: ${failed[*]}"
