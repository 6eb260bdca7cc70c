# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_node_label_patches
short_description: Label patches that bring the cluster's GPU nodes to a plan
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - "Compares the node labels a plan of P(gpufleet.nvidia.gpu_operator_plan#filter) or
    P(gpufleet.nvidia.device_plugin_plan#filter) asks for with the labels the nodes have, and returns
    the merge patches that bring them there, in two lists: C(before_chart) sets or changes labels,
    C(after_chart) removes them (value V(null))."
  - Each labelled node records the label keys the role manages there in the annotation
    C(gpufleet.nvidia/<role>.labels) (C(gpu-operator.labels), C(device-plugin.labels)). A recorded key the plan no
    longer asks for is removed, C(nvidia.com/mig.config) included, and so is every recorded key of a
    cluster node that is no longer in the plan. Labels the role never set are left alone; nodes
    labelled before the annotation existed are recognised by the label values the role owns.
  - "Apply C(before_chart) before the chart and C(after_chart) after it: a label that keeps the
    operator's containers off a node is then never missing while the chart would deploy them there."
  - A planned node that the cluster does not have is a problem.
positional: cluster_nodes, role
options:
  _input:
    description: The C(node_labels) of a plan.
    type: list
    elements: dict
    required: true
  cluster_nodes:
    description:
      - The C(resources) that M(kubernetes.core.k8s_info) returned for kind Node.
      - V(null) renders the patches against nodes without labels (no cluster needed).
    type: list
    elements: dict
  role:
    description: The name that starts every problem message.
    type: str
    default: gpufleet
"""

EXAMPLES = r"""
- name: Compute the label patches
  ansible.builtin.set_fact:
    patches: "{{ plan.node_labels | gpufleet.nvidia.gpu_node_label_patches(nodes.resources, 'gpu_operator') }}"
"""

RETURN = r"""
_value:
  description: The patches and the problems.
  type: dict
  contains:
    before_chart:
      description: One partial Node object per node that gains or changes a label; its labels and annotations are a merge patch.
      type: list
      elements: dict
      sample:
        - apiVersion: v1
          kind: Node
          metadata:
            name: gpu-a
            labels: {nvidia.com/gpu.deploy.driver: "false"}
            annotations: {gpufleet.nvidia/gpu-operator.labels: nvidia.com/gpu.deploy.driver}
    after_chart:
      description: One partial Node object per node that loses a label the role manages.
      type: list
      elements: dict
      sample:
        - apiVersion: v1
          kind: Node
          metadata:
            name: gpu-b
            labels: {nvidia.com/mig.config: null}
            annotations: {gpufleet.nvidia/gpu-operator.labels: null}
    patches:
      description: C(before_chart) and then C(after_chart).
      type: list
      elements: dict
    annotation:
      description: The annotation that records the managed label keys.
      type: str
      sample: gpufleet.nvidia/gpu-operator.labels
    problems:
      description: Planned nodes that the cluster does not have.
      type: list
      elements: str
      sample:
        - "gpu_operator: host 'gpu-a': no node named 'gpu-a' in the cluster (expected gpufleet_node_name set to the node's name; nodes found: node-1)"
"""

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.node_labels import label_changes


def gpu_node_label_patches(node_labels, cluster_nodes=None, role="gpufleet"):
    return label_changes(node_labels, cluster_nodes, role, role)


class FilterModule(object):
    def filters(self):
        return {"gpu_node_label_patches": gpu_node_label_patches}
