"""The cluster tests' Kubernetes objects: ``node``, ``pod``, ``read``, ``hostvars`` and ``OPERATOR_PODS``.

No cluster here: Node and Pod objects are written by hand in the shape of the Kubernetes v1 API
(``kubectl get node -o json``), with the labels GPU Feature Discovery and the GPU Operator
write (``tests/unit/fixtures/report/README.md``); the GPUs and their facts come from the host
captures.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.discovery.captures import fixture_facts

LABELS = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "", "nvidia.com/gpu.count": ""}


def node(name, gpus=1, allocatable=None, labels=None, ready=True, extra=None):
    """A Node as k8s_info returns it."""
    alloc = {"cpu": "31500m", "memory": "257000000Ki", "pods": "110"}
    if allocatable is not False:
        alloc["nvidia.com/gpu"] = str(gpus if allocatable is None else allocatable)
    alloc.update(extra or {})
    base = {
        "kubernetes.io/hostname": name,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H200",
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/mig.capable": "true",
    }
    base.update(labels or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict((k, v) for k, v in base.items() if v is not None)},
        "status": {
            "allocatable": alloc,
            "capacity": dict(alloc),
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady" if ready else "KubeletNotReady",
                 "message": "kubelet is posting ready status" if ready else "container runtime network not ready"},
            ],
        },
    }


def pod(name, node_name, phase="Running", ready=True, waiting=None, init_waiting=None, terminated=None, namespace="gpu-operator"):
    status = {"phase": phase, "conditions": []}
    container = {"name": name.rsplit("-", 1)[0], "ready": ready, "state": {"running": {}}}
    if waiting:
        container["state"] = {"waiting": waiting}
        container["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error"}}
    if terminated:
        container["state"] = {"terminated": terminated}
    status["containerStatuses"] = [container]
    if init_waiting:
        status["initContainerStatuses"] = [{"name": "driver-validation", "ready": False, "state": {"waiting": init_waiting}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": {"nodeName": node_name}, "status": status}


def hostvars(**hosts):
    """Inventory host -> (capture name, cluster_expect overrides)."""
    data = {}
    for host, (capture, expect) in hosts.items():
        facts = fixture_facts(capture)
        validation = {
            "status": "ok",
            "gpu_count": facts["gpu_count"],
            "cluster_expect": dict({"node": host, "replicas": 1, "resource": "nvidia.com/gpu", "sharing_config": "", "labels": LABELS}, **expect),
        }
        data[host] = {"gpufleet_nvidia": facts, "gpufleet_nvidia_validation": validation}
    return data


def read(nodes=None, pods=None, **more):
    cluster = {
        "enabled": True,
        "error": None,
        "client": True,
        "kubeconfig": {"path": "/root/.kube/config", "exists": True, "in_cluster": False},
        "nodes": nodes,
        "stack": "auto",
        "namespaces": {"gpu_operator": "gpu-operator", "device_plugin": "nvidia-device-plugin"},
        "pods": pods if pods is not None else {},
        "check_mode": False,
        "cuda": {"mode": "one", "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0", "namespace": "default",
                 "runtime_class": "nvidia", "pull_secrets": [], "timeout": 300, "ran": False, "pods": [], "logs": {}, "error": None},
    }
    for key, value in more.items():
        if key == "cuda":
            cluster["cuda"].update(value)
        else:
            cluster[key] = value
    return cluster


H200 = ("ubuntu2404-h200-preinstalled", {})
NOGPU = ("debian12-nogpu", {})
OPERATOR_PODS = [
    pod("gpu-operator-6d8f7c9b5-x2x9k", "cpu-1"),
    pod("nvidia-device-plugin-daemonset-7hqzl", "gpu-a"),
    pod("nvidia-container-toolkit-daemonset-kq2vd", "gpu-a"),
    pod("nvidia-cuda-validator-4rt8m", "gpu-a", phase="Succeeded", ready=False, terminated={"exitCode": 0, "reason": "Completed"}),
]
