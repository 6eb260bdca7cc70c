"""Cordon, GPU-pod drain and uncordon (module_utils/upgrade/drain.py), with the Python kubernetes client (upgrade/kube_api.py)
against the fake API server of ``tests/unit/plugins/fake_kube.py``."""

from __future__ import annotations

import socket

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.upgrade import drain, kube_api
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import fake_kube as K

pytest.importorskip("kubernetes")

ANNOTATION = "gpufleet.nvidia/cordoned"


def gpu_a_pods():
    """What runs on gpu-a: GPU pods to evict, GPU pods to leave, and pods that are not GPU pods."""
    return [
        K.pod("train-0", "gpu-a", labels={"app": "train"}, owner=("ReplicaSet", "train-5d9")),
        K.pod("infer-0", "gpu-a", resource="nvidia.com/gpu.shared", owner=("ReplicaSet", "infer-7f"), limits_only=True),
        K.pod("mig-0", "gpu-a", namespace="research", resource="nvidia.com/mig-1g.10gb", init=True),
        K.pod("dcgm-exporter-x", "gpu-a", namespace="gpu-operator", owner=("DaemonSet", "nvidia-dcgm-exporter")),
        K.pod("static-gpu-gpu-a", "gpu-a", namespace="kube-system", annotations={"kubernetes.io/config.mirror": "abc"}),
        K.pod("done-0", "gpu-a", phase="Succeeded"),
        K.pod("cpu-0", "gpu-a", gpus=0, labels={"app": "train"}),
        K.pod("train-1", "gpu-b", labels={"app": "train"}),
    ]


LEFT = [
    {"pod": "gpu-operator/dcgm-exporter-x", "why": "DaemonSet pod: its controller runs it on every node, cordoned or not"},
    {"pod": "kube-system/static-gpu-gpu-a", "why": "mirror pod: a static pod of the kubelet, not evictable"},
    {"pod": "ml/done-0", "why": "finished (Succeeded): it holds no GPU"},
]
EVICTED = ["ml/infer-0", "ml/train-0", "research/mig-0"]


def make(tmp_path, **kwargs):
    kwargs.setdefault("nodes", [K.node("gpu-a"), K.node("gpu-b")])
    kwargs.setdefault("pods", gpu_a_pods())
    kwargs.setdefault("pdbs", [K.pdb("train", match_labels={"app": "train"})])
    fake = K.FakeKube(**kwargs)
    client = kube_api.api_client(fake.kubeconfig(str(tmp_path / "kubeconfig")))
    del fake.requests[:]  # kubernetes.core's API discovery, when the client is made: not the drain's
    return fake, kube_api.KubeApi(client, request_timeout=5)


@pytest.fixture
def kube(tmp_path, discovery_cache):
    fakes = []

    def start(**kwargs):
        fake, api = make(tmp_path, **kwargs)
        fakes.append(fake)
        return fake, api

    yield start
    for fake in fakes:
        fake.close()


def params(**extra):
    base = {"node": "gpu-a", "state": "drain", "resources": ["nvidia.com/"], "reason": "driver upgrade to 580", "force": False,
            "timeout": 5, "grace_period": None, "poll_interval": 0.01, "wait_ready": False, "wait_allocatable": None,
            "wait_timeout": 5, "request_timeout": 5}
    base.update(extra)
    return base


class Clock(object):
    """Time that passes only when the code sleeps."""

    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def run(api, check_mode=False, clock=None, **extra):
    clock = clock or Clock()
    return drain.run(api, params(**extra), check_mode=check_mode, clock=clock.clock, sleep=clock.sleep)


def evictions(fake):
    return [(e[0], e[1]) for e in fake.evictions]


