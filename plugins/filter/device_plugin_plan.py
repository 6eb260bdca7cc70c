# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: device_plugin_plan
short_description: Everything the device_plugin role applies, built from the inventory
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Builds the values of NVIDIA's C(nvidia-device-plugin) Helm chart (the standalone path, for
    nodes whose driver and toolkit are on the host), the C(nvidia) RuntimeClass and the namespace,
    and the node labels, from the GPU nodes (P(gpufleet.nvidia.gpu_fleet_nodes#filter)) and the
    role's settings; lists every setting that the chart would reject or that cannot work.
  - GPU sharing (time-slicing, MPS) and the MIG strategy are written as the device plugin's
    named configs; a node picks one through the label C(nvidia.com/device-plugin.config).
  - This is the code the C(gpufleet.nvidia.device_plugin) role runs; its unit tests render
    the example fleets through it.
positional: settings
options:
  _input:
    description: The output of P(gpufleet.nvidia.gpu_fleet_nodes#filter).
    type: dict
    required: true
  settings:
    description:
      - The role's variables without their C(device_plugin_) prefix, for example C(chart_version),
        C(namespace), C(runtime_class_name), C(sharing_configs); see the role's argument spec.
      - Secrets are not passed; C(registry_password_set) says whether a registry password is set.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan the device plugin
  ansible.builtin.set_fact:
    plan: >-
      {{ groups['gpufleet_gpu_nodes'] | gpufleet.nvidia.gpu_fleet_nodes(hostvars, 'device_plugin')
         | gpufleet.nvidia.device_plugin_plan({'chart_version': '0.20.0', 'chart_repo_url': 'https://nvidia.github.io/k8s-device-plugin',
             'namespace': 'nvidia-device-plugin', 'release_name': 'nvidia-device-plugin', 'wait_timeout': '10m',
             'runtime_class_name': 'nvidia', 'runtime_class_handler': 'nvidia', 'mig_strategy': 'none'}) }}
"""

RETURN = r"""
_value:
  description: The plan. Every key but C(problems) is V(null) when there are problems.
  type: dict
  contains:
    problems:
      description: One message per problem, naming the variable, the bad value and what is accepted.
      type: list
      elements: str
      sample:
        - >-
          device_plugin_sharing_configs.mps.strategy: 'mps' does not combine with MIG (device_plugin_mig_strategy is 'mixed';
          expected device_plugin_mig_strategy 'none' for a fleet that uses MPS, or strategy time-slicing)
    chart:
      description: The chart reference, repository URL and version for M(kubernetes.core.helm).
      type: dict
      sample: {ref: nvidia-device-plugin, repo_url: "https://nvidia.github.io/k8s-device-plugin", version: 0.20.0}
    chart_values:
      description: The chart values.
      type: dict
      sample: {config: {default: default, map: {default: "version: v1\n"}}, runtimeClassName: nvidia}
    objects:
      description: Objects applied before the chart (the namespace, the RuntimeClass).
      type: list
      elements: dict
      sample:
        - {apiVersion: node.k8s.io/v1, kind: RuntimeClass, metadata: {name: nvidia}, handler: nvidia}
    node_labels:
      description: Per node, the labels to set and the owned label values to remove when not asked for.
      type: list
      elements: dict
      sample:
        - {host: gpu-a, name: gpu-a, labels: {nvidia.com/gpu.present: "true"}, remove: {}}
    summary:
      description: What the inventory asks for.
      type: dict
      sample: {nodes: [gpu-a], runtime_class: nvidia}
"""

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.device_plugin import device_plugin_plan


class FilterModule(object):
    def filters(self):
        return {"device_plugin_plan": device_plugin_plan}
