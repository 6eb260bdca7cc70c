"""The cluster layer against the cluster in KUBECONFIG (see README.md beside this file)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "gpufleet", "nvidia")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
NAMESPACE = "gpufleet-it-device-plugin"
RELEASE = "gpufleet-it-device-plugin"
OPERATOR_NAMESPACE = "gpufleet-it-gpu-operator"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
DRIVER_LABEL = "nvidia.com/gpu.deploy.driver"
TOOLKIT_LABEL = "nvidia.com/gpu.deploy.container-toolkit"
OWNED_LABELS = (CONFIG_LABEL, "nvidia.com/gpu.present", DRIVER_LABEL, TOOLKIT_LABEL)
ANNOTATIONS = ("gpufleet.nvidia/device-plugin.labels", "gpufleet.nvidia/gpu-operator.labels")
SITE = os.path.join(ROOT, "playbooks", "site.yml")


def _skip_unless_cluster():
    if not os.environ.get("KUBECONFIG"):
        pytest.skip("KUBECONFIG is not set: no cluster to run the cluster layer against")
    if shutil.which("helm") is None:
        pytest.skip("helm is not on PATH: the roles need it on the control host")
    try:
        from kubernetes import client, config
    except ImportError:
        pytest.skip("the Python kubernetes client is not installed")
    try:
        config.load_kube_config()
        nodes = client.CoreV1Api().list_node(_request_timeout=10).items
    except Exception as exc:  # any failure to reach the API server
        pytest.skip("the cluster in KUBECONFIG does not answer: %s" % str(exc).splitlines()[0][:200])
    return client, nodes


@pytest.fixture(scope="module")
def cluster():
    client, nodes = _skip_unless_cluster()
    wanted = [n for n in os.environ.get("GPUFLEET_IT_NODES", "").split(",") if n]
    names = [n.metadata.name for n in nodes if not wanted or n.metadata.name in wanted]
    if not names:
        pytest.skip("none of GPUFLEET_IT_NODES (%s) is a node of the cluster" % ",".join(wanted))
    if not os.path.islink(LINK):
        os.makedirs(os.path.dirname(LINK), exist_ok=True)
        os.symlink(ROOT, LINK)
    return client, names


def _project(tmp, names, role, role_vars):
    hosts = {}
    for index, name in enumerate(names):
        hv = {"gpufleet_node_name": name, "nvidia_driver_method": "preinstalled"}
        # The first node shares its GPUs by time-slicing, the others get the default config.
        if index == 0:
            hv["gpufleet_sharing_config"] = "ts-4"
        hosts["it-" + name] = hv
    inventory = {"all": {
        "children": {"gpu_nodes": {"hosts": hosts}},
        "vars": {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "gpufleet_sharing_configs": {"ts-4": {"strategy": "time-slicing", "replicas": 4}},
        },
    }}
    play = [{"name": "Cluster layer", "hosts": "gpu_nodes", "gather_facts": False,
             "roles": [{"role": "gpufleet.nvidia." + role, "vars": role_vars}]}]
    with open(os.path.join(str(tmp), "inventory.yml"), "w") as f:
        yaml.safe_dump(inventory, f)
    with open(os.path.join(str(tmp), "playbook.yml"), "w") as f:
        yaml.safe_dump(play, f, sort_keys=False)


def _run(tmp, *args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_HOME=os.path.join(str(tmp), "ansible-home"))
    result = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "inventory.yml", "playbook.yml"] + list(args), cwd=str(tmp), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=1800, check=False)
    assert result.returncode == 0, result.stdout[-8000:]
    recap = dict((m.group(1), int(m.group(2))) for m in re.finditer(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)", result.stdout, re.M))
    return recap, result.stdout


def _helm_release(namespace, release):
    out = subprocess.run(["helm", "list", "-n", namespace, "-o", "json"], stdout=subprocess.PIPE, universal_newlines=True, check=True)
    return [r for r in json.loads(out.stdout) if r["name"] == release]


def _cleanup(client, names, namespace, release):
    if os.environ.get("GPUFLEET_IT_KEEP") == "1":
        return
    subprocess.run(["helm", "uninstall", release, "-n", namespace, "--wait"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    core = client.CoreV1Api()
    for name in names:
        core.patch_node(name, {"metadata": {"labels": dict((k, None) for k in OWNED_LABELS),
                                            "annotations": dict((k, None) for k in ANNOTATIONS)}})
    try:
        core.delete_namespace(namespace)
    except Exception:  # already gone
        pass


def test_device_plugin_installs_labels_and_is_idempotent(cluster, tmp_path):
    client, names = cluster
    gpu = os.environ.get("GPUFLEET_IT_GPU") == "1"
    role_vars = {
        "device_plugin_namespace": NAMESPACE,
        "device_plugin_release_name": RELEASE,
        "device_plugin_wait": gpu,
        "device_plugin_fail_on_init_error": gpu,
    }
    if not gpu:
        # No nvidia runtime handler on these nodes: the RuntimeClass is still created and
        # checked, but the plugin's pods keep the default runtime.
        role_vars["device_plugin_values_overrides"] = {"runtimeClassName": ""}
    if os.environ.get("GPUFLEET_IT_DEVICE_PLUGIN_CHART"):
        role_vars["device_plugin_chart_path"] = os.environ["GPUFLEET_IT_DEVICE_PLUGIN_CHART"]
    if os.environ.get("GPUFLEET_IT_DCGM_EXPORTER_CHART"):
        role_vars["device_plugin_dcgm_exporter_chart_path"] = os.environ["GPUFLEET_IT_DCGM_EXPORTER_CHART"]
    _project(tmp_path, names, "device_plugin", role_vars)
    try:
        first = _run(tmp_path)[0]
        assert sum(first.values()) > 0

        node_api = client.NodeV1Api()
        runtime_class = node_api.read_runtime_class("nvidia")
        assert runtime_class.handler == "nvidia"
        core = client.CoreV1Api()
        for index, name in enumerate(names):
            labels = core.read_node(name).metadata.labels or {}
            assert labels.get("nvidia.com/gpu.present") == "true"
            assert labels.get(CONFIG_LABEL) == ("ts-4" if index == 0 else None)
        (release,) = _helm_release(NAMESPACE, RELEASE)
        assert release["status"] == "deployed"
        configmaps = core.list_namespaced_config_map(NAMESPACE).items
        data = dict(kv for cm in configmaps for kv in (cm.data or {}).items())
        assert "ts-4" in data and "replicas: 4" in data["ts-4"]

        second = _run(tmp_path)[0]
        assert second == dict((h, 0) for h in second), "a second run changed something"
        check = _run(tmp_path, "--check")[0]
        assert check == dict((h, 0) for h in check), "check mode after a run reports changes"
        assert _helm_release(NAMESPACE, RELEASE)[0]["revision"] == release["revision"]
    finally:
        _cleanup(client, [], NAMESPACE, "dcgm-exporter")
        _cleanup(client, names, NAMESPACE, RELEASE)


def test_gpu_operator_installs_with_prepared_nodes_and_is_idempotent(cluster, tmp_path):
    if os.environ.get("GPUFLEET_IT_GPU_OPERATOR") != "1":
        pytest.skip("GPUFLEET_IT_GPU_OPERATOR is not 1: the GPU Operator is not installed by this run")
    client, names = cluster
    role_vars = {"gpu_operator_namespace": OPERATOR_NAMESPACE}
    if os.environ.get("GPUFLEET_IT_GPU_OPERATOR_CHART"):
        role_vars["gpu_operator_chart_path"] = os.environ["GPUFLEET_IT_GPU_OPERATOR_CHART"]
    _project(tmp_path, names, "gpu_operator", role_vars)
    try:
        _run(tmp_path)
        (release,) = _helm_release(OPERATOR_NAMESPACE, "gpu-operator")
        assert release["status"] == "deployed"
        values = json.loads(subprocess.run(["helm", "get", "values", "gpu-operator", "-n", OPERATOR_NAMESPACE, "-o", "json"],
                                           stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout)
        assert values["driver"]["enabled"] is False and values["toolkit"]["enabled"] is False
        labels = client.CoreV1Api().read_node(names[0]).metadata.labels or {}
        assert labels.get(CONFIG_LABEL) == "ts-4"
        second = _run(tmp_path)[0]
        assert second == dict((h, 0) for h in second), "a second run changed something"
    finally:
        _cleanup(client, names, OPERATOR_NAMESPACE, "gpu-operator")


# --- site.yml's cluster layer as one checked change -------------------------------------------------
def _site_project(tmp, names, methods, extra=None):
    """An inventory whose gpu_nodes declare ``methods`` (one per node, cycled) for site.yml."""
    hosts = dict(("it-" + name, {"gpufleet_node_name": name, "nvidia_driver_method": methods[i % len(methods)]})
                 for i, name in enumerate(names))
    cluster_vars = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                    "gpufleet_cluster_layer": "gpu_operator", "gpu_operator_namespace": OPERATOR_NAMESPACE,
                    "report_dir": os.path.join(str(tmp), "report")}
    if os.environ.get("GPUFLEET_IT_GPU_OPERATOR_CHART"):
        cluster_vars["gpu_operator_chart_path"] = os.environ["GPUFLEET_IT_GPU_OPERATOR_CHART"]
    cluster_vars.update(extra or {})
    with open(os.path.join(str(tmp), "inventory.yml"), "w") as f:
        yaml.safe_dump({"all": {"vars": cluster_vars, "children": {"gpu_nodes": {"hosts": hosts}}}}, f)


def _site(tmp, *args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_HOME=os.path.join(str(tmp), "ansible-home"))
    result = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "inventory.yml", SITE, "--tags", "cluster"] + list(args), cwd=str(tmp), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=1800, check=False)
    return result.returncode, result.stdout


def test_a_chart_version_that_does_not_exist_changes_nothing(cluster, chart_repo, tmp_path):
    # From a chart repository (conftest.py's, of GPUFLEET_IT_CHARTS): a chart path has its own version,
    # so the missing version would not be asked for (and the chart was installed).
    client, names = cluster
    core = client.CoreV1Api()
    before = dict((n, core.read_node(n).metadata.labels or {}) for n in names)
    _site_project(tmp_path, names, ["package", "operator"],
                  {"gpu_operator_chart_version": "v99.0.0", "gpu_operator_namespace": "gpufleet-it-missing-chart",
                   "gpu_operator_chart_path": "", "gpu_operator_chart_repo_url": chart_repo})
    rc, out = _site(tmp_path)
    # Refused by the plan (a release line the collection does not know) before helm is asked.
    assert rc != 0 and "gpu_operator_chart_version: 'v99.0.0' is not a GPU Operator release" in out, out[-4000:]
    assert dict((n, core.read_node(n).metadata.labels or {}) for n in names) == before
    assert "gpufleet-it-missing-chart" not in [ns.metadata.name for ns in core.list_namespace().items]


def test_mixed_to_all_prepared_and_back(cluster, tmp_path):
    if os.environ.get("GPUFLEET_IT_GPU_OPERATOR") != "1":
        pytest.skip("GPUFLEET_IT_GPU_OPERATOR is not 1: the GPU Operator is not installed by this run")
    client, names = cluster
    if len(names) < 2:
        pytest.skip("a mixed fleet needs two nodes (GPUFLEET_IT_NODES names %d)" % len(names))
    core = client.CoreV1Api()
    try:
        for methods, driver_enabled in ((["preinstalled", "operator"], True), (["preinstalled"], False),
                                        (["preinstalled", "operator"], True)):
            _site_project(tmp_path, names, methods)
            rc, out = _site(tmp_path)
            assert rc == 0, out[-8000:]
            values = json.loads(subprocess.run(["helm", "get", "values", "gpu-operator", "-n", OPERATOR_NAMESPACE, "-o", "json"],
                                               stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout)
            assert values["driver"]["enabled"] is driver_enabled
            (release,) = _helm_release(OPERATOR_NAMESPACE, "gpu-operator")
            assert release["status"] == "deployed"
            for index, name in enumerate(names):
                labels = core.read_node(name).metadata.labels or {}
                prepared = methods[index % len(methods)] != "operator"
                assert (labels.get(DRIVER_LABEL) == "false") == (driver_enabled and prepared), (name, labels)
            rc, out = _site(tmp_path)
            assert rc == 0 and set(re.findall(r"changed=(\d+)", out)) == {"0"}, out[-4000:]
    finally:
        _cleanup(client, names, OPERATOR_NAMESPACE, "gpu-operator")
