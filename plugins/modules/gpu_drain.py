#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_drain
short_description: Cordon a Kubernetes node, evict its GPU pods respecting PodDisruptionBudgets, uncordon it
version_added: 0.1.0
description:
  - "Runs on the control host (C(delegate_to: localhost)) with the Python kubernetes client, and
    brings one node of the cluster to O(state)."
  - "V(cordon) marks the node unschedulable and annotates it C(gpufleet.nvidia/cordoned) with
    O(reason), so that a later V(uncordon) knows the cordon was this collection's. A node that was
    already cordoned by someone else keeps that cordon and gets no annotation."
  - "V(drain) cordons the node, then evicts every pod on it that asks for one of O(resources) (in
    a container or an init container) through the Eviction API, so that PodDisruptionBudgets
    hold. An eviction a budget refuses (HTTP 429) is tried again every O(poll_interval) seconds;
    after O(timeout) seconds the module fails, naming the pods still there and the budgets that
    block them, and the node stays cordoned. DaemonSet pods, mirror pods (the kubelet's static
    pods) and finished pods are left alone and listed in RV(left). Pods that ask for no such
    resource are not touched."
  - "V(uncordon) removes this collection's cordon and annotation. A node cordoned by someone else
    (no annotation) stays cordoned unless O(force)."
  - "With O(wait_ready) or O(wait_allocatable), the module then waits until the node is Ready and
    advertises its GPUs (after a reboot, for instance), or fails after O(wait_timeout) seconds."
author:
  - gpufleet.nvidia maintainers (@gpufleet)
options:
  node:
    description: The node's name in the cluster.
    type: str
    required: true
  state:
    description: What the node must be.
    type: str
    choices: [cordon, drain, uncordon]
    default: drain
  resources:
    description:
      - The resources that make a pod a GPU pod, evicted by V(drain). A name
        (V(nvidia.com/gpu)), or a prefix ending with C(/) (V(nvidia.com/) takes
        C(nvidia.com/gpu), C(nvidia.com/gpu.shared) and the MIG devices C(nvidia.com/mig-*)).
    type: list
    elements: str
    default: [nvidia.com/]
  reason:
    description: The value of the C(gpufleet.nvidia/cordoned) annotation a V(cordon) or V(drain) writes.
    type: str
    default: gpufleet.nvidia
  force:
    description: With V(uncordon), also uncordon a node that someone else cordoned.
    type: bool
    default: false
  timeout:
    description: Seconds the evictions and the pods' termination may take before V(drain) fails.
    type: int
    default: 600
  grace_period:
    description: The pods' termination grace period in seconds; unset, each pod's own.
    type: int
  poll_interval:
    description: Seconds between two tries of a refused eviction, and between two reads while waiting.
    type: float
    default: 5
  wait_ready:
    description: After O(state), wait until the node's Ready condition is true.
    type: bool
    default: false
  wait_allocatable:
    description: After O(state), wait until the node advertises its GPUs.
    type: dict
    suboptions:
      resource:
        description: The resource the GPUs are advertised as.
        type: str
        default: nvidia.com/gpu
      count:
        description: How many must be allocatable (GPUs x sharing replicas); V(0) accepts any number above none.
        type: int
        default: 0
      mig:
        description: MIG is enabled on the node - C(nvidia.com/mig-*) devices count too, and any number above none is enough.
        type: bool
        default: false
  wait_timeout:
    description: Seconds O(wait_ready) and O(wait_allocatable) may take.
    type: int
    default: 600
  kubeconfig:
    description:
      - The kubeconfig, as a path or as a dict. The client is kubernetes.core's and finds the cluster
        as its modules do - unset, E(K8S_AUTH_KUBECONFIG) (or the other E(K8S_AUTH_*) variables, such
        as E(K8S_AUTH_HOST) and E(K8S_AUTH_API_KEY)), then the pod's service account when the module
        runs in the cluster, then E(KUBECONFIG), then C(~/.kube/config).
    type: raw
  context:
    description: The kubeconfig's context to use; unset, E(K8S_AUTH_CONTEXT), else the kubeconfig's current context.
    type: str
  request_timeout:
    description:
      - Seconds one request to the API server may take; also the time kubernetes.core's API discovery
        may take when the client is made.
    type: int
    default: 30
requirements:
  - kubernetes (the Python client) on the host the module runs on
  - the kubernetes.core collection (a dependency of this one)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying the target.
    support: full
    details:
      - Reads the node, its pods and the PodDisruptionBudgets of their namespaces, and says what
        would be cordoned and evicted, and which pods a budget would block right now. It waits for
        nothing.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details:
      - The node's cordon (C(unschedulable), C(cordoned_by)) and its GPU pods, before and after.
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
notes:
  - "The node's own pods are not deleted but evicted: a budget that never allows a disruption
    makes the drain fail after O(timeout). C(kubectl drain) would do the same."
