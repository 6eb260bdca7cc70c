#!/usr/bin/env bash
# The collection's main job on its built-in default (`make demo`): bring up the local lab — a
# Debian 12, a Debian 13 and an EL 9 node as containers with systemd (the EL 9 node a STAND-IN:
# scripts/build-el-images.sh) — prepare it as a fleet would be (containerd; stand-ins for NVIDIA's
# repositories), and run site.yml against it through every host layer. LAB_RESET=1 recreates the
# lab nodes from their images first.
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
stage "EL stand-in images (build-el-images.sh)" "$ROOT/scripts/build-el-images.sh"
export PATH="$VENV/bin:$PATH"
. "$ROOT/scripts/env.sh"

stage "lab nodes up" "$ROOT/scripts/lab.sh" up gpufleet-lab-debian12 gpufleet-lab-debian13 gpufleet-lab-el9
log "preparing the lab: containerd, and the stand-ins for NVIDIA's repositories (scripts/lab/prepare.yml)"
stage "lab prepared (containerd, stand-in repos)" "$ROOT/scripts/lab.sh" prepare inventory/lab
log "running site.yml against the lab (inventory/lab)"
# the roles' times at the end of the play (profile_roles); the report's summary printed as lines
ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_roles ANSIBLE_CALLBACK_RESULT_FORMAT=yaml \
  stage "site.yml (every host layer, validation, report)" ansible-playbook -i inventory/lab playbooks/site.yml "$@"
cat <<TXT

What this lab is, and what it lacks (the report says the same at its top):
  - three containers that share this machine's kernel, with containerd: Debian 12, Debian 13,
    and an EL 9 node that is a STAND-IN (scripts/build-el-images.sh, /etc/gpufleet-standin in
    it): a Debian 12 userland, Debian's containerd included (no containerd rpm), that says it
    is Rocky Linux 9.6 (its Debian dpkg database kept, as EPEL's dpkg leaves one on an EL host);
    its dnf 4 with versionlock and rpm are real;
  - no NVIDIA GPU: gpufleet_prepare_without_gpu makes the host layers prepare them anyway;
    Debian's driver is really installed and held, but no kernel module loads in a container;
  - no NVIDIA package repository: the toolkit comes from a local stand-in with test-double
    packages under the real names (scripts/lab/build-fake-nvidia-repo.sh); on the EL node the
    driver (the CUDA repository's nvidia-driver module, stream 550-dkms) and the toolkit come
    from local stand-ins of NVIDIA's rpm repositories, and dkms and the versionlock plugin from
    a stand-in of the distribution's (scripts/lab/build-fake-el-repos.sh): their packages are
    test doubles, empty but for scripts in place of nvidia-smi, nvidia-ctk and the runtime;
  - no Kubernetes cluster: the cluster layer is not applied, the cluster not checked.
The report: $ROOT/gpufleet-report/gpufleet-report.html (and .json, .txt, .junit.xml, .prom)
TXT
printf '\nStage timings:\n'
printf '%s\n' "${STAGES[@]}"
printf '  %-44s %5d s\n\n' "total" "$SECONDS"
# the report's summary: its first lines, up to the first node
sed '/^$/q' "$ROOT/gpufleet-report/gpufleet-report.txt"
