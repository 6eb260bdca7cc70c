"""The report tests' example fleet: ``example_hostvars``, ``example_report``, ``row``, ``fleet`` and the run's constants.

The example fleet is described in ``tests/unit/fixtures/report/README.md``: the H200 host's facts
are the real output in ``docs/h200/gpu_facts.txt``, the other hosts replay host captures, and
their checks are run by ``validate.host`` and ``validate.cluster`` as the validate role runs them.
"""

from __future__ import annotations

import copy
import json
import os

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import fleet as R
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate import host as V
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate import cluster as C
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.discovery.captures import CaptureHost, fixture_facts
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.plugin_utils.validate.cluster_objects import node, pod, read

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "..", ".."))
EXAMPLE = os.path.join(ROOT, "tests", "unit", "fixtures", "report")
GENERATED_AT = "2026-11-29T18:00:00Z"
RUN = {"check_mode": False, "limit": "", "ansible_version": "2.19.14", "playbook": "site.yml"}
LABELS = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "", "nvidia.com/gpu.count": ""}


def h200_docs_facts():
    """The gpufleet_nvidia fact of docs/h200/gpu_facts.txt (ansible's output of the module)."""
    with open(os.path.join(ROOT, "docs", "h200", "gpu_facts.txt")) as handle:
        text = handle.read()
    return json.loads(text[text.index("{"):])["ansible_facts"]["gpufleet_nvidia"]


def _validated(capture, params, facts=None, expect=None):
    params = dict(params)
    params["cluster_expect"] = dict({"replicas": 1, "resource": "nvidia.com/gpu", "sharing_config": "", "labels": LABELS}, **(expect or {}))
    validation, facts = V.validate_host(CaptureHost(capture), params, facts=facts)
    return {"gpufleet_nvidia": facts, "gpufleet_nvidia_validation": validation}


def example_hostvars(cluster=True):
    hv = {
        "gpu-h200-01": _validated(
            "ubuntu2404-h200-preinstalled",
            {"driver_version": "580", "driver_method": "preinstalled", "container_runtime": "none"},
            facts=h200_docs_facts(),
            expect={"node": "gpu-h200-01"},
        ),
        "lab-debian12": _validated("debian12-nogpu", {"driver_version": "580"}, expect={"node": "lab-debian12"}),
        "gpu-l40s-01": _validated(
            "debian12-l40s-x2-package",
            {"driver_version": "580", "toolkit_version": "1.17.8", "container_runtime": "docker"},
            expect={"node": "gpu-l40s-01", "replicas": 2, "sharing_config": "ts-2"},
        ),
        "gpu-h200-02": _validated(
            "ubuntu2404-h200-smi-failing",
            {"driver_version": "580", "container_runtime": "none"},
            expect={"node": "gpu-h200-02"},
        ),
        "gpu-h100-01": {
            "gpufleet_nvidia": fixture_facts("rocky9-h100x8-rpm-rke2"),
            "nvidia_driver_version": "580.95.05",
            "gpufleet_stopped_at": {"stage": "driver upgrade", "task": "Drain the node",
                                    "msg": "pods of PodDisruptionBudget default/llm-serving cannot be evicted"},
        },
        "gpu-down-01": {},
    }
    hv["gpu-l40s-01"]["gpufleet_sharing_config"] = "ts-2"
    # the cluster is on Kubernetes 1.36: lab-debian12's containerd 1.6 is below the pairing floor too
    hv["lab-debian12"]["discover_kubernetes_version"] = "1.36.2"
    validated = ["gpu-h200-01", "lab-debian12", "gpu-l40s-01", "gpu-h200-02"]
    if cluster:
        nodes = [
            node("gpu-h200-01"),
            node("gpu-l40s-01", gpus=2, allocatable=4, labels={
                "nvidia.com/gpu.product": "NVIDIA-L40S-SHARED",
                "nvidia.com/gpu.replicas": "2",
                "nvidia.com/device-plugin.config": "ts-2",
            }),
            node("gpu-h200-02", allocatable=False, labels={"nvidia.com/gpu.count": None, "nvidia.com/gpu.product": None}),
            node("lab-debian12", gpus=0, allocatable=False, labels={"nvidia.com/gpu.present": None}),
        ]
        pods = [
            pod("gpu-operator-6d8f7c9b5-x2x9k", "lab-debian12"),
            pod("nvidia-device-plugin-daemonset-7hqzl", "gpu-h200-01"),
            pod("nvidia-device-plugin-daemonset-k2d8x", "gpu-l40s-01"),
            pod("nvidia-device-plugin-daemonset-p9w2c", "gpu-h200-02", ready=False,
                waiting={"reason": "CrashLoopBackOff", "message": "back-off 2m40s restarting failed container"}),
        ]
        cuda_pod = pod("gpufleet-vectoradd-gpu-h200-01", "gpu-h200-01", phase="Succeeded", ready=False, namespace="default",
                       terminated={"exitCode": 0, "reason": "Completed"})
        cuda = {"ran": True, "pods": [cuda_pod],
                "logs": {"gpufleet-vectoradd-gpu-h200-01": "[Vector addition of 50000 elements]\nTest PASSED\nDone\n"}}
        verdict = C.evaluate(validated, hv, read(nodes, {"gpu_operator": pods}, cuda=cuda))
    else:
        verdict = C.evaluate(validated, hv, read(client=False))
    for host in validated:
        hv[host]["validate_cluster_verdict"] = copy.deepcopy(verdict)
    return hv


HOSTS = ["gpu-h200-01", "lab-debian12", "gpu-l40s-01", "gpu-h200-02", "gpu-h100-01", "gpu-down-01"]


def example_report(cluster=True):
    return R.build_report(HOSTS, example_hostvars(cluster), generated_at=GENERATED_AT, run=RUN)


def row(report, host):
    return [r for r in report["nodes"] if r["host"] == host][0]


def fleet(size):
    """A fleet of ``size`` nodes from the example fleet's six, renamed, some with the driver and
    toolkit roles' results (held packages, a changed layer)."""
    example = example_hostvars(cluster=False)
    hv, hosts = {}, []
    for i in range(size):
        base = HOSTS[i % len(HOSTS)]
        host = base if i < len(HOSTS) else "%s-%04d" % (base, i)
        hv[host] = dict(example[base])
        if i % 3 == 0 and hv[host].get("gpufleet_nvidia_validation"):
            hv[host]["nvidia_driver_result"] = {"changed": i % 2 == 0, "method": "package", "backend": "apt-ubuntu",
                                                "flavor": "open", "packages": {"nvidia-driver-580-open": "580.95.05-0ubuntu1"},
                                                "msg": "NVIDIA driver 580.95.05 (open) installed and pinned"}
        hosts.append(host)
    return R.build_report(hosts, hv, generated_at=GENERATED_AT,
                          run=dict(RUN, collection_version="0.1.0", duration_s=754.2))