seealso:
  - name: API-initiated eviction
    description: The Eviction API and how PodDisruptionBudgets answer it.
    link: https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/
  - name: Safely drain a node
    description: What kubectl drain evicts and what it leaves.
    link: https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/
  - module: kubernetes.core.k8s_drain
"""

EXAMPLES = r"""
- name: Cordon the node and evict its GPU pods, waiting up to 15 minutes for the budgets
  gpufleet.nvidia.gpu_drain:
    node: gpu-a
    state: drain
    timeout: 900
    reason: driver upgrade to 580
  delegate_to: localhost

- name: See which pods would be evicted, and which a budget blocks now
  gpufleet.nvidia.gpu_drain:
    node: gpu-a
  check_mode: true
  delegate_to: localhost
  register: plan

- name: Wait until the rebooted node is Ready and advertises its 8 GPUs again
  gpufleet.nvidia.gpu_drain:
    node: gpu-a
    state: cordon
    wait_ready: true
    wait_allocatable:
      resource: nvidia.com/gpu
      count: 8
    wait_timeout: 900
  delegate_to: localhost

- name: Uncordon the node
  gpufleet.nvidia.gpu_drain:
    node: gpu-a
    state: uncordon
    kubeconfig: ~/.kube/prod.yaml
  delegate_to: localhost
"""

RETURN = r"""
msg:
  description: What was done or would be done, in one line.
  returned: always
  type: str
  sample: "node gpu-a cordoned; 2 GPU pods evicted: ml/train-0, ml/train-1; left alone: gpu-operator/dcgm-x (DaemonSet pod)"
node:
  description:
    - The node after the run (in check mode, as it is now) - name, Ready and why not, cordon, the
      cordon's reason, allocatable C(nvidia.com/*).
  returned: always
  type: dict
  sample: {name: gpu-a, ready: true, ready_reason: kubelet is posting ready status, unschedulable: true,
           cordoned_by: driver upgrade to 580, allocatable: {nvidia.com/gpu: "8"}}
evicted:
  description: The GPU pods evicted (in check mode, those that would be), as namespace/name.
  returned: always
  type: list
  elements: str
  sample: [ml/train-0, ml/train-1]
blocked:
  description:
    - In check mode, the pods whose budget allows no disruption now. On a failed drain (in the
      failure's result), the pods whose eviction was still refused, the budget and its message.
  returned: always
  type: list
  elements: dict
  sample: [{pod: ml/train-1, pdb: ml/train, refusals: 12, msg: "The disruption budget train needs 1 healthy pods and has 1 currently"}]
left:
  description: The GPU pods left on the node, and why (DaemonSet, mirror or finished pods).
  returned: always
  type: list
  elements: dict
  sample: [{pod: gpu-operator/nvidia-dcgm-exporter-x, why: "DaemonSet pod: its controller runs it on every node, cordoned or not"}]
waited:
  description: Seconds spent waiting for the node to be Ready and advertise its GPUs.
  returned: always
  type: int
  sample: 42
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils.upgrade import drain, kube_api
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            node=dict(type="str", required=True),
            state=dict(type="str", choices=list(drain.STATES), default="drain"),
            resources=dict(type="list", elements="str", default=list(drain.DEFAULT_RESOURCES)),
            reason=dict(type="str", default="gpufleet.nvidia"),
            force=dict(type="bool", default=False),
            timeout=dict(type="int", default=600),
            grace_period=dict(type="int"),
            poll_interval=dict(type="float", default=5),
            wait_ready=dict(type="bool", default=False),
            wait_allocatable=dict(
                type="dict",
                options=dict(
                    resource=dict(type="str", default="nvidia.com/gpu"),
                    count=dict(type="int", default=0),
                    mig=dict(type="bool", default=False),
                ),
            ),
            wait_timeout=dict(type="int", default=600),
            kubeconfig=dict(type="raw"),
            context=dict(type="str"),
            request_timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    try:
        drain.check_params(module.params)
        client = kube_api.api_client(module.params["kubeconfig"], module.params["context"], module.params["request_timeout"])
        api = kube_api.KubeApi(client, module.params["request_timeout"])
        result = drain.run(api, module.params, check_mode=module.check_mode)
    except GpuFleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    diff = result.pop("diff")
    if module._diff:
        result["diff"] = dict(diff, before_header="node %s" % module.params["node"], after_header="node %s" % module.params["node"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