def test_drain_evicts_the_gpu_pods_through_the_pdb_and_leaves_the_others(kube):
    fake, api = kube(pdb_refusals={"train": 2})
    clock = Clock()
    result = run(api, clock=clock, poll_interval=5, timeout=60)
    assert result["changed"] is True
    assert result["evicted"] == ["ml/infer-0", "research/mig-0", "ml/train-0"]  # in the order they went
    assert result["left"] == LEFT
    assert result["blocked"] == []
    # the budget refused twice, a try every poll_interval, then let it through
    assert evictions(fake) == [
        ("ml/infer-0", 201), ("ml/train-0", 429), ("research/mig-0", 201), ("ml/train-0", 429), ("ml/train-0", 201)]
    assert clock.sleeps == [5, 5]
    # cordoned, with the reason, before the first eviction
    writes = fake.writes()
    assert writes[0] == ("PATCH", "/api/v1/nodes/gpu-a", "",
                         {"spec": {"unschedulable": True}, "metadata": {"annotations": {ANNOTATION: "driver upgrade to 580"}}})
    assert [w[1] for w in writes[1:]] == ["/api/v1/namespaces/%s/pods/%s/eviction" % tuple(e[0].split("/")) for e in fake.evictions]
    assert fake.nodes["gpu-a"]["spec"]["unschedulable"] is True
    assert fake.nodes["gpu-b"]["spec"] == {}
    # what stays: DaemonSet, mirror, finished, non-GPU pods, and everything on gpu-b
    assert sorted("%s/%s" % k for k in fake.pods) == [
        "gpu-operator/dcgm-exporter-x", "kube-system/static-gpu-gpu-a", "ml/cpu-0", "ml/done-0", "ml/train-1"]
    assert result["node"]["unschedulable"] is True and result["node"]["cordoned_by"] == "driver upgrade to 580"
    assert result["msg"] == (
        "node gpu-a cordoned; 3 GPU pods evicted: ml/infer-0, research/mig-0, ml/train-0; "
        "left alone: gpu-operator/dcgm-exporter-x (DaemonSet pod); kube-system/static-gpu-gpu-a (mirror pod); ml/done-0 (finished (Succeeded))"
    )
    assert result["diff"] == {
        "before": {"unschedulable": False, "cordoned_by": None, "gpu_pods": EVICTED},
        "after": {"unschedulable": True, "cordoned_by": "driver upgrade to 580", "gpu_pods": []},
    }

    again = run(api)
    assert again["changed"] is False and again["evicted"] == [] and again["msg"].startswith("node gpu-a is cordoned (")
    assert len(fake.writes()) == len(writes)


def test_drain_waits_for_the_evicted_pods_to_be_gone(kube):
    fake, api = kube(terminate_reads=2)
    clock = Clock()
    result = run(api, clock=clock)
    assert result["evicted"] == EVICTED
    assert len(clock.sleeps) == 2  # each evicted pod still read twice, terminating
    assert not [k for k in fake.all_pods() if "%s/%s" % k in EVICTED]


def test_drain_in_check_mode_plans_and_changes_nothing(kube):
    fake, api = kube(pdbs=[K.pdb("train", match_labels={"app": "train"}, disruptions_allowed=0),
                           K.pdb("research", namespace="research", match_labels={}, disruptions_allowed=1)])
    result = run(api, check_mode=True)
    assert fake.writes() == []
    assert result["changed"] is True
    assert result["evicted"] == EVICTED
    assert result["blocked"] == [{"pod": "ml/train-0", "pdb": "ml/train", "refusals": 0,
                                  "msg": "PodDisruptionBudget ml/train allows no disruption now: the eviction would wait for it"}]
    assert result["left"] == LEFT
    assert result["msg"] == (
        "node gpu-a would be cordoned; 3 GPU pods would be evicted: ml/infer-0, ml/train-0, research/mig-0; "
        "blocked now: ml/train-0 by ml/train; "
        "left alone: gpu-operator/dcgm-exporter-x (DaemonSet pod); kube-system/static-gpu-gpu-a (mirror pod); ml/done-0 (finished (Succeeded))"
    )
    assert result["node"]["unschedulable"] is False and result["node"]["cordoned_by"] is None  # as it is
    assert result["diff"]["after"] == {"unschedulable": True, "cordoned_by": "driver upgrade to 580", "gpu_pods": []}
    assert fake.nodes["gpu-a"]["spec"] == {}


