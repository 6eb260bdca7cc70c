# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The labels validation publishes on the GPU nodes (validate/labels.py, through validate.cluster's
verdict): their values, and the patches of the cluster layer's mechanism (the annotation
``gpufleet.nvidia/validate.labels`` records the keys) against Node objects written as k8s_info
returns them (cluster_objects.node), with the facts of the host captures."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate import cluster as C
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate import labels as L
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.plugin_utils.validate.cluster_objects import (
    H200, OPERATOR_PODS, hostvars, node, read)

TODAY = "2026-12-01"
ANNOTATION = "gpufleet.nvidia/validate.labels"
# the H200's 580.159.04 is below the floor of NVIDIA's September 2026 driver bulletin (5861)
H200_LABELS = {"gpufleet.nvidia/driver-branch": "580", "gpufleet.nvidia/driver-eol": "2028-06",
               "gpufleet.nvidia/driver-flavor": "open", "gpufleet.nvidia/security-floor": "5861",
               "gpufleet.nvidia/validation": "ok"}


def labelled(name, labels, recorded=None, **more):
    the_node = node(name, **more)
    the_node["metadata"]["labels"].update(labels)
    if recorded is not None:
        the_node["metadata"]["annotations"] = {ANNOTATION: ",".join(sorted(recorded))}
    return the_node


def verdict(nodes, hosts=("gpu-a",), data=None, **labels):
    cluster = read(nodes, {"gpu_operator": OPERATOR_PODS}, labels=dict({"enabled": True, "kept_nodes": [], "today": TODAY}, **labels))
    return C.evaluate(list(hosts), data or hostvars(**{"gpu-a": H200}), cluster)


def applied(nodes, patches):
    """The nodes after the merge patches (a null value removes the key)."""
    nodes = copy.deepcopy(nodes)
    by_name = dict((n["metadata"]["name"], n["metadata"]) for n in nodes)
    for patch in patches:
        meta = by_name[patch["metadata"]["name"]]
        for part in ("labels", "annotations"):
            for key, value in (patch["metadata"].get(part) or {}).items():
                meta.setdefault(part, {})
                if value is None:
                    meta[part].pop(key, None)
                else:
                    meta[part][key] = value
    return nodes


@pytest.mark.parametrize("text, value", [
    ("580", "580"), ("2028-06", "2028-06"), ("R580 / open", "R580---open"), ("-x-", "x"), ("a" * 70, "a" * 63), ("@@", "")])
def test_label_values_are_valid_label_values(text, value):
    assert L.label_value(text) == value


