"""The gpufleet.nvidia.gpu_drain module, against the fake API server of tests/unit/plugins/fake_kube.py."""

from __future__ import annotations

import sys

import pytest

from ansible_collections.gpufleet.nvidia.plugins.modules import gpu_drain
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import fake_kube as K
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.utils import AnsibleFailJson, run_module

pytest.importorskip("kubernetes")


@pytest.fixture
def kube(tmp_path, discovery_cache):
    fake = K.FakeKube(
        [K.node("gpu-a")],
        [K.pod("train-0", "gpu-a", labels={"app": "train"}), K.pod("dcgm-x", "gpu-a", namespace="gpu-operator", owner=("DaemonSet", "dcgm"))],
        [K.pdb("train", match_labels={"app": "train"})],
        pdb_refusals={"train": 1},
    )
    fake.path = fake.kubeconfig(str(tmp_path / "kubeconfig"))
    yield fake
    fake.close()


def test_drain_check_mode_then_for_real_then_again(kube):
    args = {"node": "gpu-a", "kubeconfig": kube.path, "poll_interval": 0.01, "reason": "test"}
    plan = run_module(gpu_drain, args, check_mode=True, diff=True)
    assert plan["changed"] is True
    assert plan["evicted"] == ["ml/train-0"]
    assert plan["blocked"] == [{"pod": "ml/train-0", "pdb": "ml/train", "refusals": 0,
                                "msg": "PodDisruptionBudget ml/train allows no disruption now: the eviction would wait for it"}]
    assert plan["diff"] == {
        "before": {"unschedulable": False, "cordoned_by": None, "gpu_pods": ["ml/train-0"]},
        "after": {"unschedulable": True, "cordoned_by": "test", "gpu_pods": []},
        "before_header": "node gpu-a", "after_header": "node gpu-a",
    }
    assert kube.writes() == []

    done = run_module(gpu_drain, args)
    assert done["changed"] is True and done["evicted"] == ["ml/train-0"] and "diff" not in done
    assert done["left"] == [{"pod": "gpu-operator/dcgm-x", "why": "DaemonSet pod: its controller runs it on every node, cordoned or not"}]
    assert [e[1] for e in kube.evictions] == [429, 201]
    assert kube.nodes["gpu-a"]["spec"]["unschedulable"] is True

    again = run_module(gpu_drain, args, check_mode=True)
    assert again["changed"] is False and again["evicted"] == []
    assert run_module(gpu_drain, args)["changed"] is False

    back = run_module(gpu_drain, dict(args, state="uncordon"))
    assert back["changed"] is True and back["node"]["unschedulable"] is False
    assert run_module(gpu_drain, dict(args, state="uncordon"), check_mode=True)["changed"] is False


def test_a_blocked_drain_fails_with_the_pods_and_budgets(kube):
    kube.pdb_refusals["train"] = None
    with pytest.raises(AnsibleFailJson) as err:
        run_module(gpu_drain, {"node": "gpu-a", "kubeconfig": kube.path, "poll_interval": 0.2, "timeout": 1})
    result = err.value.result
    assert result["msg"].startswith("gpu_drain: node gpu-a: 1 GPU pod still on the node after 1 s: ml/train-0 (eviction refused ")
    assert result["blocked"][0]["pdb"] == "ml/train" and result["blocked"][0]["refusals"] >= 2
    assert result["evicted"] == []


def test_wait_allocatable_suboptions(kube):
    result = run_module(gpu_drain, {"node": "gpu-a", "state": "cordon", "kubeconfig": kube.path, "wait_ready": True,
                                    "wait_allocatable": {"count": 1}, "poll_interval": 0.01})
    assert result["waited"] == 0
    assert result["node"]["allocatable"] == {"nvidia.com/gpu": "1"}
    with pytest.raises(AnsibleFailJson) as err:
        run_module(gpu_drain, {"node": "gpu-a", "state": "cordon", "kubeconfig": kube.path, "wait_allocatable": {"count": 2},
                               "wait_timeout": 0, "poll_interval": 0.01})
    assert err.value.result["msg"] == "gpu_drain: node gpu-a did not come back within 0 s: advertises 1 nvidia.com/gpu, expected 2"


def test_without_the_kubernetes_client(kube, monkeypatch):
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    with pytest.raises(AnsibleFailJson) as err:
        run_module(gpu_drain, {"node": "gpu-a", "kubeconfig": kube.path}, check_mode=True)
    assert err.value.result["msg"].startswith(
        "gpu_drain: the Python kubernetes client is not installed in %s on the control host (" % sys.executable)
    assert kube.requests == []


def test_bad_parameter_values_fail_cleanly(kube):
    with pytest.raises(AnsibleFailJson) as err:
        run_module(gpu_drain, {"node": "gpu-a", "kubeconfig": kube.path, "timeout": -5})
    assert err.value.result["msg"] == "gpu_drain: timeout: -5 is not a number of seconds (expected 0 or more)"
    assert err.value.result["timeout"] == -5
    assert kube.requests == []