def test_a_pdb_that_never_allows_the_eviction_fails_the_drain_after_the_timeout(kube):
    fake, api = kube(pdb_refusals={"train": None})
    clock = Clock()
    with pytest.raises(GpuFleetError) as err:
        run(api, clock=clock, timeout=60, poll_interval=5)
    assert err.value.msg == (
        "gpu_drain: node gpu-a: 1 GPU pod still on the node after 60 s: ml/train-0 (eviction refused 13 times: "
        "PodDisruptionBudget ml/train: The disruption budget train needs 1 healthy pods and has 1 currently). The node stays cordoned"
    )
    assert err.value.details["evicted"] == ["ml/infer-0", "research/mig-0"]
    assert err.value.details["blocked"] == [{"pod": "ml/train-0", "pdb": "ml/train", "refusals": 13,
                                            "msg": "The disruption budget train needs 1 healthy pods and has 1 currently"}]
    assert clock.now == 60
    assert fake.nodes["gpu-a"]["spec"]["unschedulable"] is True
    assert ("ml", "train-0") in fake.pods


def test_a_pod_that_does_not_terminate_fails_the_drain(kube):
    fake, api = kube(terminate_reads=1000, pods=[K.pod("train-0", "gpu-a")], pdbs=[])
    with pytest.raises(GpuFleetError) as err:
        run(api, timeout=1, poll_interval=0.5)
    assert err.value.msg == (
        "gpu_drain: node gpu-a: 1 GPU pod still on the node after 1 s: ml/train-0 (evicted, still terminating). The node stays cordoned")
    assert err.value.details["terminating"] == ["ml/train-0"]
    assert fake.evicted() == ["ml/train-0"]


def test_an_eviction_error_other_than_a_pdb_fails_at_once(kube):
    pdbs = [K.pdb("one", match_labels={"app": "train"}), K.pdb("two", match_labels={"app": "train"})]
    fake, api = kube(pods=[K.pod("train-0", "gpu-a", labels={"app": "train"})], pdbs=pdbs)
    with pytest.raises(GpuFleetError) as err:
        run(api)
    assert err.value.msg == (
        "gpu_drain: node gpu-a: the eviction of pod ml/train-0 failed: 500 This pod has more than one PodDisruptionBudget, "
        "which the eviction subresource does not support.")
    assert len(fake.evictions) == 0 or fake.evicted() == []


def test_only_the_listed_resources_make_a_gpu_pod(kube):
    fake, api = kube(pdbs=[])
    result = run(api, resources=["nvidia.com/gpu"])
    assert result["evicted"] == ["ml/train-0"]
    assert ("ml", "infer-0") in fake.pods and ("research", "mig-0") in fake.pods


def test_cordon_then_uncordon(kube):
    fake, api = kube()
    first = run(api, state="cordon")
    assert (first["changed"], first["msg"]) == (True, "node gpu-a cordoned")
    assert fake.evictions == []
    assert fake.nodes["gpu-a"]["metadata"]["annotations"] == {ANNOTATION: "driver upgrade to 580"}
    assert run(api, state="cordon")["changed"] is False
    check = run(api, state="uncordon", check_mode=True)
    assert (check["changed"], check["msg"]) == (True, "node gpu-a would be uncordoned")
    assert fake.nodes["gpu-a"]["spec"]["unschedulable"] is True
    done = run(api, state="uncordon")
    assert (done["changed"], done["msg"]) == (True, "node gpu-a uncordoned")
    assert fake.nodes["gpu-a"]["spec"] == {} and fake.nodes["gpu-a"]["metadata"]["annotations"] == {}
    assert fake.writes()[-1][3] == {"spec": {"unschedulable": None}, "metadata": {"annotations": {ANNOTATION: None}}}
    again = run(api, state="uncordon")
    assert (again["changed"], again["msg"]) == (False, "node gpu-a is schedulable")


