"""site.yml's cluster layer as one checked change, end to end with ansible-playbook, against a fake
API server and a fake helm that share one timeline (``tests/unit/plugins/cluster_fake.py``).

The inventory declares a mixed fleet in ``gpu_nodes``: a package node, a pre-installed one and
one left to the operator. ``--tags cluster`` runs the cluster layer alone; the sequences check
the order of what reaches the cluster (labels that keep the operator off a node are added before
the chart widens, removed only after it narrowed), that a failed release fails the run and is
repaired by the next, and that a change that cannot work (a chart version the repository lacks,
a declared node that is unreachable, a wrong cluster layer, no helm, no kubeconfig) is refused
with nothing written to the cluster and no host layer run, and the report written all the same.
"""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.playbook import cluster_runs as C
from ansible_collections.gpufleet.nvidia.tests.unit import hostfs
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.cluster_fake import FakeCluster, node

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import fleets as F

pytest.importorskip("kubernetes")
H200_ROOT = os.path.join(F.FIXTURES, "hosts", "ubuntu2404-h200-preinstalled", "root")
DRIVER = "nvidia.com/gpu.deploy.driver"
TOOLKIT = "nvidia.com/gpu.deploy.container-toolkit"
ANN = "gpufleet.nvidia/gpu-operator.labels"
MIXED = {
    "gpu-pkg": {"nvidia_driver_method": "package"},
    "gpu-pre": {"nvidia_driver_method": "preinstalled"},
    "gpu-op": {"nvidia_driver_method": "operator"},
}


@pytest.fixture
def cluster():
    fake = FakeCluster([node("gpu-pkg"), node("gpu-pre"), node("gpu-op"), node("cpu-1")])
    yield fake
    fake.close()


def _node_patches(fake, start=0):
    return [i for i, e in enumerate(fake.timeline) if i >= start and e[:2] == ("api", "PATCH") and e[2].startswith("/api/v1/nodes/")]


