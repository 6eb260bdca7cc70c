"""site.yml's cluster layer against the cluster in KUBECONFIG, with real Helm 3 and 4 and NVIDIA's
real charts, its writes read from the API server's audit log (see conftest.py).

| variable | meaning |
| --- | --- |
| ``GPUFLEET_IT_NODES`` | three or more GPU node names of the cluster (the fleet's package, preinstalled and operator nodes) |
| ``GPUFLEET_IT_CHARTS`` | a folder of packaged charts: gpu-operator-v25.10.0/v26.3.3/v26.7.0, nvidia-device-plugin-0.20.0, dra-driver-nvidia-gpu-*.tgz |
| ``GPUFLEET_IT_AUDIT_LOG`` | the API server's audit log (writes at Metadata level or more) |

Each test leaves the nodes as it found them (labels, annotations, cordons) and removes its releases.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from .conftest import HELM, changed, cluster_client, helm_json, need_chart, site, write_inventory

pytestmark = pytest.mark.integration

NS = "gpufleet-it-op"
DRIVER = "nvidia.com/gpu.deploy.driver"
TOOLKIT = "nvidia.com/gpu.deploy.container-toolkit"
OWNED = (DRIVER, TOOLKIT, "nvidia.com/device-plugin.config", "nvidia.com/mig.config", "nvidia.com/gpu.present",
         "nvidia.com/dra-kubelet-plugin")
ANNOTATIONS = ("gpufleet.nvidia/gpu-operator.labels", "gpufleet.nvidia/device-plugin.labels", "gpufleet.nvidia/dra-driver.labels",
               "gpufleet.nvidia/cordoned")


@pytest.fixture
def fleet(chart_repo, audit):
    client = cluster_client()
    names = [n for n in os.environ.get("GPUFLEET_IT_NODES", "").split(",") if n]
    if len(names) < 3:
        pytest.skip("GPUFLEET_IT_NODES names %d nodes; a mixed fleet needs three" % len(names))
    core = client.CoreV1Api()
    yield core, names[:3], chart_repo, audit
    _clean(core, names[:3])


def _clean(core, names):
    for release, namespace in ((r["name"], r["namespace"]) for r in helm_json("list", "-A")):
        if namespace.startswith("gpufleet-it-"):
            subprocess.run([HELM[3], "uninstall", release, "-n", namespace, "--wait"], stdout=subprocess.PIPE, check=False)
    for name in names:
        core.patch_node(name, {"metadata": {"labels": dict((k, None) for k in OWNED),
                                            "annotations": dict((k, None) for k in ANNOTATIONS)},
                               "spec": {"unschedulable": None}})
    for ns in core.list_namespace().items:
        if ns.metadata.name.startswith("gpufleet-it-"):
            core.delete_namespace(ns.metadata.name)
    # The next test must not find a namespace that is still being deleted.
    for _attempt in range(120):
        if not [ns for ns in core.list_namespace().items if ns.metadata.name.startswith("gpufleet-it-")]:
            break
        time.sleep(1)


def _mixed(names, methods=("package", "preinstalled", "operator")):
    return dict(("it-" + name, {"gpufleet_node_name": name, "nvidia_driver_method": methods[i]}) for i, name in enumerate(names))


def _operator_vars(repo, version="v26.7.0", **extra):
    cluster = {"gpufleet_cluster_layer": "gpu_operator", "gpu_operator_namespace": NS, "gpu_operator_chart_repo_url": repo,
               "gpu_operator_chart_version": version, "gpu_operator_wait_timeout": "3m"}
    cluster.update(extra)
    return cluster


def _values(namespace=NS, release="gpu-operator"):
    return helm_json("get", "values", release, "-n", namespace)


def _revisions(namespace=NS, release="gpu-operator"):
    return [(h["revision"], h["status"]) for h in helm_json("history", release, "-n", namespace)]


def _labels(core, name):
    return core.read_node(name).metadata.labels or {}


def _index(writes, match):
    found = [i for i, w in enumerate(writes) if match(w)]
    assert found, writes
    return found


def _release_stored(writes, release="gpu-operator"):
    """The writes of Helm's release record (a Secret sh.helm.release.v1.NAME.vN)."""
    return _index(writes, lambda w: w[1] == "secrets" and ("sh.helm.release.v1.%s." % release) in w[2])


