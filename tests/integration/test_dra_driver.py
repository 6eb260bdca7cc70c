"""The dra_driver role against the cluster in KUBECONFIG: install, a second run that changes nothing, removal.

Opt-in (``GPUFLEET_IT_DRA=1``): the nodes need GPUs with an R580 or later driver on the host and a
runtime that injects CDI devices, and the cluster Kubernetes 1.34.2 or later; it is skipped, with the
reason shown, without KUBECONFIG, helm, an answering cluster, or that opt-in.

| variable | meaning |
| --- | --- |
| ``GPUFLEET_IT_NODES`` | comma-separated GPU node names (default: every node) |
| ``GPUFLEET_IT_DRA_OPERATOR_VERSION`` | ``dra_driver_operator_version`` (default '': the standalone chart) |
| ``GPUFLEET_IT_DRA_CHART`` | a local chart (.tgz or directory) instead of NVIDIA's repository |
| ``GPUFLEET_IT_DRIVER_VERSION`` | the nodes' driver, as ``nvidia_driver_version`` (default 580: no discovery runs) |
| ``GPUFLEET_IT_ENABLE_CDI=1`` | the nodes' containerd 1.7 has CDI on (``container_toolkit_enable_cdi``) |
| ``GPUFLEET_IT_KEEP=1`` | leave what the test installed |
"""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from . import test_cluster as C

pytestmark = pytest.mark.integration
LABEL = "nvidia.com/dra-kubelet-plugin"
ANNOTATION = "gpufleet.nvidia/dra-driver.labels"
NAMESPACE = "gpufleet-it-dra"
RELEASE = "gpufleet-it-dra"


@pytest.fixture(scope="module")
def dra_cluster():
    client, nodes = C._skip_unless_cluster()
    wanted = [n for n in os.environ.get("GPUFLEET_IT_NODES", "").split(",") if n]
    names = [n.metadata.name for n in nodes if not wanted or n.metadata.name in wanted]
    if not names:
        pytest.skip("none of GPUFLEET_IT_NODES (%s) is a node of the cluster" % ",".join(wanted))
    if os.environ.get("GPUFLEET_IT_DRA") != "1":
        pytest.skip("GPUFLEET_IT_DRA is not 1: the DRA driver needs GPU nodes on R580 with a CDI-capable runtime")
    version = client.VersionApi().get_code().git_version
    parts = tuple(int(p) for p in version.lstrip("v").split("+")[0].split("-")[0].split(".")[:3])
    if parts < (1, 34, 2):
        pytest.skip("the cluster runs Kubernetes %s; the DRA driver needs 1.34.2 or later" % version)
    return client, names


def _project(tmp, names, state="present"):
    operator = os.environ.get("GPUFLEET_IT_DRA_OPERATOR_VERSION", "")
    role_vars = {"dra_driver_operator_version": operator, "dra_driver_state": state, "dra_driver_validate_timeout": 600}
    if not operator:
        role_vars.update(dra_driver_namespace=NAMESPACE, dra_driver_release_name=RELEASE)
    if os.environ.get("GPUFLEET_IT_DRA_CHART"):
        role_vars["dra_driver_chart_path"] = os.environ["GPUFLEET_IT_DRA_CHART"]
    C._project(tmp, names, "dra_driver", role_vars)
    path = os.path.join(str(tmp), "inventory.yml")
    with open(path) as f:
        inventory = yaml.safe_load(f)
    for hv in inventory["all"]["children"]["gpu_nodes"]["hosts"].values():
        hv.pop("gpufleet_sharing_config", None)
        hv["nvidia_driver_version"] = os.environ.get("GPUFLEET_IT_DRIVER_VERSION", "580")
        hv["container_toolkit_enable_cdi"] = os.environ.get("GPUFLEET_IT_ENABLE_CDI") == "1"
    with open(path, "w") as f:
        yaml.safe_dump(inventory, f)


def _release():
    operator = os.environ.get("GPUFLEET_IT_DRA_OPERATOR_VERSION", "")
    return ("gpu-operator", "gpu-operator") if operator else (NAMESPACE, RELEASE)


def _slices_by_node(client):
    api = client.CustomObjectsApi()
    items = api.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")["items"]
    return set(s["spec"].get("nodeName") for s in items if s["spec"].get("driver") == "gpu.nvidia.com")


def _check_installed(client, names, out, namespace, release):
    assert "DRA:" in out and "devices published" in out
    assert C._helm_release(namespace, release)[0]["status"] == "deployed"
    assert set(names) <= _slices_by_node(client)
    standalone = not os.environ.get("GPUFLEET_IT_DRA_OPERATOR_VERSION")
    for name in names:
        labels = client.CoreV1Api().read_node(name).metadata.labels or {}
        assert (labels.get(LABEL) == "true") is standalone, (name, labels)


def _check_removed(client, names, namespace, release):
    assert C._helm_release(namespace, release) == []
    for name in names:
        meta = client.CoreV1Api().read_node(name).metadata
        assert LABEL not in (meta.labels or {})
        assert ANNOTATION not in (meta.annotations or {})


def _cleanup(client, names, namespace, release):
    if os.environ.get("GPUFLEET_IT_KEEP") == "1":
        return
    subprocess.run(["helm", "uninstall", release, "-n", namespace, "--wait"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    for name in names:
        client.CoreV1Api().patch_node(name, {"metadata": {"labels": {LABEL: None}, "annotations": {ANNOTATION: None}}})


def test_install_a_second_run_and_removal(dra_cluster, tmp_path):
    client, names = dra_cluster
    namespace, release = _release()
    _project(tmp_path, names)
    try:
        first, out = C._run(tmp_path)
        assert sum(first.values()) > 0
        _check_installed(client, names, out, namespace, release)
        # A second run and a check-mode run change nothing (the claim check's probe reports no change).
        assert sum(C._run(tmp_path)[0].values()) == 0
        assert sum(C._run(tmp_path, "--check")[0].values()) == 0

        _project(tmp_path, names, state="absent")
        assert sum(C._run(tmp_path)[0].values()) > 0
        _check_removed(client, names, namespace, release)
        assert sum(C._run(tmp_path)[0].values()) == 0
    finally:
        _cleanup(client, names, namespace, release)
