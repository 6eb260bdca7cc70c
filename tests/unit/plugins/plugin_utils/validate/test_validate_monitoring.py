"""validate.monitoring: GFD's labels against discovery, the DCGM exporter's metrics, and the pods
that no kubelet runs (said not checked, never ok)."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate import cluster as V
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate import monitoring as M
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import FAILED, OK, SKIPPED, Checks

FACTS = {"gpu_count": 2, "driver": {"nvidia_smi": {"gpus": [
    {"name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559}, {"name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559}]}}}
LABELS = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "2", "nvidia.com/gpu.memory": "81559"}
SCRAPE = {"ok": True, "text": 'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 0', "error": None}


def pod(name, node="gpu-a", ip="10.0.0.7", phase="Running", env=None):
    status = {"phase": phase}
    if ip:
        status["podIP"] = ip
    return {"metadata": {"name": name, "namespace": "nvidia-device-plugin"}, "status": status,
            "spec": {"nodeName": node, "containers": [{"name": "exporter", "env": env or []}]}}


def one(check, *args):
    checks = Checks()
    check(checks, *args)
    (item,) = checks.items
    return item["status"], item["msg"]


def test_the_labels_gfd_writes_for_what_discovery_found():
    assert M.expected_labels(FACTS) == LABELS
    assert M.expected_labels({}) == {}


@pytest.mark.parametrize("labels, shared, status, said", [
    (LABELS, False, OK, "nvidia.com/gpu.count=2"),
    (dict(LABELS, **{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}), True, OK, "SHARED"),
    (dict(LABELS, **{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}), False, FAILED, "discovery found 'NVIDIA-H100-80GB-HBM3'"),
    (dict(LABELS, **{"nvidia.com/gpu.memory": "40960"}), False, FAILED, "nvidia.com/gpu.memory is '40960', discovery found '81559'"),
    ({}, False, FAILED, "nvidia.com/gpu.count is missing"),
])
def test_gfd_labels_against_discovery(labels, shared, status, said):
    found, msg = one(M.check_labels, "gpu-a", labels, FACTS, [pod("gfd-x-gpu-feature-discovery-1")], shared)
    assert found == status and said in msg, msg


def test_missing_labels_where_no_kubelet_runs_gfd_are_not_checked():
    found, msg = one(M.check_labels, "gpu-a", {}, FACTS, [pod("gfd-x-gpu-feature-discovery-1", ip=None)], False)
    assert found == SKIPPED
    assert "not checked: GFD's pod gfd-x-gpu-feature-discovery-1 is Running without a pod IP" in msg


def test_a_gfd_pod_is_known_by_its_daemonset_where_its_name_is_cut():
    cut = pod("plugin-nvidia-device-plugin-gpu-feature-discov6hf2p", ip=None)
    cut["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "plugin-nvidia-device-plugin-gpu-feature-discovery"}]
    assert one(M.check_labels, "gpu-a", {}, FACTS, [cut], False)[0] == SKIPPED


def test_no_gpu_in_discovery_is_not_checked():
    assert one(M.check_labels, "gpu-a", LABELS, {}, [], False)[0] == SKIPPED


@pytest.mark.parametrize("pods, scrapes, dra, status, said", [
    ([pod("dcgm-exporter-a")], {"dcgm-exporter-a": SCRAPE}, False, OK, "serves DCGM_FI_DEV_GPU_UTIL"),
    ([pod("dcgm-exporter-a", env=[{"name": "KUBERNETES_ENABLE_DRA", "value": "true"}])], {"dcgm-exporter-a": SCRAPE}, True, OK,
     "DRA attribution on"),
    ([pod("dcgm-exporter-a")], {"dcgm-exporter-a": SCRAPE}, True, FAILED, "no KUBERNETES_ENABLE_DRA=true"),
    ([pod("dcgm-exporter-a", ip=None)], {}, False, SKIPPED, "is Running without a pod IP, so the API server's proxy cannot reach it"),
    ([pod("dcgm-exporter-a")], {"dcgm-exporter-a": {"ok": False, "text": "", "error": "HTTP 503: no endpoints"}}, False, FAILED,
     "the API server's proxy to its metrics failed: HTTP 503: no endpoints"),
    ([pod("dcgm-exporter-a")], {"dcgm-exporter-a": {"ok": True, "text": "", "error": None}}, False, FAILED, "no GPU seen"),
    ([pod("dcgm-exporter-a")], {}, False, SKIPPED, "was not read"),
    ([pod("dcgm-exporter-b", node="gpu-b")], {}, False, FAILED, "no DCGM exporter pod on the node"),
])
def test_exporter_metrics(pods, scrapes, dra, status, said):
    found, msg = one(M.check_metrics, "gpu-a", pods, scrapes, dra)
    assert found == status and said in msg, msg


def _cluster(pods, monitoring):
    node = {"metadata": {"name": "gpu-a", "labels": dict(LABELS, **{"nvidia.com/gpu.present": "true"})},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"nvidia.com/gpu": "2"}}}
    return {"enabled": True, "client": True, "collection": True, "kubeconfig": {"path": "k", "exists": True},
            "nodes": [node], "stack": "device_plugin", "namespaces": {"device_plugin": "nvidia-device-plugin"},
            "pods": {"device_plugin": pods}, "cuda": {"mode": "none"}, "monitoring": monitoring}


def test_the_cluster_verdict_carries_both_checks_per_node():
    hostvars = {"gpu-a": {"gpufleet_nvidia": FACTS, "gpufleet_nvidia_validation": {
        "status": "ok", "gpu_count": 2, "cluster_expect": {"node": "gpu-a", "labels": {}}}}}
    pods = [pod("dcgm-exporter-a", ip=None), pod("ndp-gpu-feature-discovery-a", ip=None)]
    verdict = V.evaluate(["gpu-a"], hostvars, _cluster(pods, {"gfd_labels": True, "dcgm_exporter": True, "scrapes": {}}))
    checks = dict((c["name"], c["status"]) for c in verdict["nodes"]["gpu-a"]["checks"])
    assert checks["gfd_labels"] == OK and checks["metrics"] == SKIPPED
    off = V.evaluate(["gpu-a"], hostvars, _cluster(pods, None))
    assert not {"gfd_labels", "metrics"} & set(c["name"] for c in off["nodes"]["gpu-a"]["checks"])
