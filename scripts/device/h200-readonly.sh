#!/usr/bin/env bash
# Read-only run of discovery, preflight, the driver's pre-installed check (fabric manager
# included), CDI generation (into a temporary directory, never /etc/cdi) and host validation
# (with a CUDA vector add built by the machine's nvcc) on a lent GPU machine; outputs into $OUT.
# Nothing on the machine is changed: no package, no service, no GPU setting.
#   OUT=/some/dir bash scripts/device/h200-readonly.sh
# Needs ansible-core importable (PYTHONPATH) and ansible-playbook on PATH.
set -uo pipefail
out=${OUT:?OUT must name the output directory}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$root/.cache/collections/ansible_collections/gpufleet" "$out"
ln -sfn "$root" "$root/.cache/collections/ansible_collections/gpufleet/nvidia"
export ANSIBLE_COLLECTIONS_PATH=$root/.cache/collections ANSIBLE_PIPELINING=1 ANSIBLE_FORCE_COLOR=0
export LC_ALL=C.UTF-8 PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:$PATH
cdi=$(mktemp -d)
run() {  # run NAME COMMAND...
  local name=$1
  shift
  { echo "\$ $*"; "$@"; echo "rc=$?"; } > "$out/$name.txt" 2>&1
}
a() { ansible localhost -c local -e ansible_python_interpreter="$(command -v python3)" "$@"; }

sums() { find /etc/apt /etc/cdi /etc/containerd /etc/systemd/system -type f 2>/dev/null | sort | xargs -r sha256sum; }
sums > "$out/checksums-before.txt"
run nvidia-smi nvidia-smi
run nvidia-smi-topo nvidia-smi topo -m
run gpu_facts a -m gpufleet.nvidia.gpu_facts
run driver-preinstalled a -m gpufleet.nvidia.nvidia_driver -a 'method=preinstalled version=580 fabric_manager=auto' --check --diff
run driver-preinstalled-fm-always a -m gpufleet.nvidia.nvidia_driver -a 'method=preinstalled version=580 fabric_manager=always' --check
run preflight a -m gpufleet.nvidia.preflight -a 'driver_version=580 driver_method=preinstalled cuda_versions=12.4,13.0 container_runtime=none'
run cdi_spec a -m gpufleet.nvidia.cdi_spec -a "output=$cdi/nvidia.yaml driver_root=/usr/local/nvidia" --diff
cp "$cdi/nvidia.yaml" "$out/cdi-nvidia.yaml" 2>/dev/null
run cdi_spec-again a -m gpufleet.nvidia.cdi_spec -a "output=$cdi/nvidia.yaml driver_root=/usr/local/nvidia"
run host_validate a -m gpufleet.nvidia.host_validate -a "driver_version=580 driver_method=preinstalled container_runtime=none cdi=enabled cdi_spec_dirs=$cdi"
run site ansible-playbook -i localhost, -c local -e ansible_python_interpreter="$(command -v python3)" \
  -e nvidia_driver_method=preinstalled -e nvidia_driver_version=580 -e container_toolkit_runtime=none \
  -e report_dir="$out/report" "$root/playbooks/site.yml" --tags discover,driver,validate
sums > "$out/checksums-after.txt"
if diff -q "$out/checksums-before.txt" "$out/checksums-after.txt" >/dev/null; then
  echo "unchanged: /etc/apt /etc/cdi /etc/containerd /etc/systemd/system" > "$out/checksums.txt"
else
  diff "$out/checksums-before.txt" "$out/checksums-after.txt" > "$out/checksums.txt"
fi
rm -rf "$cdi"
