"""Each node's verdict (the validate_verdicts filter): what the validate role says of a node and
whether validate_fail_on fails it, on one node or once for the fleet."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.validate_verdicts import validate_verdicts
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import worst


def _validation(status, failed=(), drifted=(), not_checked=()):
    return {"status": status, "failed": list(failed), "drifted": list(drifted), "not_checked": list(not_checked)}


HOSTVARS = {
    "gpu-ok": {"ansible_facts": {"gpufleet_nvidia_validation": _validation("ok", not_checked=["no nvcc"])}},
    "gpu-drift": {"ansible_facts": {"gpufleet_nvidia_validation": _validation("drift", drifted=["declared 575, loaded 580"])},
                  "validate_fail_on": "drift"},
    "gpu-bad": {"ansible_facts": {"gpufleet_nvidia_validation": _validation("failed", failed=["nvidia-smi not found"])}},
    "cpu-1": {"ansible_facts": {"gpufleet_nvidia_validation": _validation("skipped", not_checked=["no GPU: nothing to validate"])}},
    "gpu-new": {},
}
CLUSTER = {"nodes": {"gpu-ok": {"status": "failed", "failed": ["node gpu-ok advertises no nvidia.com/gpu"], "not_checked": []}}}


def test_the_worst_of_the_host_and_the_cluster_checks_with_their_messages():
    got = validate_verdicts(list(HOSTVARS), HOSTVARS, CLUSTER)
    assert list(got) == list(HOSTVARS)  # the order given
    assert got["gpu-ok"] == {
        "status": "failed",
        "lines": ["gpu-ok: failed", "node gpu-ok advertises no nvidia.com/gpu", "no nvcc"],
        "msg": "gpu-ok: validation failed: node gpu-ok advertises no nvidia.com/gpu",
        "fails": False,
    }
    assert got["gpu-drift"]["status"] == "drift" and got["gpu-drift"]["msg"] == "gpu-drift: validation drift: declared 575, loaded 580"
    assert got["cpu-1"]["lines"] == ["cpu-1: skipped", "no GPU: nothing to validate"]
    # a node without a validation of this run is said to be one
    assert got["gpu-new"]["lines"] == ["gpu-new: skipped", "not validated in this run"]


@pytest.mark.parametrize("fail_on, failing", [
    ("never", []),
    ("failed", ["gpu-ok", "gpu-bad"]),
    ("drift", ["gpu-ok", "gpu-drift", "gpu-bad"]),
])
def test_validate_fail_on_the_same_for_every_node(fail_on, failing):
    got = validate_verdicts(list(HOSTVARS), HOSTVARS, CLUSTER, fail_on)
    assert [h for h, v in got.items() if v["fails"]] == failing


def test_each_nodes_own_validate_fail_on_over_the_default_where_asked():
    got = validate_verdicts(list(HOSTVARS), HOSTVARS, {}, "never", True)
    assert [h for h, v in got.items() if v["fails"]] == ["gpu-drift"]  # only it sets one (drift)
    # not asked: the given one for every node (the role's assert passes the node's own)
    assert [h for h, v in validate_verdicts(list(HOSTVARS), HOSTVARS, {}, "failed").items() if v["fails"]] == ["gpu-bad"]


def test_a_wrong_validate_fail_on_is_named():
    with pytest.raises(AnsibleFilterError, match="validate_fail_on: 'sometimes' is not one of never, failed, drift"):
        validate_verdicts(["gpu-ok"], HOSTVARS, {}, "sometimes")


def test_the_worst_status_the_node_and_the_report_share():
    assert worst(["ok", "skipped"]) == "ok"
    assert worst(["skipped", "skipped"]) == "skipped"
    assert worst(["ok", "drift"]) == "drift"
    assert worst(["drift", "failed"]) == "failed"
    assert worst(["ok", None, "unknown"]) == "ok"  # what is not a status is passed over