def test_the_h200_node_gets_its_branch_end_of_life_flavour_and_validation():
    result = verdict([node("gpu-a")])
    assert result["labels"]["nodes"] == {"gpu-a": H200_LABELS}
    assert result["labels"]["patches"] == [{
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-a", "labels": H200_LABELS, "annotations": {ANNOTATION: ",".join(sorted(H200_LABELS))}}}]


def test_a_second_run_patches_nothing_and_a_changed_verdict_one_label():
    first = verdict([node("gpu-a")])
    nodes = applied([node("gpu-a")], first["labels"]["patches"])
    assert verdict(nodes)["labels"]["patches"] == []
    data = hostvars(**{"gpu-a": H200})
    data["gpu-a"]["gpufleet_nvidia_validation"]["status"] = "drift"
    patches = verdict(nodes, data=data)["labels"]["patches"]
    assert patches == [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a", "labels": {"gpufleet.nvidia/validation": "drift"}}}]


def test_a_node_no_longer_in_the_fleet_loses_them_and_one_outside_the_play_keeps_them():
    old = labelled("gpu-old", H200_LABELS, recorded=H200_LABELS)
    limited = labelled("gpu-b", H200_LABELS, recorded=H200_LABELS)
    foreign = labelled("gpu-c", {"gpufleet.nvidia/validation": "ok"})  # set by someone else: no annotation
    patches = verdict([node("gpu-a"), old, limited, foreign], kept_nodes=["gpu-b"])["labels"]["patches"]
    names = [p["metadata"]["name"] for p in patches]
    assert names == ["gpu-a", "gpu-old"]
    assert patches[1]["metadata"] == {"name": "gpu-old", "labels": dict((k, None) for k in sorted(H200_LABELS)),
                                      "annotations": {ANNOTATION: None}}


@pytest.mark.parametrize("driver, flavor, branch, eol, shown, floor", [
    ("535.288.01", "proprietary", "535", "2026-06", "proprietary", "5821"),
    ("550.163.01", "open", "550", "2025-06", "open", "ok"),  # no bulletin row for R550: driver-eol says it
    ("590.44.01", None, "590", "none", "unknown", "ok"),
    ("999.10", "open", "999", "unknown", "open", "ok"),
    (None, None, "none", "none", "none", "none"),
])
def test_values_of_other_branches_and_of_a_node_without_driver(driver, flavor, branch, eol, shown, floor):
    facts = {"gpu_count": 1, "driver": {"version": driver, "flavor": flavor}}
    values = L.node_values(facts, {"status": "failed"}, "ok", TODAY)
    assert values == {"gpufleet.nvidia/driver-branch": branch, "gpufleet.nvidia/driver-eol": eol,
                      "gpufleet.nvidia/driver-flavor": shown, "gpufleet.nvidia/security-floor": floor,
                      "gpufleet.nvidia/validation": "failed"}


def test_the_security_floor_label_names_every_bulletin_a_node_is_below():
    facts = {"gpu_count": 1, "driver": {"version": "580.126.20", "flavor": "open"},
             "container": {"toolkit": {"version": "1.17.7-1"}, "containerd": {"installed": True, "version": "1.7.24~ds1"}}}
    values = L.node_values(facts, {"status": "ok"}, "ok", "2026-12-03")
    assert values["gpufleet.nvidia/security-floor"] == "5821.5861.5659.5850.containerd-eol"
    # the validation's toolkit reading wins over the facts'
    values = L.node_values(facts, {"status": "ok", "toolkit": {"installed": "1.19.1-1"}}, "ok", "2026-12-03")
    assert values["gpufleet.nvidia/security-floor"] == "5821.5861.containerd-eol"


def test_the_cluster_verdict_counts_in_the_validation_label():
    result = verdict([node("gpu-a", allocatable=0)])
    assert result["nodes"]["gpu-a"]["status"] == "failed"
    assert result["labels"]["nodes"]["gpu-a"]["gpufleet.nvidia/validation"] == "failed"


def test_off_by_default_absent_node_unlabelled_and_a_failed_patch_fails_the_fleet():
    off = C.evaluate(["gpu-a"], hostvars(**{"gpu-a": H200}), read([node("gpu-a")]))
    assert off["labels"] == {"enabled": False, "annotation": ANNOTATION, "nodes": {}, "patches": [], "error": None}
    assert verdict([node("gpu-z")])["labels"]["patches"] == []  # gpu-a is not in the cluster: its node check says so
    failed = verdict([node("gpu-a")], error="nodes \"gpu-a\" is forbidden: cannot patch resource \"nodes\"")
    assert failed["failed"][-1].startswith("could not label the GPU nodes (gpufleet.nvidia/driver-branch, ")
    assert failed["failed"][-1].endswith('is forbidden: cannot patch resource "nodes"')


def test_the_filter_keeps_the_nodes_of_inventory_hosts_outside_the_play():
    from ansible_collections.gpufleet.nvidia.plugins.filter.validate_cluster import validate_cluster

    data = hostvars(**{"gpu-a": H200})
    data["host-b"] = {"gpufleet_node_name": "gpu-b"}  # in the inventory, not in this play (--limit)
    nodes = [node("gpu-a"), labelled("gpu-b", H200_LABELS, recorded=H200_LABELS), labelled("gpu-old", H200_LABELS, recorded=H200_LABELS)]
    cluster = read(nodes, {"gpu_operator": OPERATOR_PODS}, labels={"enabled": True, "inventory": ["gpu-a", "host-b"], "today": TODAY})
    result = validate_cluster(["gpu-a"], data, cluster)
    assert [p["metadata"]["name"] for p in result["labels"]["patches"]] == ["gpu-a", "gpu-old"]