def test_a_node_someone_else_cordoned_stays_cordoned(kube):
    fake, api = kube(nodes=[K.node("gpu-a", unschedulable=True)], pods=[])
    cordon = run(api, state="cordon")
    assert cordon["changed"] is False
    assert cordon["msg"] == (
        "node gpu-a was already cordoned, not by gpufleet.nvidia (no gpufleet.nvidia/cordoned annotation): "
        "it stays cordoned after the upgrade unless uncordoned with force")
    uncordon = run(api, state="uncordon")
    assert uncordon["changed"] is False
    assert uncordon["msg"] == (
        "node gpu-a was cordoned by someone else (no gpufleet.nvidia/cordoned annotation): left cordoned (force: true uncordons it)")
    assert fake.writes() == []
    forced = run(api, state="uncordon", force=True)
    assert forced["changed"] is True and fake.nodes["gpu-a"]["spec"] == {}


def test_a_stale_annotation_on_a_schedulable_node_is_removed(kube):
    fake, api = kube(nodes=[K.node("gpu-a", annotations={ANNOTATION: "old"})], pods=[])
    result = run(api, state="uncordon")
    assert result["changed"] is True
    assert fake.nodes["gpu-a"]["metadata"]["annotations"] == {}


def test_wait_until_the_node_is_back(kube):
    not_ready = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                            "message": "container runtime network not ready"}],
                            "allocatable": {"nvidia.com/gpu": "0"}}}
    no_gpu_yet = {"status": {"allocatable": {"nvidia.com/gpu": "0"}}}
    fake, api = kube(nodes=[K.node("gpu-a", gpus=8)], pods=[], node_script={"gpu-a": [{}, not_ready, not_ready, no_gpu_yet]})
    clock = Clock()
    result = run(api, clock=clock, state="cordon", wait_ready=True, wait_allocatable={"resource": "nvidia.com/gpu", "count": 8, "mig": False},
                 poll_interval=10, wait_timeout=100)
    assert result["waited"] == 30
    assert result["node"]["ready"] is True and result["node"]["allocatable"] == {"nvidia.com/gpu": "8"}
    assert result["msg"] == "node gpu-a cordoned; Ready, advertising 8 nvidia.com/gpu after 30 s"
    assert fake.nodes["gpu-a"]["spec"]["unschedulable"] is True


def test_a_node_that_does_not_come_back_fails_the_wait(kube):
    fake, api = kube(nodes=[K.node("gpu-a", gpus=4)], pods=[])
    clock = Clock()
    with pytest.raises(GpuFleetError) as err:
        run(api, clock=clock, state="cordon", wait_allocatable={"resource": "nvidia.com/gpu", "count": 8, "mig": False},
            poll_interval=10, wait_timeout=30)
    assert err.value.msg == "gpu_drain: node gpu-a did not come back within 30 s: advertises 4 nvidia.com/gpu, expected 8"
    assert clock.now == 30
    assert fake.nodes["gpu-a"]["spec"]["unschedulable"] is True


def test_check_mode_does_not_wait(kube):
    fake, api = kube(nodes=[K.node("gpu-a", ready=False)], pods=[])
    result = run(api, check_mode=True, state="cordon", wait_ready=True)
    assert result["msg"] == "node gpu-a would be cordoned; would wait until it is Ready and advertises its GPUs"
    assert fake.writes() == []


def test_a_node_not_in_the_cluster(kube):
    fake, api = kube()
    with pytest.raises(GpuFleetError) as err:
        run(api, node="gpu-z")
    assert err.value.msg == "gpu_drain: node gpu-z is not in the cluster at %s (set gpufleet_node_name to the host's node name)" % fake.url


# --- the client --------------------------------------------------------------------------------


