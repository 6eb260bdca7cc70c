"""gpu_node_label_patches: only what differs is patched; only owned labels are removed; additions
come before the chart and removals after it; the annotation records what the role manages."""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.filter.gpu_node_label_patches import gpu_node_label_patches

from . import fleets as F
from . import validate


ANN = "gpufleet.nvidia/gpu-operator.labels"


def node(name, annotations=None, **labels):
    meta = {"name": name}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta}


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
    both = "nvidia.com/gpu.deploy.container-toolkit,nvidia.com/gpu.deploy.driver"
    assert result["before_chart"] == [
        # already right: only the record of what the role manages is added
        node("gpu-a100-01", {ANN: both}),
        node("gpu-a100-02", {ANN: both}, **{"nvidia.com/gpu.deploy.container-toolkit": "false", "nvidia.com/gpu.deploy.driver": "false"}),
        node("gpu-l4-01", {ANN: "nvidia.com/gpu.deploy.driver"}),
    ]
    # gpu-l4-01 has its driver but not its toolkit any more: the owned "false" goes, after the chart.
    assert result["after_chart"] == [node("gpu-l4-01", **{"nvidia.com/gpu.deploy.container-toolkit": None})]
    assert result["problems"] == [] and result["patches"] == result["before_chart"] + result["after_chart"]
    for patch in result["patches"]:
        validate.k8s_object(patch)


def _applied(cluster, patches):
    """The cluster's nodes after merge patches (null deletes)."""
    by_name = dict((n["metadata"]["name"], n) for n in cluster)
    for patch in patches:
        meta = by_name[patch["metadata"]["name"]]["metadata"]
        for part in ("labels", "annotations"):
            for key, value in (patch["metadata"].get(part) or {}).items():
                target = meta.setdefault(part, {})
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value
    return list(by_name.values())


def _meta(cluster, name):
    return next(n["metadata"] for n in cluster if n["metadata"]["name"] == name)


def test_a_recorded_label_that_is_no_longer_declared_is_removed_whatever_its_value():
    fleet = F.load("mig")
    first = F.plan(fleet, "gpu_operator")
    cluster = [node(e["name"]) for e in first["node_labels"]] + [node("cpu-01")]
    cluster = _applied(cluster, gpu_node_label_patches(first["node_labels"], cluster, "gpu_operator")["patches"])
    assert _meta(cluster, "gpu-h200-mig-01")["labels"]["nvidia.com/mig.config"] == "all-1g.18gb"
    # The node no longer declares a MIG config; someone also changed the value by hand.
    _meta(cluster, "gpu-h200-mig-01")["labels"]["nvidia.com/mig.config"] = "by-hand"
    del fleet["hosts"]["gpu-h200-mig-01"]["gpufleet_mig_config"]
    second = F.plan(fleet, "gpu_operator")
    result = gpu_node_label_patches(second["node_labels"], cluster, "gpu_operator")
    assert result["before_chart"] == []
    assert result["after_chart"] == [node("gpu-h200-mig-01", {ANN: "nvidia.com/device-plugin.config"},
                                          **{"nvidia.com/mig.config": None})]
    cluster = _applied(cluster, result["patches"])
    assert gpu_node_label_patches(second["node_labels"], cluster, "gpu_operator")["patches"] == []


def test_a_node_that_left_the_declaration_loses_every_label_the_role_recorded():
    fleet = F.load("mig")
    planned = F.plan(fleet, "gpu_operator")
    cluster = [node(e["name"]) for e in planned["node_labels"]]
    cluster = _applied(cluster, gpu_node_label_patches(planned["node_labels"], cluster, "gpu_operator")["patches"])
    _meta(cluster, "gpu-h200-mig-02")["labels"]["team"] = "research"  # not the role's: stays
    del fleet["hosts"]["gpu-h200-mig-02"]
    result = gpu_node_label_patches(F.plan(fleet, "gpu_operator")["node_labels"], cluster, "gpu_operator")
    assert result["after_chart"] == [node("gpu-h200-mig-02", {ANN: None}, **{"nvidia.com/mig.config": None})]
    assert _meta(_applied(cluster, result["patches"]), "gpu-h200-mig-02") == {"name": "gpu-h200-mig-02", "labels": {"team": "research"}, "annotations": {}}


def test_a_second_run_patches_nothing():
    planned = F.plan(F.load("time-sliced"), "device_plugin")
    first = gpu_node_label_patches(planned["node_labels"], None, "device_plugin")["patches"]
    cluster = [node(p["metadata"]["name"], p["metadata"]["annotations"], **p["metadata"]["labels"]) for p in first]
    assert gpu_node_label_patches(planned["node_labels"], cluster, "device_plugin") == {
        "before_chart": [], "after_chart": [], "patches": [], "problems": [], "annotation": "gpufleet.nvidia/device-plugin.labels"}


def test_labels_the_role_does_not_own_are_left_alone():
    planned = F.plan(F.load("none-prepared"), "gpu_operator")
    cluster = [
        # The operator's own value for a node it found a driver on, and a config a person set.
        node("gpu-l40s-01", **{"nvidia.com/gpu.deploy.driver": "pre-installed", "nvidia.com/device-plugin.config": "by-hand"}),
        # A config this fleet declares (default) that the node no longer asks for: owned, removed.
        node("gpu-l40s-02", **{"nvidia.com/device-plugin.config": "default", "nvidia.com/gpu.deploy.driver": "false"}),
    ]
    assert gpu_node_label_patches(planned["node_labels"], cluster, "gpu_operator")["after_chart"] == [
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
        {"name": "gpu-h200-mig-01", "labels": {"nvidia.com/device-plugin.config": "sliced-1g", "nvidia.com/mig.config": "all-1g.18gb"},
         "annotations": {ANN: "nvidia.com/device-plugin.config,nvidia.com/mig.config"}},
        {"name": "gpu-h200-mig-02", "labels": {"nvidia.com/mig.config": "balanced"}, "annotations": {ANN: "nvidia.com/mig.config"}},
    ]
