#!/usr/bin/env bash
# The collection's main job on its built-in default (`make demo`): bring up the local lab — a
# Debian 12 and a Debian 13 node as containers with systemd — prepare it as a fleet would be
# (containerd; a stand-in for NVIDIA's repository), and run site.yml against it through every
# host layer. LAB_RESET=1 recreates the lab nodes from their images first.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "demo.sh"
cd "$ROOT"
# Each stage's time, printed at the end with the report's summary.
STAGES=()
stage() {
  local name=$1 t0=$SECONDS
  shift
  "$@"
  STAGES+=("$(printf '  %-44s %5d s' "$name" $((SECONDS - t0)))")
}
stage "host packages (setup-host.sh)" "$ROOT/scripts/setup-host.sh"
stage "Python environment (setup-venv.sh)" "$ROOT/scripts/setup-venv.sh"
stage "lab images (build-images.sh)" "$ROOT/scripts/build-images.sh"
export PATH="$VENV/bin:$PATH"
. "$ROOT/scripts/env.sh"

stage "lab nodes up" "$ROOT/scripts/lab.sh" up gpufleet-lab-debian12 gpufleet-lab-debian13
log "preparing the lab: containerd, and the stand-in for NVIDIA's repository (scripts/lab/prepare.yml)"
stage "lab prepared (containerd, stand-in repository)" "$ROOT/scripts/lab.sh" prepare inventory/lab
log "running site.yml against the lab (inventory/lab)"
# the roles' times at the end of the play (profile_roles); the report's summary printed as lines
ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_roles ANSIBLE_CALLBACK_RESULT_FORMAT=yaml \
  stage "site.yml (every host layer, validation, report)" ansible-playbook -i inventory/lab playbooks/site.yml "$@"
cat <<TXT

What this lab is, and what it lacks (the report says the same at its top):
  - two Debian containers (12 and 13) that share this machine's kernel, with containerd;
  - no NVIDIA GPU: gpufleet_prepare_without_gpu makes the host layers prepare them anyway;
    Debian's driver is really installed and held, but no kernel module loads in a container;
  - no NVIDIA package repository: the toolkit comes from a local stand-in with test-double
    packages under the real names (scripts/lab/build-fake-nvidia-repo.sh);
  - no Kubernetes cluster: the cluster layer is not applied, the cluster not checked.
The report: $ROOT/gpufleet-report/gpufleet-report.html (and .json, .txt, .junit.xml, .prom)
TXT
printf '\nStage timings:\n'
printf '%s\n' "${STAGES[@]}"
printf '  %-44s %5d s\n\n' "total" "$SECONDS"
# the report's summary: its first lines, up to the first node
sed '/^$/q' "$ROOT/gpufleet-report/gpufleet-report.txt"
