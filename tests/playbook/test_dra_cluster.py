"""site.yml with ``gpufleet_cluster_layer: dra``, end to end with ansible-playbook, against the fake API
server and helm of ``tests/unit/plugins/cluster_fake.py`` (DraCluster: FakeCluster's timeline, with /version,
resource.k8s.io/v1, ClusterPolicies, pods and a scheduler that allocates claims).

``--tags cluster`` runs the cluster layer alone, so no discovery runs: each node declares its driver
(``nvidia_driver_version``), and the runtime is the one its kubelet reports. The sequences check that the
GPUCluster path installs the gpu-operator chart with the GPUCluster values, validates the GPUs each node
publishes and one claim per node, writes nothing on a second run but the validation's own probe and nothing
at all in check mode; that the standalone path labels its nodes and its removal takes the release and the
labels away; that unpublished GPUs fail the run; and that a cluster the DRA driver cannot run on
(Kubernetes 1.33, no resource.k8s.io/v1, a foreign ClusterPolicy, containerd 1.7 without CDI) or a node on
R535 is refused with nothing written and the report saying why.
"""

from __future__ import annotations

import os
import sys

import pytest

from ansible_collections.gpufleet.nvidia.tests.playbook import cluster_runs as T
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.cluster_fake import DraCluster, gpu_slice, node

pytest.importorskip("kubernetes")
HOSTS = {
    "gpu-a": {"nvidia_driver_method": "preinstalled", "nvidia_driver_version": "580.159.04"},
    "gpu-b": {"nvidia_driver_method": "package", "nvidia_driver_version": "580.105.08"},
}
PROBE = "/gpufleet-dra-check"
LABEL = "nvidia.com/dra-kubelet-plugin"
ANNOTATION = "gpufleet.nvidia/dra-driver.labels"


def _node(name, runtime="containerd://2.1.4"):
    obj = node(name)
    obj["status"]["nodeInfo"]["containerRuntimeVersion"] = runtime
    return obj


@pytest.fixture
def cluster():
    fake = DraCluster([_node("gpu-a"), _node("gpu-b"), _node("cpu-1")], slices=[gpu_slice("gpu-a", 2), gpu_slice("gpu-b", 8)])
    yield fake
    fake.close()


def _project(tmp, fake, hosts=None, extra=None):
    settings = {
        "gpufleet_cluster_layer": "dra",
        "dra_driver_kubeconfig": fake.kubeconfig(os.path.join(tmp, "kubeconfig")),
        "dra_driver_chart_repo_url": "http://127.0.0.1:1/charts",
        "dra_driver_wait_timeout": "1m",
        "dra_driver_validate_timeout": 10,
        "ansible_python_interpreter": sys.executable,
    }
    os.makedirs(os.path.join(tmp, "bin"), exist_ok=True)
    settings["dra_driver_helm_binary"] = fake.helm_binary(os.path.join(tmp, "bin"))
    settings.update(extra or {})
    T.project(tmp, fake, hosts or HOSTS, settings)


def _writes_outside_the_probe(fake, start):
    """The writes since ``start`` but the claim check's own: its namespace (created by a POST to
    /api/v1/namespaces, the only one on a run whose other namespaces exist), claims and pods."""
    probe = [("api", "POST", "/api/v1/namespaces")]
    return [e for e in fake.timeline[start:] if e in fake.writes() and PROBE not in e[2] and e not in probe]


def _assert_gpucluster_release(fake):
    release = fake.releases[("gpu-operator", "gpu-operator")]
    assert release["status"] == "deployed" and release["chart_version"] == "v26.7.0"
    values = release["values"]
    assert values["gpuCluster"] == {"deployCR": True} and values["clusterPolicy"] == {"deployCR": False}
    assert values["driver"] == {"enabled": False}
    # The checks read the API server's version before helm changed anything.
    version_read = [i for i, e in enumerate(fake.timeline) if e[:2] == ("api", "GET") and e[2] == "/version"]
    assert version_read and version_read[0] < T.index(fake, "helm", "upgrade")


def _assert_validated(fake, out):
    # The claim check ran on both nodes and left nothing behind.
    claims = [e for e in fake.timeline if e[:2] == ("api", "POST") and e[2].endswith("/resourceclaims")]
    assert len(claims) == 2
    assert not [k for k in fake.objects if k[0] in ("ResourceClaim", "Pod")]
    assert "DRA: 2 devices published" in out
    assert "DRA: 8 devices published" in out