def _node_patch(name):
    return lambda w: w[0] == "patch" and w[1] == "nodes" and w[2] == name


def test_the_mixed_fleet_twice_then_all_prepared_and_back(fleet, tmp_path):
    core, names, repo, audit = fleet
    pkg, pre, op = names
    write_inventory(tmp_path, _operator_vars(repo), _mixed(names), other_hosts={"it-cpu-1": {}})

    mark = audit.mark()
    rc, out = site(tmp_path, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    writes = audit.writes(mark)
    assert _values()["driver"]["enabled"] is True and _revisions() == [(1, "deployed")]
    assert _labels(core, pkg)[DRIVER] == "false" and _labels(core, pre)[TOOLKIT] == "false" and DRIVER not in _labels(core, op)
    # The labels that keep the operator off the prepared nodes, and the chart's CRDs, before the release.
    first_release = _release_stored(writes)[0]
    assert max(_index(writes, _node_patch(pkg)) + _index(writes, _node_patch(pre))) < first_release
    assert max(_index(writes, lambda w: w[1] == "customresourcedefinitions")) < first_release

    # A second run writes nothing at all, not even a no-op PATCH, and Helm keeps one revision.
    mark = audit.mark()
    rc, out = site(tmp_path, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    assert audit.writes(mark) == [] and set(changed(out).values()) == {0}
    assert _revisions() == [(1, "deployed")]

    # All prepared: the operator node moves to the host's driver (labelled out and cordoned first),
    # the chart narrows (driver and toolkit off), then the labels go, then the node is uncordoned.
    write_inventory(tmp_path, _operator_vars(repo), _mixed(names, ("package", "preinstalled", "preinstalled")),
                    other_hosts={"it-cpu-1": {}})
    mark = audit.mark()
    rc, out = site(tmp_path, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    writes = audit.writes(mark)
    values = _values()
    assert values["driver"]["enabled"] is False and values["toolkit"]["enabled"] is False
    release = _release_stored(writes)[0]
    op_patches = _index(writes, _node_patch(op))
    assert writes[op_patches[0]][3] == {DRIVER: "false"} and op_patches[0] < release
    removals = [i for i in _index(writes, lambda w: w[1] == "nodes") if i not in op_patches[:2]]
    assert min(removals) > release and op_patches[-1] == max(_index(writes, lambda w: w[1] == "nodes"))
    assert all(DRIVER not in _labels(core, n) and TOOLKIT not in _labels(core, n) for n in names)
    assert not core.read_node(op).spec.unschedulable

    # Mixed again: the labels are back before the chart widens.
    write_inventory(tmp_path, _operator_vars(repo), _mixed(names), other_hosts={"it-cpu-1": {}})
    mark = audit.mark()
    rc, out = site(tmp_path, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    writes = audit.writes(mark)
    assert max(_index(writes, lambda w: w[1] == "nodes")) < _release_stored(writes)[0]
    assert _values()["driver"]["enabled"] is True and _labels(core, pkg)[DRIVER] == "false"


def test_upgrade_hops_one_release_line_at_a_time_and_check_mode_writes_nothing(fleet, tmp_path):
    core, names, repo, audit = fleet
    for chart in ("gpu-operator-v25.10.0.tgz", "gpu-operator-v26.3.3.tgz"):
        need_chart(chart)
    write_inventory(tmp_path, _operator_vars(repo, "v25.10.0"), _mixed(names))
    rc, out = site(tmp_path, "--tags", "cluster")
    assert rc == 0, out[-6000:]

    # A skipped line is refused before anything is written.
    write_inventory(tmp_path, _operator_vars(repo, "v26.7.0"), _mixed(names))
    mark = audit.mark()
    rc, out = site(tmp_path, "--tags", "cluster")
    assert rc != 0 and "expected the chart version v26.3.3 first" in out, out[-4000:]
    assert audit.writes(mark) == []

    # Check mode with diff: the values that would change, and no write (dry runs aside).
    write_inventory(tmp_path, _operator_vars(repo, "v26.3.3"), _mixed(names))
    mark = audit.mark()
    rc, out = site(tmp_path, "--tags", "cluster", "--check", "--diff")
    assert rc == 0, out[-6000:]
    assert "-chart_version: v25.10.0" in out and "+chart_version: v26.3.3" in out
    assert audit.writes(mark) == []

    for version in ("v26.3.3", "v26.7.0"):
        write_inventory(tmp_path, _operator_vars(repo, version), _mixed(names))
        rc, out = site(tmp_path, "--tags", "cluster")
        assert rc == 0, out[-6000:]
        assert helm_json("get", "metadata", "gpu-operator", "-n", NS)["version"] == version
    assert [s for _r, s in _revisions()] == ["superseded", "superseded", "deployed"]


def test_a_failed_upgrade_fails_the_run_and_the_next_run_repairs_it(fleet, tmp_path):
    core, names, repo, audit = fleet
    write_inventory(tmp_path, _operator_vars(repo), _mixed(names))
    rc, out = site(tmp_path, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    # Every node cordoned: the operator's new pod cannot be scheduled and helm's wait times out.
    every = [n.metadata.name for n in core.list_node().items]
    cordoned = [n for n in every if not core.read_node(n).spec.unschedulable]
    for name in cordoned:
        core.patch_node(name, {"spec": {"unschedulable": True}})
    try:
        write_inventory(tmp_path, _operator_vars(repo, gpu_operator_wait_timeout="20s",
                                                 gpu_operator_values_overrides={"operator": {"resources": {"limits": {"memory": "351Mi"}}}}),
                        _mixed(names))
        rc, out = site(tmp_path, "--tags", "cluster")
        assert rc != 0 and "the next run upgrades (repairs) it" in out, out[-4000:]
        assert _revisions()[-1][1] == "failed"
    finally:
        for name in cordoned:
            core.patch_node(name, {"spec": {"unschedulable": None}})
    rc, out = site(tmp_path, "--tags", "cluster")
    assert rc == 0 and "repair: release gpu-operator is failed" in out, out[-4000:]
    assert _revisions()[-1][1] == "deployed"


def test_a_cluster_setting_on_a_group_is_refused_whatever_limit_says(fleet, tmp_path):
    core, names, repo, audit = fleet
    groups = {"gpu_nodes": {"hosts": _mixed(names), "vars": {"gpu_operator_dcgm_exporter_enabled": True}}}
    write_inventory(tmp_path, _operator_vars(repo), {}, other_hosts={"it-cpu-1": {}}, groups=groups)
    mark = audit.mark()
    for args in ((), ("--limit", "it-" + names[0])):
        rc, out = site(tmp_path, "--tags", "cluster", *args)
        assert rc != 0 and "gpu_operator_dcgm_exporter_enabled is not the same on every host" in out, out[-4000:]
    assert audit.writes(mark) == []


def test_a_closed_port_is_refused_with_the_connection_error(fleet, tmp_path):
    core, names, repo, audit = fleet
    kubeconfig = tmp_path / "closed.yaml"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n")
    write_inventory(tmp_path, _operator_vars(repo, gpufleet_kubeconfig=str(kubeconfig)), _mixed(names))
    rc, out = site(tmp_path, "--tags", "cluster")
    assert rc != 0 and "Connection refused" in out and "cannot read the cluster (" in out, out[-4000:]


def test_the_device_plugin_path_twice_and_with_helm_4(fleet, tmp_path):
    core, names, repo, audit = fleet
    need_chart("nvidia-device-plugin-0.20.0.tgz")
    need_chart("dcgm-exporter-*.tgz")
    cluster = {"gpufleet_cluster_layer": "device_plugin", "device_plugin_namespace": "gpufleet-it-dp",
               "device_plugin_chart_repo_url": repo, "device_plugin_chart_version": "0.20.0", "device_plugin_wait": False,
               "device_plugin_dcgm_exporter_chart_repo_url": repo,
               "device_plugin_values_overrides": {"runtimeClassName": ""}}
    write_inventory(tmp_path, cluster, _mixed(names, ("package", "preinstalled", "package")))
    for helm in (3, 4):
        rc, out = site(tmp_path, "--tags", "cluster", helm=helm)
        assert rc == 0, out[-6000:]
        assert ("helm v%d." % helm) in out
        mark = audit.mark()
        rc, out = site(tmp_path, "--tags", "cluster", helm=helm)
        assert rc == 0 and audit.writes(mark) == [], out[-4000:]
    assert _revisions("gpufleet-it-dp", "nvidia-device-plugin") == [(1, "deployed")]


def test_the_default_dra_path_passes_the_charts_own_dra_check(fleet, tmp_path):
    # GPU Operator v26.7.0's GPUCluster path: helm template is given the cluster's APIs, so the
    # chart's "requires a Kubernetes cluster that supports Dynamic Resource Allocation" sees the truth.
    core, names, repo, audit = fleet
    cluster = {"gpufleet_cluster_layer": "dra", "dra_driver_operator_version": "v26.7.0", "dra_driver_chart_repo_url": repo,
               "dra_driver_namespace": NS, "dra_driver_validate": False}
    hosts = _mixed(names, ("package", "package", "package"))
    for hv in hosts.values():
        hv.update(nvidia_driver_version="580", container_toolkit_enable_cdi=True)
    write_inventory(tmp_path, cluster, hosts)
    mark = audit.mark()
    rc, out = site(tmp_path, "--tags", "cluster", "--check")
    assert rc == 0, out[-6000:]
    assert "requires a Kubernetes cluster that supports Dynamic Resource Allocation" not in out
    assert audit.writes(mark) == []


def _full_run_hosts(names, methods):
    """Hosts that site.yml discovers for real: each reads the captured H200 host (tests/unit/fixtures/hosts)."""
    from ansible_collections.gpufleet.nvidia.tests.unit import hostfs
    root = hostfs.materialize(os.path.join(os.path.dirname(os.path.dirname(__file__)), "unit", "fixtures", "hosts",
                                           "ubuntu2404-h200-preinstalled", "root"))
    hosts = _mixed(names, methods)
    for hv in hosts.values():
        hv.update(discover_host_root=root, validate_host_root=root, discover_preflight=False, gpufleet_become=False,
                  validate_cluster=False, container_toolkit_enabled=False)
    return hosts


def test_an_unreachable_declared_node_refuses_the_change_with_zero_writes(fleet, tmp_path):
    core, names, repo, audit = fleet
    hosts = _full_run_hosts(names, ("package", "preinstalled", "operator"))
    hosts["it-" + names[0]].update(ansible_connection="ssh", ansible_host="127.0.0.1", ansible_port=1, ansible_user="nobody")
    write_inventory(tmp_path, _operator_vars(repo), hosts)
    mark = audit.mark()
    rc, out = site(tmp_path, "--limit", "it-%s,it-%s" % tuple(names[:2]))
    assert rc != 0 and "failed or was unreachable in this run" in out, out[-4000:]
    assert audit.writes(mark) == []


def test_a_host_layer_that_fails_holds_back_what_relies_on_it(fleet, tmp_path):
    # The fleet on the operator's driver; then one node declared package, whose driver layer fails
    # (its privilege escalation cannot work: su to a user that does not exist). It was labelled out
    # of the operator's driver and cordoned before the host layer; the failure holds the change back:
    # the node goes back to the operator's driver (the label goes again), the release is untouched,
    # the node stays cordoned, and the run fails saying so.
    core, names, repo, audit = fleet
    pkg = names[0]
    write_inventory(tmp_path, _operator_vars(repo), _mixed(names, ("operator", "operator", "operator")))
    rc, out = site(tmp_path, "--tags", "cluster")
    assert rc == 0, out[-6000:]
    hosts = _full_run_hosts(names, ("package", "operator", "operator"))
    hosts["it-" + pkg].update(gpufleet_become=True, ansible_become_method="ansible.builtin.su",
                              ansible_become_user="gpufleet-no-such-user")
    write_inventory(tmp_path, _operator_vars(repo), hosts)
    mark = audit.mark()
    rc, out = site(tmp_path, "--limit", "it-" + pkg)
    assert rc != 0 and "at the driver layer" in out, out[-6000:]
    writes = audit.writes(mark)
    patches = [w for w in writes if w[1] == "nodes" and w[2] == pkg]
    assert patches and patches[0][3] == {DRIVER: "false"}, writes
    assert not [w for w in writes if w[1] == "secrets" and "sh.helm.release" in w[2]], writes
    assert _revisions() == [(1, "deployed")] and _values()["driver"]["enabled"] is True
    assert DRIVER not in _labels(core, pkg) and core.read_node(pkg).spec.unschedulable
    with open(os.path.join(str(tmp_path), "report", "gpufleet-report.json")) as f:
        change = json.load(f)["run"]["cluster_change"]
    assert "held back: it-%s: its host layer failed while it moved" % pkg in change["msg"], change