def test_no_kubeconfig(tmp_path, discovery_cache, monkeypatch):
    monkeypatch.delenv("K8S_AUTH_KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nothing"))
    with pytest.raises(GpuFleetError) as err:
        kube_api.api_client()
    assert err.value.msg == (
        "gpu_drain: no kubeconfig: %s (KUBECONFIG) does not exist; set kubeconfig (gpufleet_kubeconfig), "
        "K8S_AUTH_KUBECONFIG or KUBECONFIG to the cluster's kubeconfig" % (tmp_path / "nothing"))


def test_without_kubernetes_core(tmp_path, monkeypatch):
    monkeypatch.setattr(kube_api, "get_api_client", None)
    with pytest.raises(GpuFleetError) as err:
        kube_api.api_client(str(tmp_path / "kubeconfig"))
    assert err.value.msg == ("gpu_drain: the kubernetes.core collection is not installed on the control host "
                             "(ansible-galaxy collection install kubernetes.core)")


def test_k8s_auth_kubeconfig_and_context(tmp_path, discovery_cache, monkeypatch):
    fake = K.FakeKube([K.node("gpu-a")])
    try:
        monkeypatch.setenv("K8S_AUTH_KUBECONFIG", fake.kubeconfig(str(tmp_path / "kc")))
        api = kube_api.KubeApi(kube_api.api_client(), 5)
        assert api.node("gpu-a")["metadata"]["name"] == "gpu-a"
        with pytest.raises(GpuFleetError) as err:
            kube_api.api_client(context="prod")
        assert err.value.msg.startswith("gpu_drain: the kubeconfig %s cannot be used with context 'prod': " % (tmp_path / "kc"))
    finally:
        fake.close()


def _config(port):
    return {"apiVersion": "v1", "kind": "Config", "current-context": "x",
            "clusters": [{"name": "x", "cluster": {"server": "http://127.0.0.1:%d" % port}}],
            "users": [{"name": "x", "user": {"token": "x"}}], "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}]}


def test_a_cluster_that_does_not_answer(tmp_path, discovery_cache):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(GpuFleetError) as err:
        kube_api.api_client(_config(port), request_timeout=10)
    assert err.value.msg.startswith("gpu_drain: connect: the cluster at http://127.0.0.1:%d does not answer: " % port)


def test_a_cluster_that_takes_the_connection_and_never_answers(tmp_path, discovery_cache):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        port = sock.getsockname()[1]
        with pytest.raises(GpuFleetError) as err:
            kube_api.api_client(_config(port), request_timeout=1)
    assert err.value.msg == "gpu_drain: connect: the cluster at http://127.0.0.1:%d does not answer within 1 s" % port


def test_a_request_that_is_not_answered_in_time(kube):
    fake, api = kube()
    api.timeout = 0.5
    api.core.api_client.configuration.retries = 0
    fake.close(silent=True)
    with pytest.raises(GpuFleetError) as err:
        run(api)
    assert err.value.msg.startswith("gpu_drain: read node gpu-a: the cluster at %s does not answer: " % fake.url)


# --- the pieces ----------------------------------------------------------------------------------


def container_pod(requests=None, limits=None, init=None):
    container = {"name": "c", "resources": {}}
    if requests:
        container["resources"]["requests"] = requests
    if limits:
        container["resources"]["limits"] = limits
    spec = {"containers": [container]}
    if init:
        spec["initContainers"] = [{"name": "i", "resources": {"limits": init}}]
    return {"spec": spec}


@pytest.mark.parametrize("pod, resources, found", [
    (container_pod(limits={"nvidia.com/gpu": "1"}), ["nvidia.com/"], ["nvidia.com/gpu"]),
    (container_pod(requests={"nvidia.com/gpu.shared": 1}), ["nvidia.com/"], ["nvidia.com/gpu.shared"]),
    (container_pod(limits={"nvidia.com/mig-3g.40gb": "2"}), ["nvidia.com/"], ["nvidia.com/mig-3g.40gb"]),
    (container_pod(limits={"nvidia.com/mig-3g.40gb": "2"}), ["nvidia.com/gpu"], []),
    (container_pod(limits={"nvidia.com/gpu": "0"}), ["nvidia.com/"], []),
    (container_pod(limits={"amd.com/gpu": "1", "cpu": "2"}), ["nvidia.com/"], []),
    (container_pod(init={"nvidia.com/gpu": "1"}), ["nvidia.com/"], ["nvidia.com/gpu"]),
    (container_pod(limits={"example.com/fpga": "1"}), ["nvidia.com/gpu", "example.com/fpga"], ["example.com/fpga"]),
])
def test_gpu_resources(pod, resources, found):
    assert drain.gpu_resources(pod, resources) == found


@pytest.mark.parametrize("selector, labels, selected", [
    ({"matchLabels": {"app": "a"}}, {"app": "a", "x": "y"}, True),
    ({"matchLabels": {"app": "a"}}, {"app": "b"}, False),
    ({}, {"app": "a"}, True),  # policy/v1: an empty selector selects every pod of the namespace
    (None, {"app": "a"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}, {"app": "b"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]}, {}, False),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}, {"app": "c"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}, {}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}, {"app": "a"}, False),
    ({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, {"gpu": ""}, True),
    ({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}, {"gpu": ""}, False),
    ({"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]}, {"app": "a"}, False),
])
def test_pdb_selects(selector, labels, selected):
    budget = {"spec": {"selector": selector}} if selector is not None else {"spec": {}}
    assert drain.pdb_selects(budget, labels) is selected


@pytest.mark.parametrize("body, name", [
    ({"message": "Cannot evict pod as it would violate the pod's disruption budget.",
      "details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget train-pdb needs 2 healthy pods and has 2 currently"}]}},
     "train-pdb"),
    ({"message": "Cannot evict pod as it would violate the pod's disruption budget."}, None),
    ({}, None),
])
def test_refusing_budget(body, name):
    assert drain.refusing_budget(body) == name


