# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: dcgm_exporter_plan
short_description: NVIDIA's DCGM exporter release of the device-plugin path, built from the role's settings
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Builds the values of NVIDIA's C(dcgm-exporter) Helm chart for the C(gpufleet.nvidia.device_plugin) role's
    second release - every GPU node (C(nvidia.com/gpu.present=true)), the plugin's RuntimeClass, the exporter's DRA mode when asked - and lists every
    setting that cannot work.
  - The plan has the shape of P(gpufleet.nvidia.device_plugin_plan#filter)'s, for the internal helm_release role;
    it labels no node.
options:
  _input:
    description:
      - The exporter's variables without their C(device_plugin_dcgm_exporter_) prefix (C(enabled), C(chart_version),
        C(chart_repo_url), C(chart_path), C(release_name), C(dra), C(service_monitor), C(image_repository),
        C(values_overrides)), and the device plugin's C(namespace), C(namespace_pod_security), C(runtime_class_name),
        C(image_registry), C(image_pull_secrets), C(registry_server), C(registry_username), C(registry_password_set),
        C(registry_secret_name).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan the DCGM exporter
  ansible.builtin.set_fact:
    exporter: >-
      {{ {'chart_version': '4.8.2', 'chart_repo_url': 'https://nvidia.github.io/dcgm-exporter/helm-charts',
          'release_name': 'dcgm-exporter', 'namespace': 'nvidia-device-plugin', 'runtime_class_name': 'nvidia', 'dra': false}
         | gpufleet.nvidia.dcgm_exporter_plan }}
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
      sample: ["device_plugin_dcgm_exporter_dra: 'maybe' is not a boolean (expected true or false)"]
    chart:
      description: The chart reference, repository URL and version.
      type: dict
      sample: {ref: dcgm-exporter, repo_url: "https://nvidia.github.io/dcgm-exporter/helm-charts", version: 4.8.2, check_values: true}
    chart_values:
      description: The chart values.
      type: dict
      sample: {nodeSelector: {nvidia.com/gpu.present: "true"}, kubernetesDRA: {enabled: false}, runtimeClassName: nvidia}
    objects:
      description: The namespace, applied before the chart.
      type: list
      elements: dict
      sample: [{apiVersion: v1, kind: Namespace, metadata: {name: nvidia-device-plugin}}]
    node_labels:
      description: Always empty (the device plugin's release owns the labels).
      type: list
      elements: dict
      sample: []
    held:
      description: Always empty.
      type: list
      elements: str
      sample: []
    summary:
      description: What the settings ask for.
      type: dict
      sample: {enabled: true, release: dcgm-exporter, chart: 4.8.2, dra: false, nodes: nvidia.com/gpu.present=true}
"""

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.monitoring import dcgm_exporter_plan


class FilterModule(object):
    def filters(self):
        return {"dcgm_exporter_plan": dcgm_exporter_plan}
