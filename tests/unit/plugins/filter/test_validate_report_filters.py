"""The validate and report roles' own expressions, templated by Ansible's templar in process.

- ``validate_sharing_replicas`` / ``validate_gpu_resource`` (role defaults over ``vars/main.yml``)
  expect, for every node of every example fleet, what the cluster roles make the device plugin
  advertise there;
- the ``__validate_read`` dict of ``tasks/cluster.yml`` is built from registered results the way
  kubernetes.core returns them (skipped loop items included) and judged by the
  ``validate_cluster`` filter through the templar;
- the report role's build expression turns ``hostvars`` into the report, and
  ``fleet_report_html`` renders it.
"""

from __future__ import annotations

import copy
import json
import os
import sys

import pytest
import yaml

from ansible.template import trust_as_template

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.plugin_utils.report.example_fleet import example_hostvars
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.plugin_utils.validate.cluster_objects import OPERATOR_PODS, node

from . import fleets as F

ROLES = os.path.join(F.ROOT, "roles")
OURS = ("validate_cluster", "fleet_report", "fleet_report_html")


def _yaml(*parts):
    with open(os.path.join(ROLES, *parts)) as handle:
        return yaml.safe_load(handle)


def _templar(variables):
    for name in OURS:
        sys.modules.pop("%s.%s" % (F.FILTER_PACKAGE, name), None)
    return F._templar(variables)  # pylint: disable=protected-access


def _template(expression, variables):
    return F._plain(_templar(variables).template(trust_as_template(expression)))  # pylint: disable=protected-access


def _role_vars(role, extra):
    variables = F._trusted(_yaml(role, "defaults", "main.yml"))  # pylint: disable=protected-access
    variables.update(F._trusted(copy.deepcopy(extra)))  # pylint: disable=protected-access
    if os.path.exists(os.path.join(ROLES, role, "vars", "main.yml")):
        variables.update(F._trusted(_yaml(role, "vars", "main.yml")))  # pylint: disable=protected-access
    return variables


# --- what the validate role expects of each node ------------------------------------------------


def _advertised(plan, host):
    """(replicas, resource) the device plugin's config gives the host's node."""
    configs = plan["chart_values"]["config"]
    labels = [n for n in plan["node_labels"] if n["host"] == host][0]["labels"]
    name = labels.get("nvidia.com/device-plugin.config") or configs["default"]
    config = yaml.safe_load(configs["map"][name])
    sharing = (config.get("sharing") or {}).get("timeSlicing") or (config.get("sharing") or {}).get("mps")
    if not sharing:
        return 1, "nvidia.com/gpu"
    replicas = sharing["resources"][0]["replicas"]
    return replicas, "nvidia.com/gpu.shared" if sharing.get("renameByDefault") else "nvidia.com/gpu"


SHARING_FLEETS = [n for n in F.fleet_names() if "device_plugin" in F.load(n)["roles"]]


@pytest.mark.parametrize("name", SHARING_FLEETS)
def test_expected_replicas_and_resource_are_what_the_device_plugin_advertises(name):
    fleet = F.load(name)
    plan = F.direct(fleet, "device_plugin")
    if plan["problems"]:
        pytest.skip("fleet %s does not plan: %s" % (name, plan["problems"][0]))
    for host, hv in F.hostvars(fleet).items():
        variables = _role_vars("validate", dict(hv, inventory_hostname=host))
        replicas = _template("{{ validate_sharing_replicas | int }}", variables)
        resource = _template("{{ validate_gpu_resource | trim }}", variables)
        assert (replicas, resource) == _advertised(plan, host), host


def test_time_sliced_fleet_expectations():
    fleet = F.load("time-sliced")
    seen = {}
    for host, hv in F.hostvars(fleet).items():
        variables = _role_vars("validate", dict(hv, inventory_hostname=host))
        seen[host] = (_template("{{ validate_sharing_replicas | int }}", variables), _template("{{ validate_gpu_resource | trim }}", variables))
    assert seen == {
        "gpu-inf-01": (4, "nvidia.com/gpu.shared"),
        "gpu-inf-02": (4, "nvidia.com/gpu.shared"),
        "gpu-nb-01": (8, "nvidia.com/gpu"),
        "gpu-train-01": (1, "nvidia.com/gpu"),
    }


