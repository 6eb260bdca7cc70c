# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: dra_validation
short_description: What NVIDIA's DRA driver publishes and allocates per node, against discovery
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Counts, per planned DRA node, the devices of type C(gpu) in the ResourceSlices of driver
    C(gpu.nvidia.com) (each pool's newest generation only) and compares the count with the GPUs
    discovery found on the node.
  - With the claims and pods of the claim check read back, says per node whether its ResourceClaim
    for one GPU was allocated to a pod that runs.
positional: nodes, checks, claims, pods
options:
  _input:
    description: The ResourceSlice objects (C(resources) of M(kubernetes.core.k8s_info)).
    type: list
    elements: dict
    required: true
  nodes:
    description: The plan's C(nodes) (P(gpufleet.nvidia.dra_plan#filter)).
    type: list
    elements: dict
    required: true
  checks:
    description: The plan's C(validation.checks).
    type: list
    elements: dict
  claims:
    description: The ResourceClaim objects of the check's namespace; V(null) when the claim check did not run.
    type: list
    elements: dict
  pods:
    description: The Pod objects of the check's namespace; V(null) when the claim check did not run.
    type: list
    elements: dict
"""

EXAMPLES = r"""
- name: Count what the driver publishes
  ansible.builtin.set_fact:
    found: "{{ slices.resources | gpufleet.nvidia.dra_validation(plan.nodes) }}"
"""

RETURN = r"""
_value:
  description: Per node what was found, and the failures.
  type: dict
  contains:
    nodes:
      description: One entry per node; C(status) is V(ok), V(missing) (nothing published) or V(mismatch).
      type: list
      elements: dict
      sample:
        - {name: gpu-a, host: gpu-a, published: 8, expected: 8, status: ok, text: "DRA: 8 devices published", message: "DRA: 8 devices published"}
    claims:
      description: Per node, what became of its claim; V({}) when the claim check did not run.
      type: dict
      sample: {gpu-a: "allocated, pod running"}
    failed:
      description: One message per node whose GPUs are not published as discovered, or whose claim failed.
      type: list
      elements: str
      sample: ["dra_driver: node gpu-b: 7 GPUs published, discovery found 8"]
"""

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.dra_validation import validation_result as dra_validation


class FilterModule(object):
    def filters(self):
        return {"dra_validation": dra_validation}