def test_the_gpucluster_path_installs_validates_and_a_second_run_writes_nothing(tmp_path, cluster):
    tmp = str(tmp_path)
    _project(tmp, cluster)
    rc, out = T.run(tmp, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    _assert_gpucluster_release(cluster)
    _assert_validated(cluster, out)
    assert T.report(tmp)["run"]["cluster_change"]["state"] == "applied"

    start = len(cluster.timeline)
    rc, out = T.run(tmp, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    assert _writes_outside_the_probe(cluster, start) == []
    assert "upgrade" not in T.helm_calls(cluster, start)

    # Check mode: nothing is written, not even the claim check's probe, and the run says why.
    start = len(cluster.timeline)
    rc, out = T.run(tmp, "--tags", "cluster", "--check")
    assert rc == 0, out[-6000:]
    assert [e for e in cluster.timeline[start:] if e in cluster.writes()] == []
    assert "claim check: not run: check mode" in out


def _assert_removed(fake):
    assert fake.releases == {}
    for name in ("gpu-a", "gpu-b"):
        assert LABEL not in fake.labels(name)
        assert ANNOTATION not in (fake.nodes[name]["metadata"].get("annotations") or {})


def test_the_standalone_path_labels_its_nodes_and_removal_takes_the_release_and_the_labels_away(tmp_path, cluster):
    tmp = str(tmp_path)
    cluster.charts.append("0.5.0")
    _project(tmp, cluster, extra={"dra_driver_operator_version": ""})
    rc, out = T.run(tmp, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    release = cluster.releases[("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu")]
    assert release["values"]["kubeletPlugin"]["nodeSelector"] == {LABEL: "true"}
    assert [n for n in ("gpu-a", "gpu-b", "cpu-1") if cluster.labels(n).get(LABEL) == "true"] == ["gpu-a", "gpu-b"]

    _project(tmp, cluster, extra={"dra_driver_operator_version": "", "dra_driver_state": "absent"})
    rc, out = T.run(tmp, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    _assert_removed(cluster)
    start = len(cluster.timeline)
    rc, out = T.run(tmp, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    assert [e for e in cluster.timeline[start:] if e in cluster.writes() or e[1] == "uninstall"] == []


def test_a_node_whose_gpus_are_not_published_fails_the_validation(tmp_path, cluster):
    tmp = str(tmp_path)
    cluster.slices = [gpu_slice("gpu-a", 2)]
    _project(tmp, cluster)
    rc, out = T.run(tmp, "--tags", "cluster")
    assert rc != 0
    assert "node gpu-b: no GPU published in a ResourceSlice of driver gpu.nvidia.com" in out
    assert T.report(tmp)["run"]["cluster_change"]["state"] == "failed"


@pytest.mark.parametrize("case, change, message", [
    ("kubernetes-1.33", lambda c: setattr(c, "version", "v1.33.2"), "the cluster runs Kubernetes v1.33.2"),
    ("no-resource-api", lambda c: setattr(c, "resource_api", False), "does not serve resource.k8s.io/v1"),
    ("foreign-clusterpolicy", lambda c: c.cluster_policies.append({"metadata": {"name": "cluster-policy", "annotations": {}}}),
     "ClusterPolicy 'cluster-policy' exists"),
    ("containerd-1.7-without-cdi", lambda c: c.nodes["gpu-b"]["status"]["nodeInfo"].update(containerRuntimeVersion="containerd://1.7.27"),
     "node 'gpu-b': its kubelet reports containerd://1.7.27"),
])
def test_a_cluster_dra_cannot_run_on_is_refused_with_nothing_written(tmp_path, cluster, case, change, message):
    tmp = str(tmp_path)
    change(cluster)
    # CDI is on by default (container_toolkit_enable_cdi): the containerd 1.7 case turns it off on gpu-b
    off = {"gpu-b": dict(HOSTS["gpu-b"], container_toolkit_enable_cdi=False)} if "without-cdi" in case else {}
    _project(tmp, cluster, dict(HOSTS, **off))
    rc, out = T.run(tmp, "--tags", "cluster")
    assert rc != 0, case
    assert message in out, out[-4000:]
    assert cluster.writes() == [] and cluster.releases == {}
    report = T.report(tmp)
    # The refusal's message is the list of problems, as the check's assert gives it.
    assert report["run"]["cluster_change"]["state"] == "refused" and message in str(report["run"]["cluster_change"]["msg"])


def test_a_node_on_r535_is_refused_before_the_cluster_is_read(tmp_path, cluster):
    tmp = str(tmp_path)
    hosts = dict(HOSTS, **{"gpu-b": {"nvidia_driver_method": "package", "nvidia_driver_version": "535.309.01"}})
    _project(tmp, cluster, hosts)
    rc, out = T.run(tmp, "--tags", "cluster")
    assert rc != 0 and "driver 535.309.01 (from inventory)" in out
    assert cluster.writes() == [] and not any(e[2] == "/version" for e in cluster.timeline)
