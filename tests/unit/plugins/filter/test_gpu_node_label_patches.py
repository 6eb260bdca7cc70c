"""gpu_node_label_patches: only what differs is patched; only owned labels are removed."""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.filter.gpu_node_label_patches import gpu_node_label_patches

from . import fleets as F
from . import validate


def node(name, **labels):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def test_missing_labels_are_set_and_right_ones_are_left():
    planned = F.plan(F.load("mixed"), "gpu_operator")
    cluster = [
        node("gpu-a100-01", **{"nvidia.com/gpu.deploy.driver": "false", "nvidia.com/gpu.deploy.container-toolkit": "false"}),
        node("gpu-a100-02", **{"kubernetes.io/hostname": "gpu-a100-02"}),
        node("gpu-t4-01"),
        node("gpu-l4-01", **{"nvidia.com/gpu.deploy.driver": "false", "nvidia.com/gpu.deploy.container-toolkit": "false"}),
        node("cpu-01"),
    ]
    result = gpu_node_label_patches(planned["node_labels"], cluster, "gpu_operator")
    assert result == {
        "patches": [
            node("gpu-a100-02", **{"nvidia.com/gpu.deploy.container-toolkit": "false", "nvidia.com/gpu.deploy.driver": "false"}),
            # gpu-l4-01 has its driver but not its toolkit any more: the owned "false" goes.
            node("gpu-l4-01", **{"nvidia.com/gpu.deploy.container-toolkit": None}),
        ],
        "problems": [],
    }
    for patch in result["patches"]:
        validate.k8s_object(patch)


def test_a_second_run_patches_nothing():
    planned = F.plan(F.load("time-sliced"), "device_plugin")
    first = gpu_node_label_patches(planned["node_labels"], None, "device_plugin")["patches"]
    cluster = [node(p["metadata"]["name"], **p["metadata"]["labels"]) for p in first]
    assert gpu_node_label_patches(planned["node_labels"], cluster, "device_plugin") == {"patches": [], "problems": []}


def test_labels_the_role_does_not_own_are_left_alone():
    planned = F.plan(F.load("none-prepared"), "gpu_operator")
    cluster = [
        # The operator's own value for a node it found a driver on, and a config a person set.
        node("gpu-l40s-01", **{"nvidia.com/gpu.deploy.driver": "pre-installed", "nvidia.com/device-plugin.config": "by-hand"}),
        # A config this fleet declares (default) that the node no longer asks for: owned, removed.
        node("gpu-l40s-02", **{"nvidia.com/device-plugin.config": "default", "nvidia.com/gpu.deploy.driver": "false"}),
    ]
    assert gpu_node_label_patches(planned["node_labels"], cluster, "gpu_operator")["patches"] == [
        node("gpu-l40s-02", **{"nvidia.com/device-plugin.config": None, "nvidia.com/gpu.deploy.driver": None}),
    ]


def test_a_node_the_cluster_lacks_is_named():
    planned = F.plan(F.load("k3s"), "gpu_operator")
    cluster = [node("edge-gpu-1"), node("edge-gpu-2"), node("cp-1")]
    result = gpu_node_label_patches(planned["node_labels"], cluster, "gpu_operator")
    assert result["problems"] == [
        "gpu_operator: host 'edge-gpu-3.example.net': no node named 'edge-gpu-3' in the cluster (expected "
        "gpufleet_node_name set to the node's name; nodes found: cp-1, edge-gpu-1, edge-gpu-2)"
    ]


def test_rendering_without_a_cluster_sets_every_planned_label():
    planned = F.plan(F.load("mig"), "gpu_operator")
    patches = gpu_node_label_patches(planned["node_labels"], None, "gpu_operator")["patches"]
    assert [p["metadata"] for p in patches] == [
        {"name": "gpu-h200-mig-01", "labels": {"nvidia.com/device-plugin.config": "sliced-1g", "nvidia.com/mig.config": "all-1g.18gb"}},
        {"name": "gpu-h200-mig-02", "labels": {"nvidia.com/mig.config": "balanced"}},
    ]
