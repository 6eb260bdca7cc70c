# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CUDA vector-add pods: which nodes run one, the pods themselves, and each one's verdict.

Nothing here talks to the cluster: the validate role creates the pods :func:`cuda_pod_plan`
returns, reads them back with their logs, and the verdict is judged from what it read.
"""

from __future__ import annotations

import hashlib

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import FAILED, OK
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate.pods import first_line, pod_name, pod_problem, tail

POD_PREFIX = "gpufleet-vectoradd-"
POD_LABELS = {
    "app.kubernetes.io/name": "cuda-vectoradd",
    "app.kubernetes.io/managed-by": "gpufleet.nvidia",
}
PASSED = "Test PASSED"


def cuda_pod_name(node):
    name = POD_PREFIX + node
    if len(name) > 253:
        digest = hashlib.sha256(node.encode("utf-8")).hexdigest()[:8]
        name = name[:244].rstrip(".-") + "-" + digest
    return name


def cuda_pod(node, host, settings, resource="nvidia.com/gpu"):
    """The vector-add pod for ``node``: bound to it, one GPU of ``resource``, the nvidia RuntimeClass."""
    spec = {
        "restartPolicy": "Never",
        "nodeName": node,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": "cuda-vectoradd",
                "image": settings.get("image"),
                "resources": {"limits": {resource: 1}},
            }
        ],
    }
    if settings.get("runtime_class"):
        spec["runtimeClassName"] = settings["runtime_class"]
    if settings.get("pull_secrets"):
        spec["imagePullSecrets"] = [{"name": s} for s in settings["pull_secrets"]]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": cuda_pod_name(node),
            "namespace": settings.get("namespace") or "default",
            "labels": dict(POD_LABELS),
            "annotations": {"gpufleet.nvidia/inventory-host": host},
        },
        "spec": spec,
    }


def cuda_pod_plan(cluster, candidates, check_mode):
    """``(pods, note)``: the vector-add pods to run, or why none are run."""
    cuda = cluster.get("cuda") or {}
    mode = cuda.get("mode") or "one"
    if mode == "none":
        return [], "CUDA pod: not run (validate_cuda_pod none)"
    if check_mode:
        return [], "CUDA pod: not run in check mode (it would create a pod in the cluster)"
    if not candidates:
        return [], "CUDA pod: not run: no inventory GPU node of the cluster advertises an allocatable GPU"
    chosen = candidates if mode == "per_node" else candidates[:1]
    return [cuda_pod(node, host, cuda, resource) for host, node, resource in chosen], None


def cuda_verdict(checks, plan_entry, cluster):
    """The cuda_pod check of the vector-add pod ``plan_entry`` from what the role read after it ran."""
    cuda = cluster.get("cuda") or {}
    name = plan_entry["metadata"]["name"]
    pod = dict((pod_name(p), p) for p in cuda.get("pods") or []).get(name)
    log = (cuda.get("logs") or {}).get(name) or ""
    result = {"name": name, "phase": None, "passed": False, "log": tail(log)}
    if pod is not None:
        result["phase"] = _dig(pod, "status", "phase") or "Unknown"
        result["passed"] = result["phase"] == "Succeeded" and PASSED in log
    status, msg = _cuda_pod_status(name, pod, result["phase"], log, cuda)
    checks.add("cuda_pod", status, msg)
    return result


def _cuda_pod_status(name, pod, phase, log, cuda):
    """``(status, msg)`` of one vector-add pod: not run, not found, passed, or why not."""
    if pod is None and cuda.get("error"):
        return FAILED, "CUDA pod %s was not run: %s" % (name, first_line(cuda["error"]))
    if pod is None:
        return FAILED, "CUDA pod %s was not found after it was created" % name
    if phase == "Succeeded" and PASSED in log:
        return OK, "CUDA pod %s completed: Test PASSED" % name
    if phase == "Succeeded":
        return FAILED, "CUDA pod %s completed without %r in its log (%s)" % (name, PASSED, tail(log) or "empty log")
    if phase == "Failed":
        return FAILED, "CUDA pod %s failed: %s%s" % (name, pod_problem(pod), "; log: " + tail(log) if log.strip() else "")
    return FAILED, "CUDA pod %s did not complete within %s s: %s" % (name, cuda.get("timeout"), pod_problem(pod) or phase)
