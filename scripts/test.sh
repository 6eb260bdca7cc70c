#!/usr/bin/env bash
# The collection's one test command (`make test`): sets up what is missing, then runs every
# check in order and stops at the first failure, printing how long each stage took.
#
#   scripts/test.sh                 everything
#   STAGES="unit molecule" scripts/test.sh      only some stages (setup always runs)
#   SCENARIOS="default" scripts/test.sh         only some molecule scenarios
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

STAGES=${STAGES:-"lint sanity unit property playbook docs matrix integration package molecule"}

stage "setup: host" "$ROOT/scripts/setup-host.sh"
stage "setup: venv" "$ROOT/scripts/setup-venv.sh"
stage "setup: images" "$ROOT/scripts/build-images.sh"
stage "setup: EL images" "$ROOT/scripts/build-el-images.sh"
stage "setup: containerd" "$ROOT/scripts/fetch-containerd.sh"
stage "setup: helm" "$ROOT/scripts/fetch-helm.sh"

export PATH="$VENV/bin:$PATH"
. "$ROOT/scripts/env.sh"

for s in $STAGES; do
  case $s in
    lint) stage "ansible-lint" "$ROOT/scripts/run-lint.sh" ;;
    sanity) stage "ansible-test sanity" "$ROOT/scripts/run-sanity.sh" ;;
    # Functions against captured fixtures, in process: fast.
    unit) stage "unit tests" python -m pytest -q tests/unit ;;
    # Hypothesis over the config editors, apt/dnf writers and gpu_facts' parsers: a fixed seed and
    # budget (profile ci; HYPOTHESIS_PROFILE=long for make property-long), docs/reliability.md.
    property) stage "property tests (${HYPOTHESIS_PROFILE:-ci})" python -m pytest -q -p no:cacheprovider tests/property ;;
    # The roles and playbooks run by ansible-playbook on local hosts (fake cluster, captured hosts):
    # one ansible-playbook per test, each on one CPU, so they run on every CPU (pytest-xdist).
    playbook) stage "playbook tests" python -m pytest -q -n auto tests/playbook ;;
    docs) stage "documentation" "$ROOT/scripts/build-docs.sh" ;;
    # The older ansible-core lines of the support matrix: sanity and unit tests on each.
    matrix) stage "support matrix" "$ROOT/scripts/run-matrix.sh" ;;
    # Against the cluster that KUBECONFIG names; each test says why it is skipped without one.
    integration) stage "integration tests" python -m pytest -m integration -rs tests/integration ;;
    package) stage "build and install" "$ROOT/scripts/run-package.sh" ;;
    molecule) stage "molecule" "$ROOT/scripts/run-molecule.sh" ;;
    *) die "unknown stage '$s' (known: lint sanity unit property playbook docs matrix integration package molecule)" ;;
  esac
done
print_stage_times
log "all stages passed"