def test_mixed_to_all_prepared_and_back_never_widens_the_operator(tmp_path, cluster):
    tmp = str(tmp_path)
    C.project(tmp, cluster, MIXED)
    rc, out = C.run(tmp, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    release = cluster.releases[("gpu-operator", "gpu-operator")]
    assert release["status"] == "deployed" and release["values"]["driver"]["enabled"] is True
    assert release["values"]["operator"] == {"upgradeCRD": False} and release["chart_version"] == "v26.7.0"
    assert cluster.labels("gpu-pkg")[DRIVER] == "false" and cluster.labels("gpu-pre")[TOOLKIT] == "false"
    # The chart's CRDs were applied (created) before the release.
    crds = [i for i, e in enumerate(cluster.timeline) if e[:2] == ("api", "POST") and "customresourcedefinitions" in e[2]]
    assert crds and max(crds) < C.index(cluster, "helm", "upgrade")
    assert ("CustomResourceDefinition", None, "clusterpolicies.nvidia.com") in cluster.objects
    assert DRIVER not in cluster.labels("gpu-op")
    # The labels that keep the operator's driver off the prepared nodes came before the chart.
    assert max(_node_patches(cluster)) < C.index(cluster, "helm", "upgrade")
    report = C.report(tmp)
    assert report["run"]["cluster_change"]["state"] == "applied" and report["status"] != "incomplete"

    # A second run writes nothing.
    start = len(cluster.timeline)
    rc, out = C.run(tmp, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    assert [e for e in cluster.timeline[start:] if e in cluster.writes()] == []
    assert "upgrade" not in C.helm_calls(cluster, start)

    # All prepared: the chart narrows first (driver and toolkit off), the labels go after it.
    C.project(tmp, cluster, dict(MIXED, **{"gpu-op": {"nvidia_driver_method": "preinstalled"}}))
    start = len(cluster.timeline)
    rc, out = C.run(tmp, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    release = cluster.releases[("gpu-operator", "gpu-operator")]
    assert release["values"]["driver"]["enabled"] is False and release["values"]["toolkit"]["enabled"] is False
    upgrade = C.index(cluster, "helm", "upgrade", start)
    # gpu-op moves from the operator's driver to the host's: labelled out and cordoned before
    # anything else (before the host layers), uncordoned last; every other label goes after the chart.
    patches = _node_patches(cluster, start)
    moved = [i for i in patches if cluster.timeline[i][2].endswith("/gpu-op")]
    assert moved and moved[0] < upgrade and moved[1] < upgrade and moved[-1] == max(patches)
    assert min(set(patches) - set(moved[:2])) > upgrade
    assert all(DRIVER not in cluster.labels(n) and TOOLKIT not in cluster.labels(n) for n in MIXED)
    assert all(ANN not in cluster.nodes[n]["metadata"]["annotations"] for n in MIXED)
    assert not cluster.nodes["gpu-op"].get("spec", {}).get("unschedulable")

    # Mixed again: the labels are back before the chart widens.
    C.project(tmp, cluster, MIXED)
    start = len(cluster.timeline)
    rc, out = C.run(tmp, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    upgrade = C.index(cluster, "helm", "upgrade", start)
    assert _node_patches(cluster, start) and max(_node_patches(cluster, start)) < upgrade
    assert cluster.labels("gpu-pkg")[DRIVER] == "false"
    assert cluster.releases[("gpu-operator", "gpu-operator")]["values"]["driver"]["enabled"] is True


def test_a_failed_release_fails_the_run_and_the_next_run_repairs_it(tmp_path, cluster):
    tmp = str(tmp_path)
    C.project(tmp, cluster, MIXED)
    assert C.run(tmp, "--tags", "cluster")[0] == 0
    cluster.fail_next_upgrade = True
    C.project(tmp, cluster, MIXED, {"gpufleet_sharing_configs": {"ts": {"strategy": "time-slicing", "replicas": 4}},
                                    "gpufleet_sharing_default": "ts"})
    rc, out = C.run(tmp, "--tags", "cluster")
    assert rc != 0
    assert "pre-upgrade hooks failed" in out and "the next run upgrades (repairs) it" in out
    assert cluster.releases[("gpu-operator", "gpu-operator")]["status"] == "failed"
    report = C.report(tmp)
    assert report["status"] == "failed" and report["run"]["cluster_change"]["state"] == "failed"
    # Nothing in the inventory changed; the release is not deployed: the next run upgrades it again.
    start = len(cluster.timeline)
    rc, out = C.run(tmp, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    assert "repair" in out and "upgrade" in C.helm_calls(cluster, start)
    release = cluster.releases[("gpu-operator", "gpu-operator")]
    assert release["status"] == "deployed" and release["revision"] == 3


def test_a_chart_version_the_repository_lacks_changes_nothing(tmp_path, cluster):
    tmp = str(tmp_path)
    # A release of a known line (so the plan lets it through, with a warning) that the repository lacks.
    C.project(tmp, cluster, MIXED, {"gpu_operator_chart_version": "v26.7.9"})
    rc, out = C.run(tmp, "--tags", "cluster")
    assert rc != 0
    assert "v26.7.9 is not a release this collection was tested with" in out
    assert 'chart "gpu-operator" version "v26.7.9" not found' in out
    assert cluster.writes() == [] and cluster.releases == {}
    assert all(DRIVER not in cluster.labels(n) for n in MIXED)
    assert C.report(tmp)["run"]["cluster_change"]["state"] == "refused"


def test_a_release_line_the_collection_does_not_know_is_refused_by_the_plan(tmp_path, cluster):
    tmp = str(tmp_path)
    C.project(tmp, cluster, MIXED, {"gpu_operator_chart_version": "v99.0.0"})
    rc, out = C.run(tmp, "--tags", "cluster")
    assert rc != 0
    assert "gpu_operator_chart_version: 'v99.0.0' is not a GPU Operator release this collection knows" in out
    assert C.helm_calls(cluster) == [] and cluster.writes() == []


def test_a_value_the_chart_release_does_not_know_is_refused_by_name(tmp_path, cluster):
    tmp = str(tmp_path)
    # The chart's defaults as the fake repository answers them: the components, without "bogus".
    cluster.chart_values = {"driver": {"enabled": True, "version": ""}, "toolkit": {"enabled": True, "env": []},
                            "cdi": {"enabled": True}, "dcgmExporter": {"enabled": True}, "mig": {"strategy": "single"},
                            "migManager": {"enabled": True, "config": {}}, "devicePlugin": {"config": {}},
                            "gds": {"enabled": False}, "gdrcopy": {"enabled": False}, "operator": {"upgradeCRD": True}}
    C.project(tmp, cluster, MIXED, {"gpu_operator_values_overrides": {"driver": {"bogus": 1}, "dcgmExporter": {"enabled": "yes"}}})
    rc, out = C.run(tmp, "--tags", "cluster")
    assert rc != 0
    assert "values the chart does not know: driver.bogus" in out
    assert "helm: chart gpu-operator v26.7.0" in out
    assert "upgrade" not in C.helm_calls(cluster) and cluster.writes() == []
    assert C.report(tmp)["run"]["cluster_change"]["state"] == "refused"


def test_an_upgrade_that_skips_a_release_line_is_refused_with_the_path(tmp_path, cluster):
    tmp = str(tmp_path)
    C.project(tmp, cluster, MIXED, {"gpu_operator_chart_version": "v25.10.0"})
    rc, out = C.run(tmp, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    assert "v25.10.0 is of the 25.10 line: end of support" in out
    assert cluster.releases[("gpu-operator", "gpu-operator")]["chart_version"] == "v25.10.0"

    # 25.10 -> 26.7 skips 26.3: refused before anything is written, with the release to take.
    C.project(tmp, cluster, MIXED)
    start = len(cluster.timeline)
    rc, out = C.run(tmp, "--tags", "cluster")
    assert rc != 0
    assert "upgrades go one release line at a time (25.10 -> 26.3 -> 26.7)" in out
    assert "expected the chart version v26.3.3 first: run with it, then v26.7.0" in out
    assert [e for e in cluster.timeline[start:] if e in cluster.writes()] == []

    # One line at a time: each hop is applied and checked (deployed with its chart and values).
    for version in ("v26.3.3", "v26.7.0"):
        C.project(tmp, cluster, MIXED, {"gpu_operator_chart_version": version})
        rc, out = C.run(tmp, "--tags", "cluster")
        assert rc == 0, out[-6000:]
        release = cluster.releases[("gpu-operator", "gpu-operator")]
        assert release["status"] == "deployed" and release["chart_version"] == version

    # Back to an older line: refused.
    C.project(tmp, cluster, MIXED, {"gpu_operator_chart_version": "v26.3.3"})
    rc, out = C.run(tmp, "--tags", "cluster")
    assert rc != 0 and "goes back to an older release line" in out


def _full_run_hosts(root, unreachable=None):
    hosts = {}
    for name, hv in MIXED.items():
        hv = dict(hv, ansible_connection="local", discover_host_root=root, discover_preflight=False,
                  gpufleet_become=False, container_toolkit_enabled=False)
        if name == unreachable:
            hv.update(ansible_connection="ssh", ansible_host="127.0.0.1", ansible_port=1, ansible_user="nobody")
        hosts[name] = hv
    return hosts


@pytest.mark.parametrize("case,extra,message", [
    ("unreachable node", None, "host 'gpu-op': failed or was unreachable in this run"),
    ("wrong cluster layer", {"gpufleet_cluster_layer": "gpu-operator"}, "gpufleet_cluster_layer: 'gpu-operator' is not a cluster layer"),
    ("no helm", {"gpu_operator_helm_binary": "/nonexistent/helm"}, "helm: cannot run /nonexistent/helm"),
    ("no kubeconfig", {"gpu_operator_kubeconfig": "/nonexistent/kubeconfig"},
     "gpu_operator_kubeconfig: '/nonexistent/kubeconfig' is not a file"),
    # set fleet-wide, the message names the variable the user set
    ("no fleet kubeconfig", {"gpu_operator_kubeconfig": "{{ gpufleet_kubeconfig }}", "gpufleet_kubeconfig": "/nonexistent/kubeconfig"},
     "gpufleet_kubeconfig: '/nonexistent/kubeconfig' is not a file"),
])
def test_a_change_that_cannot_work_is_refused_before_any_host_layer(tmp_path, cluster, case, extra, message):
    tmp = str(tmp_path)
    root = hostfs.materialize(H200_ROOT)
    C.project(tmp, cluster, _full_run_hosts(root, "gpu-op" if case == "unreachable node" else None), extra)
    os.makedirs(os.path.join(tmp, "report"))
    with open(os.path.join(tmp, "report", "gpufleet-report.json"), "w") as f:
        json.dump({"status": "ok", "generated_at": "an earlier run"}, f)
    rc, out = C.run(tmp)
    assert rc != 0
    assert message in out, out[-6000:]
    assert "cluster change refused before any layer ran, nothing changed" in out
    # the run's last word is the refusal, not "The fleet's validation failed (0 nodes failed, 0 drifted)"
    last = out[out.index("The fleet failed: "):].splitlines()[0]
    assert "cluster change refused before any layer ran" in last and "0 nodes" not in last
    assert cluster.writes() == [] and cluster.releases == {}
    # The driver, toolkit and validate plays ended at their first task.
    assert "TASK [gpufleet.nvidia.nvidia_driver" not in out and "TASK [gpufleet.nvidia.validate" not in out
    report = C.report(tmp)
    assert report["generated_at"] != "an earlier run" and report["status"] == "failed"
    assert report["run"]["cluster_change"]["state"] == "refused"
    assert [r["host"] for r in report["nodes"]] == sorted(MIXED) or sorted(r["host"] for r in report["nodes"]) == sorted(MIXED)


def test_a_failed_first_install_fails_the_run(tmp_path, cluster):
    tmp = str(tmp_path)
    cluster.fail_next_upgrade = True
    C.project(tmp, cluster, MIXED)
    rc, out = C.run(tmp, "--tags", "cluster")
    assert rc != 0 and "pre-upgrade hooks failed" in out
    assert cluster.releases[("gpu-operator", "gpu-operator")]["status"] == "failed"


def test_check_mode_shows_the_values_that_would_change_and_changes_nothing(tmp_path, cluster):
    tmp = str(tmp_path)
    C.project(tmp, cluster, MIXED)
    assert C.run(tmp, "--tags", "cluster")[0] == 0
    C.project(tmp, cluster, dict(MIXED, **{"gpu-op": {"nvidia_driver_method": "preinstalled"}}))
    start = len(cluster.timeline)
    rc, out = C.run(tmp, "--tags", "cluster", "--check", "--diff")
    assert rc == 0, out[-6000:]
    assert [e for e in cluster.timeline[start:] if e in cluster.writes()] == []
    # The deployed release's values against the planned ones: the driver goes from on to off.
    diff = out[out.index("--- before: release (deployed)"):]
    assert "   driver:\n-    enabled: true\n+    enabled: false" in diff, diff[:3000]
    assert cluster.releases[("gpu-operator", "gpu-operator")]["values"]["driver"]["enabled"] is True


def test_helm_4_is_driven_with_its_own_flags(tmp_path):
    fake = FakeCluster([node(n) for n in MIXED], helm_version="v4.1.4")
    try:
        tmp = str(tmp_path)
        C.project(tmp, fake, MIXED)
        rc, out = C.run(tmp, "--tags", "cluster")
        assert rc == 0, out[-6000:]
        upgrade = [e[2] for e in fake.timeline if e[:2] == ("helm", "upgrade")]
        assert len(upgrade) == 1 and "--wait=watcher" in upgrade[0].split()
        assert "helm v4.1.4" in out
    finally:
        fake.close()


def test_a_limited_run_plans_the_whole_declared_fleet_and_reports_what_it_covers(tmp_path, cluster):
    tmp = str(tmp_path)
    root = hostfs.materialize(H200_ROOT)
    hosts = _full_run_hosts(root)
    hosts["gpu-pkg"].update(ansible_connection="ssh", ansible_host="127.0.0.1", ansible_port=1, ansible_user="nobody")
    C.project(tmp, cluster, hosts, {"gpu_operator_apply": False, "gpu_operator_render_dir": os.path.join(tmp, "render")})
    # gpu-pkg is unreachable but left out of the run: it is planned from the inventory, not refused.
    rc, out = C.run(tmp, "--limit", "gpu-pre,gpu-op", "--tags", "cluster,validate")
    assert os.path.exists(os.path.join(tmp, "render", "node-labels.yaml")), out[-8000:]
    with open(os.path.join(tmp, "render", "node-labels.yaml")) as f:
        labelled = sorted(item["metadata"]["name"] for item in yaml.safe_load(f)["items"])
    assert labelled == ["gpu-pkg", "gpu-pre"], out[-6000:]
    report = C.report(tmp)
    assert report["run"]["partial"] is True and sorted(report["run"]["covers"]) == ["gpu-op", "gpu-pre"]
    assert "localhost" not in [r["host"] for r in report["nodes"]]


def test_a_node_left_to_the_operator_passes_every_task_of_site_yml(tmp_path, cluster):
    # The whole site.yml on the operator node (read from the H200 capture), the package and
    # pre-installed nodes declared but outside the run: the plan covers all three.
    tmp = str(tmp_path)
    root = hostfs.materialize(H200_ROOT)
    hosts = _full_run_hosts(root)
    hosts["gpu-op"] = dict(MIXED["gpu-op"], ansible_connection="local", discover_host_root=root, validate_host_root=root,
                           discover_preflight=False, gpufleet_become=False, validate_cluster=False,
                           container_toolkit_runtime="none")  # the capture has no container runtime
    C.project(tmp, cluster, hosts)
    rc, out = C.run(tmp, "--limit", "gpu-op")
    assert rc == 0, out[-8000:]
    assert "TASK [gpufleet.nvidia.nvidia_driver : Leave the driver to the GPU Operator]" in out
    driver_task = out[out.index("TASK [gpufleet.nvidia.nvidia_driver : Install and pin the NVIDIA driver"):]
    assert driver_task.split("TASK [")[1].strip().endswith("skipping: [gpu-op]"), driver_task[:500]
    assert cluster.labels("gpu-pkg")[DRIVER] == "false" and DRIVER not in cluster.labels("gpu-op")
    assert cluster.releases[("gpu-operator", "gpu-operator")]["values"]["driver"]["enabled"] is True
    report = C.report(tmp)
    assert report["run"]["covers"] == ["gpu-op"] and report["run"]["cluster_change"]["state"] == "applied"
