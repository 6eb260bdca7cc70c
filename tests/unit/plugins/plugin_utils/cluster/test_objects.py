"""cluster.objects: only the objects that differ from the cluster's are written.

The live objects are the shapes the API server returns: what it adds (uid, resourceVersion,
creationTimestamp, managedFields, status, defaulted spec fields) is not a difference."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.objects import contained, objects_to_write

NS = {"apiVersion": "v1", "kind": "Namespace",
      "metadata": {"name": "gpu-operator", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}
LIVE_NS = {"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": "gpu-operator", "uid": "u", "resourceVersion": "12",
                        "labels": {"kubernetes.io/metadata.name": "gpu-operator", "pod-security.kubernetes.io/enforce": "privileged"}},
           "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "gpu-operator"}, "data": {"a": "1"}}


def test_an_object_the_cluster_holds_as_planned_is_not_written():
    assert objects_to_write([NS], [LIVE_NS]) == []


@pytest.mark.parametrize("live", [
    [],                                                                       # missing
    [dict(LIVE_NS, metadata=dict(LIVE_NS["metadata"], labels={}))],           # a label lost
    [dict(LIVE_NS, metadata=dict(LIVE_NS["metadata"], name="other"))],        # another object
])
def test_a_missing_or_changed_object_is_written(live):
    assert objects_to_write([NS], live) == [NS]


def test_an_object_being_deleted_is_written():
    # A namespace still terminating was taken for there, and helm then failed on it ("namespaces ... not found").
    terminating = dict(LIVE_NS, metadata=dict(LIVE_NS["metadata"], deletionTimestamp="2026-12-03T21:58:00Z"))
    assert objects_to_write([NS], [terminating]) == [NS]


def test_objects_match_by_namespace_and_kind_too():
    live = [dict(CM, metadata={"name": "c", "namespace": "other"}), dict(CM, kind="Secret")]
    assert objects_to_write([CM], live) == [CM]
    assert objects_to_write([CM], live + [CM]) == []


def test_status_is_never_a_difference_and_lists_match_element_by_element():
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "x"},
           "spec": {"versions": [{"name": "v1"}]}, "status": {"acceptedNames": {"kind": ""}}}
    live = dict(crd, spec={"versions": [{"name": "v1", "served": True}], "conversion": {"strategy": "None"}},
                status={"acceptedNames": {"kind": "X"}})
    assert objects_to_write([crd], [live]) == []
    assert objects_to_write([crd], [dict(live, spec={"versions": [{"name": "v1"}, {"name": "v2"}]})]) == [crd]
    assert not contained(True, 1) and not contained({"a": 1}, [1]) and contained(1, 1)