def test_defaults_follow_the_shared_variables():
    variables = _role_vars(
        "validate",
        {
            "inventory_hostname": "gpu-a",
            "nvidia_driver_version": "580.95.05",
            "nvidia_driver_method": "preinstalled",
            "container_toolkit_runtime": "k3s",
            "gpufleet_node_name": "gpu-a.example.com",
            "gpufleet_image_registry": "registry.example.com:5000",
            "gpufleet_kubeconfig": "/etc/kube/admin.conf",
            "container_toolkit_version": "1.17.8-1",
            "container_toolkit_runtime_name": "nvidia-gpu",
            "container_toolkit_enable_cdi": True,
        },
    )
    got = _template(
        "{{ [validate_driver_version, validate_driver_method, validate_container_runtime, validate_node_name,"
        " validate_cuda_pod_image, validate_kubeconfig, __validate_kubeconfig_path,"
        " validate_toolkit_version, validate_runtime_handler, validate_cdi] }}",
        variables,
    )
    assert got == [
        "580.95.05",
        "preinstalled",
        "k3s",
        "gpu-a.example.com",
        "registry.example.com:5000/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
        "/etc/kube/admin.conf",
        "/etc/kube/admin.conf",
        "1.17.8-1",
        "nvidia-gpu",
        "enabled",
    ]
    bare = _role_vars("validate", {"inventory_hostname": "gpu-b"})
    got = _template("{{ [validate_node_name, validate_cuda_pod_image, validate_driver_version, validate_runtime_handler, validate_cdi] }}", bare)
    assert got == ["gpu-b", "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0", "", "nvidia", "auto"]


# --- the cluster read, as the role assembles it -------------------------------------------------


def _cluster_task(name="cluster.yml"):
    with open(os.path.join(ROLES, "validate", "tasks", name)) as handle:
        block = yaml.safe_load(handle)[0]
    return block


TOOLS_OK = {"changed": False, "client": True, "collection": "/x", "kubeconfig": {"path": "/root/.kube/config", "exists": True},
            "in_cluster": False}


def test_cluster_read_is_assembled_from_kubernetes_core_results_and_judged():
    task = _cluster_task()
    assert task["delegate_to"] == "localhost" and "run_once" not in task
    judge = [t for t in task["block"] if t["name"] == "Keep the cluster's verdict on every host"][0]
    (fact, expression), = judge["ansible.builtin.set_fact"].items()
    assert fact == "validate_cluster_verdict"
    hv = example_hostvars(cluster=False)
    for host in hv.values():
        host.pop("validate_cluster_verdict", None)
    variables = _role_vars("validate", {"inventory_hostname": "gpu-h200-01"})
    variables.update(F._trusted(task["vars"]))  # pylint: disable=protected-access
    variables.update(
        {
            "hostvars": hv,
            "ansible_play_hosts": ["gpu-h200-01", "lab-debian12", "gpu-l40s-01", "gpu-h200-02"],
            "ansible_play_batch": ["gpu-h200-01", "lab-debian12", "gpu-l40s-01", "gpu-h200-02"],
            "groups": {"all": sorted(hv)},
            "ansible_check_mode": False,
            "__validate_access": TOOLS_OK,
            "__validate_nodes": {"resources": [node("gpu-h200-01"), node("gpu-l40s-01", gpus=2, allocatable=2)], "api_found": True},
            # one namespace read, the other skipped (validate_k8s_stack gpu_operator)
            "__validate_stack_pods": {
                "results": [
                    {"item": {"key": "gpu_operator", "value": "gpu-operator"}, "resources": OPERATOR_PODS[:1], "changed": False},
                    {"item": {"key": "device_plugin", "value": "nvidia-device-plugin"}, "skipped": True, "false_condition": "x"},
                ]
            },
            "__validate_cuda_ran": True,
            "__validate_cuda_pods": {"resources": [{"metadata": {"name": "gpufleet-vectoradd-gpu-h200-01"}, "spec": {"nodeName": "gpu-h200-01"},
                                                    "status": {"phase": "Succeeded"}}]},
            "__validate_cuda_logs": {"results": [{"item": {"metadata": {"name": "gpufleet-vectoradd-gpu-h200-01"}}, "log": "Test PASSED\n",
                                                  "log_lines": ["Test PASSED"]}]},
            "__validate_cuda_cleanup": {"changed": True, "result": {"results": []}},
            # GFD's labels and the exporter's metrics are judged in test_validate_monitoring.py.
            "validate_gfd_labels": False,
            "validate_dcgm_exporter": False,
            "__validate_exporter_metrics": {"scrapes": {"nvidia-dcgm-exporter-x": {"ok": True, "text": "", "error": None}}},
        }
    )
    read = _template("{{ __validate_read }}", variables)
    assert read["monitoring"] == {"gfd_labels": False, "dcgm_exporter": False, "dra": False,
                                  "scrapes": {"nvidia-dcgm-exporter-x": {"ok": True, "text": "", "error": None}}}
    assert read["pods"] == {"gpu_operator": json.loads(json.dumps(OPERATOR_PODS[:1]))}
    assert read["cuda"]["logs"] == {"gpufleet-vectoradd-gpu-h200-01": "Test PASSED\n"}
    assert read["cleanup_error"] is None and read["kubeconfig"]["exists"] is True
    assert read["client"] is True and read["collection"] is True
    verdict = _template(expression, variables)
    assert verdict["checked"] is True
    assert verdict["nodes"]["gpu-h200-01"]["status"] == "ok"
    assert verdict["cuda_pod"]["status"] == "ok"
    assert verdict["nodes"]["gpu-l40s-01"]["failed"] == [
        "node gpu-l40s-01: nvidia.com/gpu allocatable is 2, expected 4 (2 GPUs x 2 replicas)",
        "node gpu-l40s-01: label nvidia.com/gpu.replicas is '1', expected 2: the sharing config has not taken effect; "
        "label nvidia.com/device-plugin.config is None, expected 'ts-2': the node runs another sharing config",
    ]
    assert "gpu-h200-02" in verdict["nodes"] and verdict["nodes"]["gpu-h200-02"]["found"] is False
    _assert_published(read, verdict)