def test_the_budget_is_found_by_its_selector_when_the_api_does_not_name_it(kube, monkeypatch):
    fake, api = kube(pods=[K.pod("train-0", "gpu-a", labels={"app": "train"})], pdb_refusals={"train": None})
    real = api.evict

    def evict(namespace, name, grace_period=None):
        code, body = real(namespace, name, grace_period)
        body.pop("details", None)
        return code, body

    monkeypatch.setattr(api, "evict", evict)
    with pytest.raises(GpuFleetError) as err:
        run(api, timeout=1, poll_interval=1)
    assert err.value.details["blocked"][0]["pdb"] == "ml/train"
    assert "PodDisruptionBudget ml/train: Cannot evict pod" in err.value.msg
    assert fake.evicted() == []


@pytest.mark.parametrize("extra, msg", [
    ({"timeout": -1}, "gpu_drain: timeout: -1 is not a number of seconds (expected 0 or more)"),
    ({"poll_interval": -0.5}, "gpu_drain: poll_interval: -0.5 is not a number of seconds (expected 0 or more)"),
    ({"request_timeout": 0}, "gpu_drain: request_timeout: 0 is not a number of seconds (expected 1 or more)"),
    ({"kubeconfig": ["a"]}, "gpu_drain: kubeconfig: ['a'] is neither a path nor a kubeconfig as a dict"),
    ({"node": " "}, "gpu_drain: node: the node's name is empty (expected the node's name in the cluster)"),
    ({"resources": ["gpu"]}, "gpu_drain: resources: ['gpu'] is not a list of resource names or prefixes"),
])
def test_bad_parameters_are_refused_before_anything_is_read(kube, extra, msg):
    fake, api = kube()
    with pytest.raises(GpuFleetError) as err:
        run(api, **extra)
    assert err.value.msg.startswith(msg)
    assert fake.requests == []
