# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_driver_moves
short_description: The nodes moving from the GPU Operator's driver to the host's
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - "Compares how a P(gpufleet.nvidia.gpu_operator_plan#filter) declares each node's driver (C(driver_sides))
    with what the cluster shows: a node declared prepared on the host (C(package), C(preinstalled)) on which the
    operator's driver serves now (the deployed release enables it and the node lacks
    C(nvidia.com/gpu.deploy.driver=false), or discovery found the driver container's root) moves."
  - "Each move carries the merge patch that labels the node out of the operator's driver, which site.yml applies
    before any host layer, then drains the node's GPU pods and waits for the operator's driver pod to leave."
positional: cluster_nodes, release
options:
  _input:
    description: The plan's C(driver_sides).
    type: list
    elements: dict
    required: true
  cluster_nodes:
    description: The C(resources) that M(kubernetes.core.k8s_info) returned for kind Node.
    type: list
    elements: dict
    required: true
  release:
    description: The deployed release as P(gpufleet.nvidia.helm_release#module) reports it (C(release)); null when none.
    type: dict
"""

EXAMPLES = r"""
- name: Find the nodes that move to the host's driver
  ansible.builtin.set_fact:
    moves: "{{ plan.driver_sides | gpufleet.nvidia.gpu_driver_moves(nodes.resources, checked.release) }}"
"""

RETURN = r"""
_value:
  description: One entry per moving node.
  type: list
  elements: dict
  sample:
    - host: gpu-a
      name: gpu-a
      why: the deployed release (revision 3) runs the operator's driver there
      patch:
        apiVersion: v1
        kind: Node
        metadata:
          name: gpu-a
          labels: {nvidia.com/gpu.deploy.driver: "false"}
          annotations: {gpufleet.nvidia/gpu-operator.labels: nvidia.com/gpu.deploy.driver}
"""

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.transitions import operator_moves


class FilterModule(object):
    def filters(self):
        return {"gpu_driver_moves": operator_moves}