def _assert_published(read, verdict):
    """validate_publish_labels (default true): the labels of the GPU nodes in the cluster, judged on the control host's date."""
    assert read["labels"]["enabled"] is True
    assert len(read["labels"]["today"]) == 10
    assert sorted(verdict["labels"]["nodes"]) == ["gpu-h200-01", "gpu-l40s-01"]
    assert verdict["labels"]["nodes"]["gpu-l40s-01"]["gpufleet.nvidia/validation"] == "failed"


@pytest.mark.parametrize(
    "tools, reason",
    [
        (dict(TOOLS_OK, client=False), "no cluster: the Python kubernetes client is not installed"),
        (dict(TOOLS_OK, collection=None), "no cluster: the kubernetes.core collection is not installed"),
        ({"failed": True, "msg": "kube_client_info failed"}, "no cluster: the Python kubernetes client is not installed"),
    ],
)
def test_cluster_read_when_nothing_could_be_read(tools, reason):
    task = _cluster_task()
    judge = [t for t in task["block"] if t["name"] == "Keep the cluster's verdict on every host"][0]
    (dummy, expression), = judge["ansible.builtin.set_fact"].items()
    read_tasks = dict((t["name"], t) for t in _cluster_task("cluster_read.yml")["block"])
    plan = read_tasks["Judge the cluster"]["ansible.builtin.set_fact"]["__validate_verdict"]
    assert plan == read_tasks["Judge the cluster with what was read"]["ansible.builtin.set_fact"]["__validate_verdict_read"]
    assert "__validate_verdict_read" in expression
    variables = _role_vars("validate", {"inventory_hostname": "gpu-h200-01"})
    variables.update(F._trusted(task["vars"]))  # pylint: disable=protected-access
    variables.update({
        "hostvars": example_hostvars(cluster=False),
        "ansible_play_hosts": ["gpu-h200-01"],
        "ansible_play_batch": ["gpu-h200-01"],
        "groups": {"all": ["gpu-h200-01"]},
        "ansible_check_mode": True,
        "__validate_access": tools,
    })
    verdict = _template(expression, variables)
    assert verdict["reason"].startswith(reason)
    assert verdict["cuda_pods"] == []


# --- the report role ----------------------------------------------------------------------------


def test_report_role_builds_and_renders_from_hostvars():
    tasks = _yaml("report", "tasks", "main.yml")[0]
    assert tasks["run_once"] is True and tasks["delegate_to"] == "localhost"
    build = tasks["block"][0]
    (fact, expression), = build["ansible.builtin.set_fact"].items()
    variables = _role_vars("report", {})
    variables.update(F._trusted(tasks["vars"]))  # pylint: disable=protected-access
    variables.update(F._trusted(build["vars"]))  # pylint: disable=protected-access
    variables.update({
        "hostvars": example_hostvars(),
        "report_hosts": ["gpu-h200-01", "lab-debian12", "gpu-l40s-01"],
        "report_run": {"playbook": "site.yml"},
        "ansible_check_mode": True,
        "ansible_version": {"full": "2.19.14"},
    })
    report = _template(expression, variables)
    assert report["run"] == {"check_mode": True, "limit": "", "ansible_version": "2.19.14", "playbook": "site.yml",
                             "gpu_nodes": [], "collection_version": "0.1.0"}  # no duration: tasks/started.yml did not run
    assert report["summary"]["nodes"] == 3 and report["summary"]["drifted"] == 1
    assert len(report["generated_at"]) == 20 and report["generated_at"].endswith("Z")
    variables["__report"] = report
    page = _template("{{ __report | gpufleet.nvidia.fleet_report_html }}", variables)
    assert page.startswith("<!DOCTYPE html>") and "check mode: nothing was changed" in page
