# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_operator_plan
short_description: Everything the gpu_operator role applies, built from the inventory
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Builds the values of NVIDIA's C(gpu-operator) Helm chart, the objects applied beside it and
    the node labels, from the GPU nodes (P(gpufleet.nvidia.gpu_fleet_nodes#filter)) and the role's
    settings, and lists every setting that the chart would reject or that cannot work.
  - C(driver.enabled) and C(toolkit.enabled) follow from how the nodes were prepared. No node
    prepared by this collection, the operator deploys both; all prepared, neither; a mix, both
    are enabled and the prepared nodes are labelled C(nvidia.com/gpu.deploy.driver=false) and / or
    C(nvidia.com/gpu.deploy.container-toolkit=false).
  - The values are deterministic, so that M(kubernetes.core.helm) upgrades the release only when
    they or the chart version change.
  - This is the code the C(gpufleet.nvidia.gpu_operator) role runs; its unit tests render the
    example fleets through it.
positional: settings
options:
  _input:
    description: The output of P(gpufleet.nvidia.gpu_fleet_nodes#filter).
    type: dict
    required: true
  settings:
    description:
      - The role's variables without their C(gpu_operator_) prefix, for example C(chart_version),
        C(namespace), C(mig_strategy), C(sharing_configs); see the role's argument spec for each.
      - Secrets are not passed; C(registry_password_set) says whether a registry password is set.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan the GPU Operator
  ansible.builtin.set_fact:
    plan: >-
      {{ groups['gpufleet_gpu_nodes'] | gpufleet.nvidia.gpu_fleet_nodes(hostvars, 'gpu_operator')
         | gpufleet.nvidia.gpu_operator_plan({'chart_version': 'v25.10.0', 'chart_repo_url': 'https://helm.ngc.nvidia.com/nvidia',
             'namespace': 'gpu-operator', 'release_name': 'gpu-operator', 'wait_timeout': '15m',
             'mig_strategy': 'none', 'sharing_config_map': 'gpufleet-device-plugin-config'}) }}

- name: Stop when a setting cannot work
  ansible.builtin.assert:
    that: plan.problems | length == 0
    fail_msg: "{{ plan.problems }}"
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
        - "gpu_operator_sharing_configs.ts.replicas: 1 is not a number of replicas for time-slicing (expected an integer of at least 2)"
    chart:
      description: The chart reference, repository URL and version for M(kubernetes.core.helm).
      type: dict
      sample: {ref: gpu-operator, repo_url: "https://helm.ngc.nvidia.com/nvidia", version: v25.10.0}
    chart_values:
      description: The chart values.
      type: dict
      sample: {driver: {enabled: false}, toolkit: {enabled: false}, mig: {strategy: none}}
    objects:
      description: Objects applied before the chart (the namespace, a mig-parted ConfigMap).
      type: list
      elements: dict
      sample:
        - {apiVersion: v1, kind: Namespace, metadata: {name: gpu-operator, labels: {pod-security.kubernetes.io/enforce: privileged}}}
    node_labels:
      description: Per node, the labels to set and the owned label values to remove when not asked for.
      type: list
      elements: dict
      sample:
        - {host: gpu-a, name: gpu-a, labels: {nvidia.com/gpu.deploy.driver: "false"}, remove: {}}
    summary:
      description: What the inventory asks for, in words and names.
      type: dict
      sample: {driver: mixed, toolkit: mixed, container_runtime: containerd}
"""

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.gpu_operator import gpu_operator_plan


class FilterModule(object):
    def filters(self):
        return {"gpu_operator_plan": gpu_operator_plan}
