"""GPU Feature Discovery and NVIDIA's DCGM exporter on the device-plugin path, against the cluster in
KUBECONFIG (see README.md beside this file): installed through the device_plugin role twice, the second
run writing nothing; the GFD labels and the exporter's metrics where the nodes really have GPUs."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from . import test_cluster as C
# The module-scoped fixture, shared.
from .test_cluster import cluster  # noqa: F401 pylint: disable=unused-import

pytestmark = pytest.mark.integration

NAMESPACE = "gpufleet-it-monitoring"
RELEASE = "gpufleet-it-plugin"
EXPORTER = "gpufleet-it-dcgm-exporter"
GFD_LABELS = ("nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.memory")
WRITES = ("create", "update", "patch", "delete", "deletecollection")


def _real_gpus():
    if os.environ.get("GPUFLEET_IT_GPU") != "1":
        pytest.skip("GPUFLEET_IT_GPU is not 1: the cluster's nodes have no real GPUs and no kubelet runs the pods, "
                    "so GFD writes no label and the exporter serves no metric")


def _audit_log():
    path = os.environ.get("GPUFLEET_IT_AUDIT_LOG", "")
    if not path:
        pytest.skip("GPUFLEET_IT_AUDIT_LOG is not set: the API server's audit log (JSON lines) is not readable here, "
                    "so what the second run wrote is not checked")
    if not os.path.isfile(path):
        pytest.skip("GPUFLEET_IT_AUDIT_LOG %s is not a file" % path)
    return path


def _me(client):
    """The user the kubeconfig authenticates as (a SelfSubjectReview)."""
    review = client.AuthenticationV1Api().create_self_subject_review({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    return review.status.user_info.username


def _writes(path, offset, user):
    """The write requests ``user`` made after ``offset`` in the audit log, but dry runs."""
    found = []
    with open(path) as f:
        f.seek(offset)
        for line in f:
            event = json.loads(line)
            if event.get("stage") != "ResponseComplete" or event.get("verb") not in WRITES:
                continue
            if (event.get("user") or {}).get("username") != user or "dryRun=" in event.get("requestURI", ""):
                continue
            ref = event.get("objectRef") or {}
            found.append("%s %s %s/%s" % (event["verb"], ref.get("resource"), ref.get("namespace", ""), ref.get("name", "")))
    return found


@pytest.fixture(scope="module")
def installed(cluster, tmp_path_factory):
    client, names = cluster
    tmp = tmp_path_factory.mktemp("monitoring")
    gpu = os.environ.get("GPUFLEET_IT_GPU") == "1"
    role_vars = {
        "device_plugin_namespace": NAMESPACE,
        "device_plugin_release_name": RELEASE,
        "device_plugin_dcgm_exporter_release_name": EXPORTER,
        "device_plugin_dcgm_exporter_dra": True,
        "device_plugin_wait": gpu,
        "device_plugin_fail_on_init_error": gpu,
    }
    for env, var in (("GPUFLEET_IT_DEVICE_PLUGIN_CHART", "device_plugin_chart_path"),
                     ("GPUFLEET_IT_DCGM_EXPORTER_CHART", "device_plugin_dcgm_exporter_chart_path")):
        if os.environ.get(env):
            role_vars[var] = os.environ[env]
    C._project(tmp, names, "device_plugin", role_vars)
    audit = os.environ.get("GPUFLEET_IT_AUDIT_LOG", "")
    try:
        first = C._run(tmp)[0]
        user = _me(client) if audit and os.path.isfile(audit) else None
        mark = os.path.getsize(audit) if user else 0
        second = C._run(tmp)[0]
        yield {"client": client, "names": names, "first": first, "second": second, "tmp": tmp, "role_vars": role_vars,
               "second_writes": _writes(audit, mark, user) if user else None}
    finally:
        C._cleanup(client, [], NAMESPACE, EXPORTER)
        C._cleanup(client, names, NAMESPACE, RELEASE)


def _daemonsets(client):
    return dict((d.metadata.name, d) for d in client.AppsV1Api().list_namespaced_daemon_set(NAMESPACE).items)


def test_the_exporter_and_gfd_are_installed_on_the_gpu_nodes_in_dra_mode(installed):
    client = installed["client"]
    assert sum(installed["first"].values()) > 0
    (release,) = C._helm_release(NAMESPACE, EXPORTER)
    assert release["status"] == "deployed" and release["chart"] == "dcgm-exporter-4.8.2"
    daemonsets = _daemonsets(client)
    exporter = [d for n, d in daemonsets.items() if "dcgm-exporter" in n]
    gfd = [d for n, d in daemonsets.items() if "gpu-feature-discovery" in n]
    assert len(exporter) == 1 and len(gfd) == 1, sorted(daemonsets)
    spec = exporter[0].spec.template.spec
    assert spec.node_selector == {"nvidia.com/gpu.present": "true"}
    assert spec.runtime_class_name == "nvidia"
    env = dict((e.name, e.value) for c in spec.containers for e in c.env or [])
    assert env.get("KUBERNETES_ENABLE_DRA") == "true"
    deployments = [d.metadata.name for d in client.AppsV1Api().list_namespaced_deployment(NAMESPACE).items]
    assert any("node-feature-discovery" in n or "nfd" in n for n in deployments), deployments
    pods = client.CoreV1Api().list_namespaced_pod(NAMESPACE, label_selector="app.kubernetes.io/name=dcgm-exporter").items
    assert sorted(p.spec.node_name for p in pods) == sorted(installed["names"])


def test_a_second_run_changes_nothing(installed):
    assert installed["second"] == dict((h, 0) for h in installed["second"]), "a second run changed something"


def test_a_second_run_writes_nothing_to_the_api_server(installed):
    _audit_log()
    assert installed["second_writes"] == [], installed["second_writes"]


def test_every_gpu_node_carries_the_gfd_labels(installed):
    _real_gpus()
    core = installed["client"].CoreV1Api()
    for name in installed["names"]:
        labels = core.read_node(name).metadata.labels or {}
        missing = [k for k in GFD_LABELS if not labels.get(k)]
        assert not missing, "node %s lacks %s" % (name, missing)
        assert int(labels["nvidia.com/gpu.count"]) > 0 and int(labels["nvidia.com/gpu.memory"]) > 0


def test_the_exporters_metrics_answer_through_the_api_servers_proxy(installed):
    _real_gpus()
    core = installed["client"].CoreV1Api()
    pods = core.list_namespaced_pod(NAMESPACE, label_selector="app.kubernetes.io/name=dcgm-exporter").items
    assert pods
    for pod in pods:
        text = core.connect_get_namespaced_pod_proxy_with_path(pod.metadata.name + ":9400", NAMESPACE, "metrics")
        assert "DCGM_FI_DEV_GPU_UTIL" in text, "pod %s on %s: %s" % (pod.metadata.name, pod.spec.node_name, text[:300])


def _h200_facts():
    """The gpufleet_nvidia fact of docs/h200/gpu_facts.txt (the module's real output on one H200)."""
    with open(os.path.join(C.ROOT, "docs", "h200", "gpu_facts.txt")) as handle:
        text = handle.read()
    return json.loads(text[text.index("{"):])["ansible_facts"]["gpufleet_nvidia"]


def _validate(installed, tmp):
    """The validate role's cluster checks over the installed namespace, for nodes with the H200's facts."""
    hosts = dict(("it-" + n, {"gpufleet_node_name": n}) for n in installed["names"])
    inventory = {"all": {"children": {"gpu_nodes": {"hosts": hosts}},
                         "vars": {"ansible_connection": "local", "ansible_python_interpreter": C.sys.executable}}}
    facts = _h200_facts()
    play = [{"name": "Validate", "hosts": "gpu_nodes", "gather_facts": False, "tasks": [
        {"name": "Take the H200's facts", "ansible.builtin.set_fact": {
            "gpufleet_nvidia": facts,
            "gpufleet_nvidia_validation": {"status": "ok", "gpu_count": facts["gpu_count"],
                                           "cluster_expect": {"node": "{{ gpufleet_node_name }}", "labels": {}}}}},
        {"name": "Check the cluster", "ansible.builtin.include_role": {"name": "gpufleet.nvidia.validate", "tasks_from": "cluster"},
         "vars": {"validate_device_plugin_namespace": NAMESPACE, "validate_k8s_stack": "device_plugin", "validate_cuda_pod": "none",
                  "validate_publish_labels": False, "validate_dcgm_exporter": True, "validate_dcgm_exporter_dra": True}},
        {"name": "Keep the verdict",
         "ansible.builtin.copy": {"content": "{{ validate_cluster_verdict | to_json }}", "dest": str(tmp / "verdict.json"), "mode": "0644"},
         "delegate_to": "localhost", "run_once": True}]}]
    with open(str(tmp / "inventory.yml"), "w") as f:
        yaml.safe_dump(inventory, f)
    with open(str(tmp / "playbook.yml"), "w") as f:
        yaml.safe_dump(play, f, sort_keys=False)
    C._run(tmp)
    with open(str(tmp / "verdict.json")) as f:
        return json.load(f)


def test_validation_checks_labels_and_metrics_and_never_says_ok_for_pods_nothing_runs(installed, tmp_path):
    verdict = _validate(installed, tmp_path)
    assert verdict["checked"], verdict["reason"]
    pods = installed["client"].CoreV1Api().list_namespaced_pod(NAMESPACE).items
    idle = set(p.spec.node_name for p in pods if "dcgm-exporter" in p.metadata.name and not p.status.pod_ip)
    for host, node in verdict["nodes"].items():
        checks = dict((c["name"], c) for c in node["checks"])
        assert {"gfd_labels", "metrics"} <= set(checks), node["checks"]
        if node["node"] in idle:
            for name in ("gfd_labels", "metrics"):
                assert checks[name]["status"] == "skipped", checks[name]
                assert "without a pod IP" in checks[name]["msg"]
        else:
            # Real pods: H200 facts stand for the nodes' own discovery only on an H200 fleet.
            assert checks["metrics"]["status"] in ("ok", "failed"), checks["metrics"]


def test_switched_off_the_exporter_is_uninstalled_and_the_plugin_kept(installed):
    """Last: it takes the exporter away."""
    tmp = installed["tmp"]
    C._project(tmp, installed["names"], "device_plugin", dict(installed["role_vars"], device_plugin_dcgm_exporter_enabled=False))
    off = C._run(tmp)[0]
    assert sum(off.values()) > 0
    assert C._helm_release(NAMESPACE, EXPORTER) == []
    assert C._helm_release(NAMESPACE, RELEASE)[0]["status"] == "deployed"
    again = C._run(tmp)[0]
    assert again == dict((h, 0) for h in again), "a second run with the exporter off changed something"
