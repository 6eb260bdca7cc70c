# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_node_label_patches
short_description: Label patches that bring the cluster's GPU nodes to a plan
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Compares the node labels a plan of P(gpufleet.nvidia.gpu_operator_plan#filter) or
    P(gpufleet.nvidia.device_plugin_plan#filter) asks for with the labels the nodes have, and returns
    one patch per node that differs.
  - A patch sets a label, or removes (value V(null)) a label the role owns when the node no
    longer asks for it, for example C(nvidia.com/gpu.deploy.driver=false) on a node that is no
    longer prepared. Labels the role does not own are left alone.
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
    patches:
      description: One partial Node object per node whose labels differ; its labels are a merge patch.
      type: list
      elements: dict
      sample:
        - apiVersion: v1
          kind: Node
          metadata:
            name: gpu-a
            labels:
              nvidia.com/gpu.deploy.driver: "false"
              nvidia.com/device-plugin.config: null
    problems:
      description: Planned nodes that the cluster does not have.
      type: list
      elements: str
      sample:
        - "gpu_operator: host 'gpu-a': no node named 'gpu-a' in the cluster (expected gpufleet_node_name set to the node's name; nodes found: node-1)"
"""

from ansible_collections.gpufleet.nvidia.plugins.module_utils._k8s_values import node_label_patches


def gpu_node_label_patches(node_labels, cluster_nodes=None, role="gpufleet"):
    return node_label_patches(node_labels, cluster_nodes, role)


class FilterModule(object):
    def filters(self):
        return {"gpu_node_label_patches": gpu_node_label_patches}
