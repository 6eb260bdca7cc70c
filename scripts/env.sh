# Environment for running the collection from its source tree (sourced).
# shellcheck shell=bash
# The repository root is the collection root; Ansible finds it as gpufleet.nvidia through a
# link under .cache/collections/ansible_collections/gpufleet/nvidia.
_gpufleet_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_gpufleet_link=$_gpufleet_root/.cache/collections/ansible_collections/gpufleet/nvidia
if [ ! -L "$_gpufleet_link" ]; then
  mkdir -p "$(dirname "$_gpufleet_link")"
  ln -sfn "$_gpufleet_root" "$_gpufleet_link"
fi
export ANSIBLE_COLLECTIONS_PATH=$_gpufleet_root/.cache/collections
export ANSIBLE_FORCE_COLOR=${ANSIBLE_FORCE_COLOR:-1}
export PY_COLORS=${PY_COLORS:-1}
unset _gpufleet_root _gpufleet_link
