# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: dra_plan
short_description: Everything the dra_driver role applies, built from the inventory and discovery
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Builds the Helm chart, its values, the objects applied beside it and the node labels of NVIDIA's DRA
    driver for GPUs, from the GPU nodes (P(gpufleet.nvidia.gpu_fleet_nodes#filter)), their discovery
    facts and the role's settings, and lists every setting or node that cannot work.
  - "The path follows C(operator_version): GPU Operator 26.7 or later, the C(gpu-operator) chart with
    C(clusterPolicy.deployCR=false), C(gpuCluster.deployCR=true) and C(driver.enabled=false) (a GPUCluster
    manages the driver); older or V(''), the standalone C(dra-driver-nvidia-gpu) chart with
    C(resources.gpus.enabled=true), C(nvidiaDriverRoot) and the kubelet plugin on the nodes labelled
    C(nvidia.com/dra-kubelet-plugin=true)."
  - "Per node (inventory variables): C(gpufleet_gpu_allocation) (V(dra), the default, or V(device_plugin):
    left to the device plugin, which only the standalone path can keep apart); the driver version from
    discovery (C(ansible_facts.gpufleet_nvidia.driver.version)) or C(nvidia_driver_version), R580 or later;
    a runtime that injects CDI devices (CRI-O, containerd 2.x, or containerd 1.7 with
    C(container_toolkit_enable_cdi: true))."
  - This is the code the C(gpufleet.nvidia.dra_driver) role runs; its unit tests render the example
    fleets through it.
positional: settings, hostvars
options:
  _input:
    description: The output of P(gpufleet.nvidia.gpu_fleet_nodes#filter).
    type: dict
    required: true
  settings:
    description:
      - The role's variables without their C(dra_driver_) prefix, for example C(operator_version),
        C(chart_version), C(feature_gates), C(device_classes); see the role's argument spec for each.
      - Secrets are not passed; C(registry_password_set) says whether a registry password is set.
    type: dict
    required: true
  hostvars:
    description: The variables of every host, normally C(hostvars) (each node's discovery facts and DRA variables).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan the DRA driver
  ansible.builtin.set_fact:
    plan: >-
      {{ groups['gpu_nodes'] | gpufleet.nvidia.gpu_fleet_nodes(hostvars, 'dra_driver')
         | gpufleet.nvidia.dra_plan({'operator_version': 'v26.7.0', 'chart_repo_url': 'https://helm.ngc.nvidia.com/nvidia',
             'wait_timeout': '15m', 'namespace_pod_security': 'privileged'}, hostvars) }}
"""

RETURN = r"""
_value:
  description: The plan. Every key but C(problems) is V(null) when there are problems.
  type: dict
  contains:
    problems:
      description: One message per problem, naming the node or variable, the bad value and what is accepted.
      type: list
      elements: str
      sample:
        - "dra_driver: host 'gpu-old': driver 535.309.01 (from discovery) is older than the DRA driver needs (expected R580 or later: ...)"
    mode:
      description: V(gpucluster) (GPU Operator 26.7 or later) or V(standalone) (the dra-driver-nvidia-gpu chart).
      type: str
      sample: gpucluster
    chart:
      description: The chart reference, repository URL and version for the release.
      type: dict
      sample: {ref: gpu-operator, repo_url: "https://helm.ngc.nvidia.com/nvidia", version: v26.7.0}
    release:
      description: The release's name and namespace (the path's defaults unless set).
      type: dict
      sample: {name: gpu-operator, namespace: gpu-operator}
    chart_values:
      description: The chart values.
      type: dict
      sample: {clusterPolicy: {deployCR: false}, gpuCluster: {deployCR: true}, driver: {enabled: false}}
    objects:
      description: Objects applied before the chart (the namespace, the site's own DeviceClasses).
      type: list
      elements: dict
      sample:
        - {apiVersion: v1, kind: Namespace, metadata: {name: gpu-operator, labels: {pod-security.kubernetes.io/enforce: privileged}}}
    node_labels:
      description: Per node, the labels to set and the owned label values to remove when not asked for.
      type: list
      elements: dict
      sample:
        - {host: gpu-a, name: gpu-a, labels: {nvidia.com/dra-kubelet-plugin: "true"}, remove: {}}
    nodes:
      description: The DRA nodes, with the GPUs discovery counted (V(null) when not discovered) and their runtime.
      type: list
      elements: dict
      sample:
        - {host: gpu-a, name: gpu-a, gpus: 8, runtime: {name: containerd, version: "2.1.4", cdi_enabled: false}}
    summary:
      description: What the inventory asks for, in words and names.
      type: dict
      sample: {path: gpucluster, nodes: [gpu-a], device_plugin_nodes: [], device_classes: [gpu.nvidia.com, mig.nvidia.com]}
"""

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.dra import dra_plan


class FilterModule(object):
    def filters(self):
        return {"dra_plan": dra_plan}
