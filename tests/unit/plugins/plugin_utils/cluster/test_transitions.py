"""cluster.transitions: the nodes moving from the GPU Operator's driver to the host's, and the
plan's hold of the nodes whose host layer failed."""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import node_labels
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.fleet import fleet_nodes
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.gpu_operator import gpu_operator_plan
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.transitions import operator_moves
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import fleets as F

DRIVER = "nvidia.com/gpu.deploy.driver"
ANN = "gpufleet.nvidia/gpu-operator.labels"


def _node(name, labels=None, annotations=None):
    return {"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}}}


def _release(driver_enabled=True):
    return {"status": "deployed", "revision": 3, "values": {"driver": {"enabled": driver_enabled}}}


SIDES = [{"host": "a", "name": "a", "host_driver": True, "operator_driver": False},
         {"host": "b", "name": "b", "host_driver": True, "operator_driver": False},
         {"host": "o", "name": "o", "host_driver": False, "operator_driver": True}]


def test_a_node_declared_on_the_host_where_the_operator_drives_moves_first():
    nodes = [_node("a"), _node("b", {DRIVER: "false"}, {ANN: DRIVER}), _node("o")]
    moves = operator_moves(SIDES, nodes, _release())
    assert [(m["host"], m["why"]) for m in moves] == [("a", "the deployed release (revision 3) runs the operator's driver there")]
    assert moves[0]["patch"] == {"apiVersion": "v1", "kind": "Node",
                                 "metadata": {"name": "a", "labels": {DRIVER: "false"}, "annotations": {ANN: DRIVER}}}


def test_no_release_or_an_operator_without_its_driver_moves_nothing_unless_discovery_saw_its_container():
    nodes = [_node("a"), _node("b"), _node("o")]
    assert operator_moves(SIDES, nodes, None) == []
    assert operator_moves(SIDES, nodes, _release(driver_enabled=False)) == []
    sides = [dict(SIDES[0], operator_driver=True)]
    (move,) = operator_moves(sides, nodes, None)
    assert move["why"] == "discovery found the operator's driver container on it" and move["patch"] is not None


def test_label_out_writes_nothing_when_the_label_and_its_record_are_there():
    assert node_labels.label_out("b", _node("b", {DRIVER: "false"}, {ANN: DRIVER})["metadata"], DRIVER, "false", "gpu_operator") is None


def _fleet(run):
    hostvars = {"a": {"nvidia_driver_method": "package"}, "b": {"nvidia_driver_method": "package"},
                "o": {"nvidia_driver_method": "operator"}}
    return fleet_nodes(["a", "b", "o"], hostvars, "gpu_operator", run)


def test_a_node_whose_host_layer_failed_is_held_and_a_moving_one_goes_back_to_the_operator():
    run = {"discovered": True, "hosts": ["a", "b", "o"], "reached": ["a", "b", "o"], "failed": ["a", "b"], "moved": ["a"]}
    nodes = dict((n["host"], n) for n in _fleet(run)["nodes"])
    assert (nodes["a"]["driver_method"], nodes["a"]["host_driver"], nodes["a"]["moved_back"]) == ("operator", False, True)
    assert (nodes["b"]["driver_method"], nodes["b"]["held"], nodes["b"]["moved_back"]) == ("package", True, False)
    fleet = {"hosts": {"a": {}, "b": {}, "o": {}}}
    planned = gpu_operator_plan(_fleet(run), F.settings(fleet, "gpu_operator"))
    assert planned["problems"] == []
    labels = dict((e["host"], e) for e in planned["node_labels"])
    assert labels["b"].get("hold") is True and "hold" not in labels["a"] and DRIVER not in labels["a"]["labels"]
    assert planned["chart_values"]["driver"]["enabled"] is True
    assert [h.split(":")[0] for h in planned["held"]] == ["a", "b"]
    # The held node gets no patch; the one going back loses the label that kept the operator off.
    cluster = [_node("a", {DRIVER: "false"}, {ANN: DRIVER}), _node("b", {"x": "y"}), _node("o")]
    changes = node_labels.label_changes(planned["node_labels"], cluster, "gpu_operator", "gpu_operator")
    assert [p["metadata"]["name"] for p in changes["patches"]] == ["a"]
    assert changes["after_chart"][0]["metadata"]["labels"] == {DRIVER: None}
