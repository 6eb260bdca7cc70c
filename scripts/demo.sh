#!/usr/bin/env bash
# The collection's main job on its built-in default (`make demo`): bring up the local lab — a
# Debian 12 and a Debian 13 node as containers with systemd — prepare it as a fleet would be
# (containerd; a stand-in for NVIDIA's repository), and run site.yml against it through every
# host layer. LAB_RESET=1 recreates the lab nodes from their images first.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "demo.sh"
cd "$ROOT"
"$ROOT/scripts/setup-host.sh"
"$ROOT/scripts/setup-venv.sh"
"$ROOT/scripts/build-images.sh"
export PATH="$VENV/bin:$PATH"
. "$ROOT/scripts/env.sh"

"$ROOT/scripts/lab.sh" up gpufleet-lab-debian12 gpufleet-lab-debian13
log "preparing the lab: containerd, and the stand-in for NVIDIA's repository (scripts/lab/prepare.yml)"
"$ROOT/scripts/lab.sh" prepare inventory/lab
log "running site.yml against the lab (inventory/lab)"
ansible-playbook -i inventory/lab playbooks/site.yml "$@"
cat <<TXT

What this lab is, and what it lacks (the report says the same at its top):
  - two Debian containers (12 and 13) that share this machine's kernel, with containerd;
  - no NVIDIA GPU: gpufleet_prepare_without_gpu makes the host layers prepare them anyway;
    Debian's driver is really installed and held, but no kernel module loads in a container;
  - no NVIDIA package repository: the toolkit comes from a local stand-in with test-double
    packages under the real names (scripts/lab/build-fake-nvidia-repo.sh);
  - no Kubernetes cluster: the cluster layer is not applied, the cluster not checked.
The report: $ROOT/gpufleet-report/gpufleet-report.html (and .json)
TXT
