# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: dra_cluster_check
short_description: Why a cluster cannot take the planned DRA driver
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Checks a plan of P(gpufleet.nvidia.dra_plan#filter) against what the cluster says of itself, before
    anything is applied, and returns one message per problem.
  - The API server runs Kubernetes 1.34.2 or later and serves C(resource.k8s.io/v1) (DeviceClass,
    ResourceClaim, ResourceSlice).
  - No ClusterPolicy conflicts. In the GPUCluster path (GPU Operator 26.7) only the planned release's own
    ClusterPolicy may exist (the upgrade to C(clusterPolicy.deployCR=false) removes it); in the standalone
    path a ClusterPolicy must have its device plugin off.
  - On the GPUCluster path, no GPU node of the cluster (C(nvidia.com/gpu.present=true)) that the plan does not
    declare (the operator places the DRA kubelet plugin on every GPU node).
  - "The runtime each DRA node's kubelet reports (C(status.nodeInfo.containerRuntimeVersion)) injects CDI
    devices: CRI-O, containerd 2.x, or containerd 1.7 with C(container_toolkit_enable_cdi)."
positional: cluster_info, cluster_policies, cluster_nodes
options:
  _input:
    description: The plan, the output of P(gpufleet.nvidia.dra_plan#filter).
    type: dict
    required: true
  cluster_info:
    description: What M(kubernetes.core.k8s_cluster_info) returned.
    type: dict
    required: true
  cluster_policies:
    description: The ClusterPolicy objects (C(resources) of M(kubernetes.core.k8s_info)); V([]) where the CRD is not installed.
    type: list
    elements: dict
    required: true
  cluster_nodes:
    description: The Node objects (C(resources) of M(kubernetes.core.k8s_info)).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Check the cluster
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems }}"
  vars:
    problems: "{{ plan | gpufleet.nvidia.dra_cluster_check(info, policies.resources, nodes.resources) }}"
"""

RETURN = r"""
_value:
  description: One message per problem; V([]) when the cluster can take the plan (the plan's own problems when it has any).
  type: list
  elements: str
  sample:
    - "dra_driver: the cluster runs Kubernetes v1.33.2, and the DRA driver needs 1.34.2 or later (...)"
"""

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.dra_cluster import cluster_problems as dra_cluster_check


class FilterModule(object):
    def filters(self):
        return {"dra_cluster_check": dra_cluster_check}
