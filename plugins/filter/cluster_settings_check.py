# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: cluster_settings_check
short_description: Refuse cluster settings that are not the same on every host
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - "site.yml's cluster plays run once, with the variables of the run's first host: a cluster setting set on a
    group or a host (not on C(all)) would make the release depend on which host C(--limit) puts first."
  - "Returns one problem per cluster setting (every C(gpu_operator_*), C(device_plugin_*), C(dra_driver_*)
    variable and the fleet-wide C(gpufleet_*) ones they default from: cluster layer, kubeconfig, context, helm
    binary, node group, images, registry, sharing and MIG strategy) whose value differs between the hosts,
    naming the hosts on each side. Passwords are never shown."
positional: hosts
options:
  _input:
    description: The variables of every host, normally C(hostvars).
    type: dict
    required: true
  hosts:
    description: The hosts to compare, normally C(groups['all']).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse cluster settings that differ between hosts
  ansible.builtin.assert:
    that: __problems | length == 0
    fail_msg: "{{ __problems }}"
  vars:
    __problems: "{{ hostvars | gpufleet.nvidia.cluster_settings_check(groups['all']) }}"
"""

RETURN = r"""
_value:
  description: The problems, one per setting.
  type: list
  elements: str
  sample:
    - >-
      cluster settings: gpu_operator_dcgm_exporter_enabled is not the same on every host of the inventory: (unset:
      the role's default) on 1 host (cpu-1); true on 2 hosts (gpu-a, gpu-b). ...
"""

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.settings import disagreements


class FilterModule(object):
    def filters(self):
        return {"cluster_settings_check": disagreements}
