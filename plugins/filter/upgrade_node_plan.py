# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: upgrade_node_plan
short_description: Decide whether a GPU node is upgraded, and why
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Used by the C(gpufleet.nvidia.upgrade) role for each GPU node, from what its plan read. The
    result becomes the node's C(upgrade_result).
  - "A node is up to date - left alone, not even cordoned - when its validation's C(driver) and
    C(driver_version) checks are ok (a declared branch matches its releases), C(driver_installed)
    is ok or could not be checked, its validation did not fail, and, for a Kubernetes node, the
    node is Ready, advertises its GPUs (GPU count x sharing replicas of the resource, any number
    with MIG) and is not still cordoned by an earlier upgrade. Otherwise it is to be upgraded,
    and C(reason) says why."
  - A node whose C(nvidia_driver_method) is V(preinstalled) or V(operator) is not applicable - this
    collection installs no driver there.
  - Fails, naming the host, when the declared version is missing or not a driver version.
options:
  _input:
    description:
      - "The node: C(host), C(node) (its name in the cluster), C(method), C(version) (the declared
        driver), C(cluster) (the hosts are Kubernetes nodes), C(facts) (C(gpufleet_nvidia)),
        C(validation) (C(gpufleet_nvidia_validation)), C(drain) (M(gpufleet.nvidia.gpu_drain)'s
        check-mode result), C(resource) and C(replicas)."
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Decide what to do with the node
  ansible.builtin.set_fact:
    upgrade_result: "{{ node_input | gpufleet.nvidia.upgrade_node_plan }}"
"""

RETURN = r"""
_value:
  description: The node's plan.
  type: dict
  contains:
    state:
      description: C(planned) (to upgrade), C(up_to_date) or C(not_applicable).
      type: str
      sample: planned
    action:
      description: C(upgrade) or C(skip).
      type: str
      sample: upgrade
    reason:
      description: Why.
      type: str
      sample: "declared driver 580, loaded 570.86.15"
    node:
      description: The node's name in the cluster.
      type: str
      sample: gpu-a
    declared:
      description: The declared driver.
      type: str
      sample: "580"
    loaded:
      description: The loaded driver.
      type: str
      sample: 570.86.15
    expect:
      description: What the node must advertise once back - C(resource), C(count) (0 - any, with MIG), C(mig).
      type: dict
      sample: {resource: nvidia.com/gpu, count: 8, mig: false}
    pods:
      description: The GPU pods a drain would evict now.
      type: list
      elements: str
      sample: [ml/train-0]
    blocked:
      description: The pods a PodDisruptionBudget blocks now.
      type: list
      elements: dict
      sample: [{pod: ml/train-0, pdb: ml/train}]
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import plain
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.upgrade import batches as upgrade
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


def upgrade_node_plan(data):
    try:
        return upgrade.node_plan(plain(data or {}, unknown=str))
    except GpuFleetError as exc:
        raise AnsibleFilterError(exc.msg) from exc


class FilterModule(object):
    def filters(self):
        return {"upgrade_node_plan": upgrade_node_plan}
