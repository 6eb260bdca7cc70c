"""Tests of plugin_utils/validate/cluster.py: the cluster verdict from what the role read (objects: cluster_objects.py)."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate import cluster as C, nodes, pods
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate import cuda as CUDA
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.plugin_utils.validate.cluster_objects import (
    H200,
    NOGPU,
    OPERATOR_PODS,
    hostvars,
    node,
    pod,
    read,
)


# --- no cluster ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cluster, reason",
    [
        (read(enabled=False), "cluster checks turned off (validate_cluster false)"),
        (read(client=False), "no cluster: the Python kubernetes client is not installed on the control host "
                             "(install it into the Python that runs Ansible: pip install kubernetes)"),
        (read(kubeconfig={"path": "/root/.kube/config", "exists": False, "in_cluster": False}),
         "no cluster: no kubeconfig (/root/.kube/config does not exist; set validate_kubeconfig, gpufleet_kubeconfig or K8S_AUTH_KUBECONFIG)"),
        (read(error="Failed to import the required Python library (kubernetes) on localhost's Python /usr/bin/python3."),
         "no cluster: the Python kubernetes client is not installed on the control host "
         "(install it into the Python that runs Ansible: pip install kubernetes)"),
        (read(error="Max retries exceeded with url: /api/v1/nodes (Caused by NewConnectionError('Connection refused'))"),
         "no cluster: the cluster in /root/.kube/config does not answer (Max retries exceeded with url: /api/v1/nodes "
         "(Caused by NewConnectionError('Connection refused')))"),
    ],
)
def test_no_cluster_says_why(cluster, reason):
    result = C.evaluate(["gpu-a", "cpu-1"], hostvars(**{"gpu-a": H200, "cpu-1": NOGPU}), cluster)
    assert result["checked"] is False
    assert result["reason"] == reason
    assert result["not_checked"] == [reason]
    assert result["failed"] == []
    assert list(result["nodes"]) == ["gpu-a"]  # only GPU hosts get a node verdict
    assert result["nodes"]["gpu-a"]["status"] == "skipped"
    assert result["nodes"]["gpu-a"]["not_checked"] == [reason]
    assert result["cuda_pods"] == []


def test_required_cluster_that_cannot_be_read_fails_the_fleet():
    result = C.evaluate(["gpu-a"], hostvars(**{"gpu-a": H200}), read(client=False, required=True))
    assert result["failed"] == [result["reason"] + " (validate_cluster_required)"]


# --- nodes --------------------------------------------------------------------------------------


def test_healthy_operator_node_and_the_cuda_pod_plan():
    result = C.evaluate(["gpu-a"], hostvars(**{"gpu-a": H200}), read([node("gpu-a"), node("cpu-1", allocatable=False)], {"gpu_operator": OPERATOR_PODS}))
    assert result["checked"] is True and result["reason"] == ""
    verdict = result["nodes"]["gpu-a"]
    assert verdict["status"] == "ok", verdict
    assert [(c["name"], c["status"]) for c in verdict["checks"]] == [
        ("node", "ok"), ("allocatable", "ok"), ("labels", "ok"), ("pods", "ok"),
    ]
    assert verdict["allocatable"] == {"nvidia.com/gpu": "1"}
    assert result["stack"]["msg"] == "GPU Operator: 4 of 4 pods ready or completed in namespace gpu-operator"
    pods = result["cuda_pods"]
    assert len(pods) == 1
    assert pods[0] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "gpufleet-vectoradd-gpu-a",
            "namespace": "default",
            "labels": {"app.kubernetes.io/name": "cuda-vectoradd", "app.kubernetes.io/managed-by": "gpufleet.nvidia"},
            "annotations": {"gpufleet.nvidia/inventory-host": "gpu-a"},
        },
        "spec": {
            "restartPolicy": "Never",
            "nodeName": "gpu-a",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "cuda-vectoradd", "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
                            "resources": {"limits": {"nvidia.com/gpu": 1}}}],
            "runtimeClassName": "nvidia",
        },
    }
    assert result["cuda_pod"]["msg"] == "CUDA pod: planned on gpu-a"


@pytest.mark.parametrize(
    "the_node, expect, msg",
    [
        (node("gpu-a", allocatable=False), {}, "node gpu-a advertises no nvidia.com/gpu (expected 1): the device plugin is not running there, or found no GPU"),
        (node("gpu-a", allocatable=0), {}, "node gpu-a: nvidia.com/gpu allocatable is 0, expected 1 (1 GPUs x 1 replicas)"),
        # time-slicing declared but not applied: the node still advertises one GPU
        (node("gpu-a", labels={"nvidia.com/device-plugin.config": "ts-4"}), {"replicas": 4, "sharing_config": "ts-4"},
         "node gpu-a: nvidia.com/gpu allocatable is 1, expected 4 (1 GPUs x 4 replicas)"),
    ],
)
def test_allocatable_problems(the_node, expect, msg):
    result = C.evaluate(["gpu-a"], hostvars(**{"gpu-a": (H200[0], expect)}), read([the_node]))
    verdict = result["nodes"]["gpu-a"]
    assert verdict["status"] == "failed"
    assert msg in verdict["failed"]


def test_time_slicing_that_took_effect():
    the_node = node("gpu-a", allocatable=4, labels={"nvidia.com/gpu.replicas": "4", "nvidia.com/device-plugin.config": "ts-4",
                                                    "nvidia.com/gpu.product": "NVIDIA-H200-SHARED"})
    result = C.evaluate(["gpu-a"], hostvars(**{"gpu-a": (H200[0], {"replicas": 4, "sharing_config": "ts-4"})}), read([the_node]))
    assert result["nodes"]["gpu-a"]["status"] == "ok", result["nodes"]["gpu-a"]
    assert result["nodes"]["gpu-a"]["checks"][1]["msg"] == "node gpu-a: 4 nvidia.com/gpu allocatable (1 GPUs x 4 replicas)"


def test_renamed_shared_resource():
    the_node = node("gpu-a", allocatable=False, extra={"nvidia.com/gpu.shared": "8"}, labels={"nvidia.com/gpu.replicas": "8"})
    expect = {"replicas": 8, "resource": "nvidia.com/gpu.shared"}
    result = C.evaluate(["gpu-a"], hostvars(**{"gpu-a": (H200[0], expect)}), read([the_node]))
    assert result["nodes"]["gpu-a"]["status"] == "ok", result["nodes"]["gpu-a"]
    assert result["cuda_pods"][0]["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu.shared": 1}}


def test_labels():
    the_node = node(
        "gpu-a",
        labels={"nvidia.com/gpu.present": None, "nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "1"},
    )
    expect = {"replicas": 1, "sharing_config": "ts-4"}
    result = C.evaluate(["gpu-a"], hostvars(**{"gpu-a": (H200[0], expect)}), read([the_node]))
    labels = [c for c in result["nodes"]["gpu-a"]["checks"] if c["name"] == "labels"][0]
    assert labels["msg"] == (
        "node gpu-a: label nvidia.com/gpu.present is missing; label nvidia.com/gpu.count is '2', the node has 1 GPUs; "
        "label nvidia.com/device-plugin.config is None, expected 'ts-4': the node runs another sharing config"
    )


def test_mig_nodes_are_checked_for_any_allocatable_device():
    hv = hostvars(**{"gpu-m": ("rocky9-h100x8-rpm-rke2", {})})
    assert any(g["mig_mode_current"] == "enabled" for g in hv["gpu-m"]["gpufleet_nvidia"]["driver"]["nvidia_smi"]["gpus"])
    the_node = node("gpu-m", gpus=8, allocatable=False, extra={"nvidia.com/mig-1g.10gb": "7"}, labels={"nvidia.com/gpu.count": "7"})
    result = C.evaluate(["gpu-m"], hv, read([the_node]))
    verdict = result["nodes"]["gpu-m"]
    assert verdict["status"] == "ok", verdict
    assert "allocatable count: not compared with the GPU count on MIG nodes" in verdict["not_checked"]


def test_node_missing_or_not_ready():
    result = C.evaluate(
        ["gpu-a", "gpu-b"],
        hostvars(**{"gpu-a": H200, "gpu-b": ("ubuntu2404-h200-preinstalled", {"node": "gpu-b.example.com"})}),
        read([node("gpu-a", ready=False), node("gpu-b")]),
    )
    assert result["nodes"]["gpu-a"]["failed"][0] == "node gpu-a is not Ready (container runtime network not ready)"
    assert result["nodes"]["gpu-b"]["failed"] == ["node gpu-b.example.com is not in the cluster (set gpufleet_node_name to the host's node name)"]
    assert result["nodes"]["gpu-b"]["found"] is False


# --- the stack's pods ---------------------------------------------------------------------------


def test_pods_not_ready_are_blamed_on_their_node_or_the_fleet():
    pods = copy.deepcopy(OPERATOR_PODS) + [
        pod("nvidia-driver-daemonset-b7x9c", "gpu-a", ready=False,
            waiting={"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container"}),
        pod("nvidia-operator-validator-9kx2d", "gpu-a", phase="Pending", ready=False, init_waiting={"reason": "PodInitializing"}),
        pod("gpu-feature-discovery-x8f2k", "gpu-z", phase="Pending", ready=False,
            waiting={"reason": "ImagePullBackOff", "message": 'Back-off pulling image "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"'}),
    ]
    result = C.evaluate(["gpu-a"], hostvars(**{"gpu-a": H200}), read([node("gpu-a")], {"gpu_operator": pods}))
    assert result["stack"]["status"] == "failed"
    assert result["stack"]["msg"] == "GPU Operator: 4 of 7 pods ready or completed in namespace gpu-operator"
    assert result["nodes"]["gpu-a"]["failed"] == [
        "GPU Operator pods not ready on gpu-a: nvidia-driver-daemonset-b7x9c (Running, container nvidia-driver-daemonset "
        "CrashLoopBackOff: back-off 5m0s restarting failed container); nvidia-operator-validator-9kx2d (Pending, init "
        "container driver-validation PodInitializing)"
    ]
    assert result["failed"] == [
        "GPU Operator pod gpu-feature-discovery-x8f2k not ready on gpu-z: Pending, container gpu-feature-discovery "
        'ImagePullBackOff: Back-off pulling image "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"'
    ]


def test_device_plugin_stack_found_when_the_operator_is_absent():
    pods = [pod("nvidia-device-plugin-4kx2m", "gpu-a", namespace="nvidia-device-plugin")]
    result = C.evaluate(["gpu-a"], hostvars(**{"gpu-a": H200}), read([node("gpu-a")], {"gpu_operator": [], "device_plugin": pods}))
    assert result["stack"]["name"] == "device_plugin"
    assert result["stack"]["msg"] == "NVIDIA device plugin: 1 of 1 pods ready or completed in namespace nvidia-device-plugin"


def test_no_stack_pods():
    auto = C.evaluate(["gpu-a"], hostvars(**{"gpu-a": H200}), read([node("gpu-a")], {"gpu_operator": [], "device_plugin": []}))
    assert auto["not_checked"][0] == (
        "stack pods: not checked: no GPU Operator pods in namespace gpu-operator and no device plugin pods in nvidia-device-plugin"
    )
    named = C.evaluate(["gpu-a"], hostvars(**{"gpu-a": H200}), read([node("gpu-a")], {"gpu_operator": []}, stack="gpu_operator"))
    assert named["failed"] == ["no GPU Operator pods in namespace gpu-operator: it is not deployed"]


# --- the CUDA pod -------------------------------------------------------------------------------


def _ran(phase, log):
    the_pod = pod("gpufleet-vectoradd-gpu-a", "gpu-a", phase=phase, ready=False, namespace="default")
    container = the_pod["status"]["containerStatuses"][0]
    container["name"] = "cuda-vectoradd"
    if phase in ("Succeeded", "Failed"):
        code = 0 if phase == "Succeeded" else 1
        container["state"] = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}
    else:
        container["state"] = {"waiting": {"reason": "ContainerCreating"}}
    cuda = {"ran": True, "pods": [the_pod], "logs": {"gpufleet-vectoradd-gpu-a": log}}
    return C.evaluate(["gpu-a"], hostvars(**{"gpu-a": H200}), read([node("gpu-a")], {"gpu_operator": OPERATOR_PODS}, cuda=cuda))


def test_cuda_pod_passed():
    result = _ran("Succeeded", "[Vector addition of 50000 elements]\nCopy input data from the host memory to the CUDA device\nTest PASSED\nDone\n")
    assert result["cuda_pod"]["status"] == "ok"
    assert result["cuda_pod"]["msg"] == "CUDA vectorAdd pod (nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0): 1 of 1 passed"
    assert result["nodes"]["gpu-a"]["checks"][-1] == {"name": "cuda_pod", "status": "ok", "msg": "CUDA pod gpufleet-vectoradd-gpu-a completed: Test PASSED"}


@pytest.mark.parametrize(
    "phase, log, msg",
    [
        ("Succeeded", "Done\n", "CUDA pod gpufleet-vectoradd-gpu-a completed without 'Test PASSED' in its log (Done)"),
        ("Failed", "Failed to allocate device vector A (error code CUDA driver version is insufficient for CUDA runtime version)!\n",
         "CUDA pod gpufleet-vectoradd-gpu-a failed: Failed, container cuda-vectoradd exited 1 (Error); log: Failed to allocate device vector A "
         "(error code CUDA driver version is insufficient for CUDA runtime version)!"),
        ("Pending", "", "CUDA pod gpufleet-vectoradd-gpu-a did not complete within 300 s: Pending, container cuda-vectoradd ContainerCreating"),
    ],
)
def test_cuda_pod_problems(phase, log, msg):
    result = _ran(phase, log)
    assert result["cuda_pod"]["status"] == "failed"
    assert result["nodes"]["gpu-a"]["failed"] == [msg]


def test_cuda_pod_that_could_not_be_created():
    error = (
        'Create the vector-add pods: Failed to create object: b\'{"message":"pods \\"gpufleet-vectoradd-gpu-a\\" '
        'is forbidden: RuntimeClass \\"nvidia\\" not found"}\''
    )
    cuda = {"ran": True, "pods": [], "logs": {}, "error": error}
    result = C.evaluate(["gpu-a"], hostvars(**{"gpu-a": H200}), read([node("gpu-a")], {"gpu_operator": OPERATOR_PODS}, cuda=cuda))
    assert result["nodes"]["gpu-a"]["failed"][0].startswith(
        "CUDA pod gpufleet-vectoradd-gpu-a was not run: Create the vector-add pods: Failed to create object:"
    )
    assert 'RuntimeClass \\"nvidia\\" not found' in result["nodes"]["gpu-a"]["failed"][0]


@pytest.mark.parametrize(
    "cuda, check_mode, note",
    [
        ({"mode": "none"}, False, "CUDA pod: not run (validate_cuda_pod none)"),
        ({}, True, "CUDA pod: not run in check mode (it would create a pod in the cluster)"),
    ],
)
def test_cuda_pod_not_run(cuda, check_mode, note):
    result = C.evaluate(["gpu-a"], hostvars(**{"gpu-a": H200}), read([node("gpu-a")], cuda=cuda, check_mode=check_mode))
    assert result["cuda_pods"] == []
    assert note in result["not_checked"]


def test_cuda_pod_per_node_and_only_where_gpus_are_allocatable():
    hv = hostvars(**{"gpu-a": H200, "gpu-b": H200, "gpu-c": H200})
    nodes = [node("gpu-a"), node("gpu-b"), node("gpu-c", allocatable=False)]
    result = C.evaluate(["gpu-c", "gpu-b", "gpu-a"], hv, read(nodes, cuda={"mode": "per_node", "runtime_class": "", "pull_secrets": ["ngc"]}))
    assert [p["spec"]["nodeName"] for p in result["cuda_pods"]] == ["gpu-a", "gpu-b"]
    assert "runtimeClassName" not in result["cuda_pods"][0]["spec"]
    assert result["cuda_pods"][0]["spec"]["imagePullSecrets"] == [{"name": "ngc"}]
    none = C.evaluate(["gpu-c"], hv, read([node("gpu-c", allocatable=False)]))
    assert "CUDA pod: not run: no inventory GPU node of the cluster advertises an allocatable GPU" in none["not_checked"]


def test_long_node_names_give_valid_pod_names():
    name = ".".join(["a" * 60] * 4)
    assert len(CUDA.cuda_pod_name("gpu-a")) < 253 and CUDA.cuda_pod_name("gpu-a") == "gpufleet-vectoradd-gpu-a"
    long_name = CUDA.cuda_pod_name(name)
    assert len(long_name) <= 253 and long_name.startswith("gpufleet-vectoradd-aaa")
    assert CUDA.cuda_pod_name(name) == long_name


def test_cleanup_failure_is_a_fleet_failure():
    result = C.evaluate(["gpu-a"], hostvars(**{"gpu-a": H200}), read([node("gpu-a")], cleanup_error="Unauthorized"))
    assert "could not remove the CUDA vector-add pods: Unauthorized" in result["failed"]


# --- the steps of the verdict --------------------------------------------------------------------


def test_expected_label_problems():
    labels = {"a": "1", "b": "x"}
    assert nodes._expected_label_problems(labels, {"a": 1, "b": "", "c": None}) == ["label c is missing"]
    assert nodes._expected_label_problems(labels, {"b": "y"}) == ["label b is 'x', expected 'y'"]


def test_stack_label_problems():
    labels = {nodes.LABEL_COUNT: "2", nodes.LABEL_REPLICAS: "1", nodes.LABEL_CONFIG: "default"}
    assert nodes._stack_label_problems(labels, {}, 2, False) == []
    assert nodes._stack_label_problems(labels, {}, 1, True) == []  # with MIG the count label is not compared
    assert nodes._stack_label_problems(labels, {"replicas": 4, "sharing_config": "ts-4"}, 1, False) == [
        "label nvidia.com/gpu.count is '2', the node has 1 GPUs",
        "label nvidia.com/gpu.replicas is '1', expected 4: the sharing config has not taken effect",
        "label nvidia.com/device-plugin.config is 'default', expected 'ts-4': the node runs another sharing config",
    ]


def test_pending_problem_says_what_holds_the_pod():
    unscheduled = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    assert pods._pending_problem(unscheduled, "Pending") == "Pending, not scheduled: Unschedulable"
    init = {"initContainerStatuses": [{"name": "init", "state": {"waiting": {"reason": "PodInitializing"}}}]}
    assert pods._pending_problem(init, "Pending") == "Pending, init container init PodInitializing"
    assert pods._pending_problem({}, "Unknown") == "Unknown"


def test_failure_of_a_failed_pod():
    assert pods._failure({"reason": "Evicted", "message": "low on memory\nmore"}) == "Evicted: low on memory"
    assert pods._failure({}) == "failed"


@pytest.mark.parametrize("pod, phase, log, cuda, status, msg", [
    (None, None, "", {"error": "forbidden\nmore"}, "failed", "CUDA pod p was not run: forbidden"),
    (None, None, "", {}, "failed", "CUDA pod p was not found after it was created"),
    ({}, "Succeeded", "Test PASSED\n", {}, "ok", "CUDA pod p completed: Test PASSED"),
    ({}, "Succeeded", "", {}, "failed", "CUDA pod p completed without 'Test PASSED' in its log (empty log)"),
    ({"status": {"phase": "Failed"}}, "Failed", "", {}, "failed", "CUDA pod p failed: Failed, failed"),
    ({"status": {"phase": "Pending"}}, "Pending", "", {"timeout": 300}, "failed", "CUDA pod p did not complete within 300 s: Pending"),
])
def test_cuda_pod_status(pod, phase, log, cuda, status, msg):
    assert CUDA._cuda_pod_status("p", pod, phase, log, cuda) == (status, msg)


# --- nodes of the DRA layer ---------------------------------------------------------------------

# The dra_driver role's per-node entry (dra_driver_node), as roles/dra_driver/tasks/validate.yml sets
# it from cluster.dra.validation_result: the published count and the node's claim.
DRA_OK = {"name": "gpu-a", "host": "gpu-a", "published": 1, "expected": 1, "status": "ok",
          "text": "DRA: 1 devices published", "message": "DRA: 1 devices published", "claim": "allocated, pod running"}


def _dra_hostvars(**dra):
    data = hostvars(**{"gpu-a": H200})
    data["gpu-a"].update(dra)
    return data


@pytest.mark.parametrize("dra, status, msg", [
    ({"dra_driver_node": DRA_OK}, "ok", "node gpu-a: DRA: 1 devices published, claim allocated, pod running"),
    ({"dra_driver_node": dict(DRA_OK, status="missing", published=0, claim=None, text="DRA: no GPU published",
                              message="dra_driver: node gpu-a: no GPU published in a ResourceSlice of driver gpu.nvidia.com")},
     "failed", "node gpu-a: dra_driver: node gpu-a: no GPU published in a ResourceSlice of driver gpu.nvidia.com"),
    ({"dra_driver_node": dict(DRA_OK, claim="not allocated")}, "failed",
     "node gpu-a: DRA: 1 devices published, claim not allocated: the ResourceClaim for one GPU is not allocated"),
    ({"gpufleet_cluster_layer": "dra"}, "skipped", "node gpu-a is on the DRA layer (gpufleet_cluster_layer: dra), which advertises "
     "no nvidia.com/gpu: its GPUs in ResourceSlices are checked by the dra_driver role, which did not run on it in this play"),
])
def test_a_dra_node_gets_the_dra_check_not_allocatable(dra, status, msg):
    result = C.evaluate(["gpu-a"], _dra_hostvars(**dra), read([node("gpu-a", allocatable=False)], {"gpu_operator": OPERATOR_PODS}))
    verdict = result["nodes"]["gpu-a"]
    assert [c["name"] for c in verdict["checks"]] == ["node", "dra", "labels", "pods"]
    assert verdict["checks"][1] == {"name": "dra", "status": status, "msg": msg}
    assert not any("advertises no nvidia.com/gpu (expected" in m for m in verdict["failed"])
    assert result["cuda_pods"] == []  # the vector-add pod asks for nvidia.com/gpu, which a DRA node has not


def test_a_device_plugin_node_without_the_resource_still_fails():
    result = C.evaluate(["gpu-a"], _dra_hostvars(gpufleet_cluster_layer="device_plugin"), read([node("gpu-a", allocatable=False)]))
    assert "node gpu-a advertises no nvidia.com/gpu (expected 1): the device plugin is not running there, or found no GPU" \
        in result["nodes"]["gpu-a"]["failed"]
