# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: validate_cluster
short_description: Judge the cluster's side of the GPU nodes from what the validate role read
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Used by the C(gpufleet.nvidia.validate) role. Takes the validated hosts, their variables and
    what the role read from the cluster, and returns the cluster verdict - per inventory GPU host
    its node's checks (in the cluster and Ready, allocatable C(nvidia.com/gpu) equal to the GPU
    count times the sharing replicas, expected labels, the stack's pods on it ready, the CUDA
    vector-add pod passed), the state of the GPU Operator's or device plugin's pods, and the
    vector-add pods to run.
  - "Per host it reads C(gpufleet_nvidia) (the facts) and C(gpufleet_nvidia_validation), whose
    C(cluster_expect) says the node name, the replicas, the GPU resource, the sharing config and
    the expected labels."
  - "A host on the DRA layer (C(gpufleet_cluster_layer=dra), or with the dra_driver role's
    C(dra_driver_node)) advertises no C(nvidia.com/gpu): instead of C(allocatable) its node gets the
    C(dra) check, the dra_driver role's verdict of it (its GPUs published in ResourceSlices, its
    claim allocated), not checked where that role did not run on it; it gets no vector-add pod."
  - When the cluster could not be read, every node is reported as not checked with the reason
    (no Python kubernetes client, no kubeconfig, or the cluster does not answer).
positional: hostvars, cluster
options:
  _input:
    description: The inventory names of the validated hosts (C(ansible_play_hosts)).
    type: list
    elements: str
    required: true
  hostvars:
    description: The variables of every host, normally C(hostvars).
    type: dict
    required: true
  cluster:
    description:
      - What was read - C(enabled), C(skip_reason), C(error) (the failure of the first read),
        C(kubeconfig) (C(path), C(exists), C(in_cluster)), C(nodes) (Node objects), C(stack),
        C(namespaces) and C(pods) (per stack), C(check_mode), and C(cuda) (C(mode), C(image),
        C(namespace), C(runtime_class), C(resource), C(pull_secrets), C(timeout), and once the
        pods ran C(ran), C(pods), C(logs) by pod name and C(error)), and C(labels) (C(enabled),
        C(inventory) - every inventory host, whose nodes outside the play keep their labels -,
        C(today) - the date the driver branches' end of life is judged on -, and C(error) once a
        patch failed).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Judge the cluster
  ansible.builtin.set_fact:
    verdict: "{{ ansible_play_hosts | gpufleet.nvidia.validate_cluster(hostvars, cluster_read) }}"
"""

RETURN = r"""
_value:
  description: The cluster verdict.
  type: dict
  contains:
    checked:
      description: Whether the cluster was read.
      type: bool
      sample: false
    reason:
      description: Why not.
      type: str
      sample: "no cluster: no kubeconfig (/root/.kube/config does not exist; set validate_kubeconfig, gpufleet_kubeconfig or K8S_AUTH_KUBECONFIG)"
    nodes:
      description: Per inventory host, its node's C(status), C(checks), C(allocatable), C(failed), C(drifted), C(not_checked).
      type: dict
      sample: {gpu-a: {node: gpu-a, found: true, status: ok, allocatable: {nvidia.com/gpu: "4"}}}
    stack:
      description: The GPU Operator's or device plugin's pods, how many are ready, the others and why.
      type: dict
      sample: {name: gpu_operator, namespace: gpu-operator, status: ok, total: 12, ready: 12, not_ready: []}
    cuda_pod:
      description: The vector-add pods' verdict.
      type: dict
      sample: {status: ok, msg: "CUDA vectorAdd pod (...): 1 of 1 passed", pods: []}
    labels:
      description:
        - With C(cluster.labels.enabled), the labels each GPU node gets by host
          (C(gpufleet.nvidia/driver-branch), C(gpufleet.nvidia/driver-eol),
          C(gpufleet.nvidia/driver-flavor), C(gpufleet.nvidia/security-floor), C(gpufleet.nvidia/validation)), the merge C(patches)
          (Node objects) that set them and remove them from nodes no longer GPU nodes of the
          inventory, and the C(annotation) that records them on each node.
      type: dict
      sample: {enabled: true, annotation: gpufleet.nvidia/validate.labels, error: null, patches: [],
               nodes: {gpu-a: {gpufleet.nvidia/driver-branch: "580", gpufleet.nvidia/driver-eol: 2028-06,
                               gpufleet.nvidia/driver-flavor: open, gpufleet.nvidia/security-floor: "5861",
                               gpufleet.nvidia/validation: ok}}}
    cuda_pods:
      description: The vector-add pods to run (Pod objects).
      type: list
      elements: dict
      sample: []
    failed:
      description: Fleet-level failures (pods not ready on nodes outside the inventory, a stack not deployed).
      type: list
      elements: str
      sample: []
    not_checked:
      description: What was not checked in the cluster, and why.
      type: list
      elements: str
      sample: ["CUDA pod: not run in check mode (it would create a pod in the cluster)"]
"""

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import plain
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.common import hostvars as hostvars_reader
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate import cluster as cluster_validate

_KEYS = ("gpufleet_nvidia", "gpufleet_nvidia_validation", "dra_driver_node", "gpufleet_cluster_layer")


def validate_cluster(hosts, hostvars, cluster):
    hosts = [str(h) for h in hosts or []]
    data = hostvars_reader.host_data(hosts, hostvars, _KEYS)
    cluster = plain(cluster or {}, unknown=str)
    labels = cluster.get("labels")
    if isinstance(labels, dict) and labels.get("enabled"):
        outside = [str(h) for h in labels.get("inventory") or [] if str(h) not in set(hosts)]
        names = hostvars_reader.host_data(outside, hostvars, ("gpufleet_node_name",))
        labels["kept_nodes"] = sorted(str((names.get(h) or {}).get("gpufleet_node_name") or h) for h in outside)
    return cluster_validate.evaluate(hosts, data, cluster)


class FilterModule(object):
    def filters(self):
        return {"validate_cluster": validate_cluster}
