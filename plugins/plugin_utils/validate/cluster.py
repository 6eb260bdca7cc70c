# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cluster validation: what NVIDIA's validator checks in Kubernetes, judged from what was read.

The ``gpufleet.nvidia.validate`` role reads the cluster from the control host (nodes, the pods of
the GPU Operator or of the device plugin, the CUDA vector-add pods it ran and their logs) with
``kubernetes.core``; :func:`evaluate` turns that into one verdict per node and for the fleet:

- ``node``: the inventory host's node (``cluster_expect.node``) is in the cluster and Ready;
- ``allocatable``: its allocatable ``nvidia.com/gpu`` (or the declared resource) is its GPU
  count times the sharing replicas (with MIG enabled: more than none); a node of the DRA layer
  (``gpufleet_cluster_layer: dra``) advertises no such resource and gets the ``dra`` check
  instead: the dra_driver role's verdict of the node (``dra_driver_node``: its GPUs published in
  ResourceSlices, its claim allocated);
- ``labels``: the expected labels are there with the expected values, and the labels the stack
  writes agree with the node (``nvidia.com/gpu.count``, ``nvidia.com/gpu.replicas``,
  ``nvidia.com/device-plugin.config``);
- ``pods``: every pod of the stack on the node is ready or completed;
- ``cuda_pod``: the vector-add pod run on the node completed and logged ``Test PASSED``;
- ``gfd_labels`` and ``metrics`` (with ``cluster.monitoring``): GPU Feature Discovery's labels agree
  with discovery, the DCGM exporter's endpoint answers (:mod:`validate.monitoring`).

:func:`cuda_pod_plan` says which nodes get a vector-add pod and builds the pods; with
``cluster.labels.enabled`` the verdict's ``labels`` holds the patches that publish each GPU
node's driver branch, end of life, flavour and validation as labels (:mod:`validate.labels`).
Nothing here talks to the cluster.
"""

from __future__ import annotations

import hashlib

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate import labels as node_labels
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate import monitoring
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.host import (
    DRIFT,
    FAILED,
    OK,
    SKIPPED,
    Checks,
)

SCHEMA = 1
STACK_TITLES = {"gpu_operator": "GPU Operator", "device_plugin": "NVIDIA device plugin"}
POD_PREFIX = "gpufleet-vectoradd-"
POD_LABELS = {
    "app.kubernetes.io/name": "cuda-vectoradd",
    "app.kubernetes.io/managed-by": "gpufleet.nvidia",
}
PASSED = "Test PASSED"
LABEL_COUNT = "nvidia.com/gpu.count"
LABEL_REPLICAS = "nvidia.com/gpu.replicas"
LABEL_CONFIG = "nvidia.com/device-plugin.config"
_IMPORT_ERROR = "Failed to import the required Python library"


def _first_line(text):
    for line in str(text or "").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _int(value):
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _tail(text, lines=4, limit=400):
    kept = [l.rstrip() for l in str(text or "").splitlines() if l.strip()][-lines:]
    out = " | ".join(kept)
    return out if len(out) <= limit else "..." + out[-(limit - 3):]


# --- why there is no cluster ----------------------------------------------------------------------


def no_cluster_reason(cluster):
    """Why the cluster was not checked, or '' when it was read."""
    if not cluster.get("enabled", True):
        return cluster.get("skip_reason") or "cluster checks turned off (validate_cluster false)"
    error = cluster.get("error")
    if cluster.get("nodes") is not None and not error:
        return ""
    kubeconfig = cluster.get("kubeconfig") or {}
    if cluster.get("client") is False or (error and _IMPORT_ERROR in str(error)):
        return (
            "no cluster: the Python kubernetes client is not installed on the control host "
            "(install it into the Python that runs Ansible: pip install kubernetes)"
        )
    if cluster.get("collection") is False:
        return (
            "no cluster: the kubernetes.core collection is not installed on the control host "
            "(ansible-galaxy collection install kubernetes.core)"
        )
    if not kubeconfig.get("exists") and not kubeconfig.get("in_cluster"):
        return (
            "no cluster: no kubeconfig (%s does not exist; set validate_kubeconfig, gpufleet_kubeconfig "
            "or K8S_AUTH_KUBECONFIG)" % (kubeconfig.get("path") or "~/.kube/config")
        )
    return "no cluster: the cluster in %s does not answer (%s)" % (
        kubeconfig.get("path") or "the kubeconfig",
        _first_line(error) or "no answer",
    )


# --- pods ---------------------------------------------------------------------------------------


def _container_problem(statuses, kind):
    for status in statuses or []:
        name = status.get("name")
        waiting = _dig(status, "state", "waiting")
        terminated = _dig(status, "state", "terminated")
        last = _dig(status, "lastState", "terminated")
        if waiting:
            why = waiting.get("reason") or "waiting"
            if waiting.get("message"):
                why += ": " + _first_line(waiting["message"])
            elif last and last.get("exitCode"):
                why += " (last exit %s%s)" % (last.get("exitCode"), ", " + last["reason"] if last.get("reason") else "")
            return "%s %s %s" % (kind, name, why)
        if terminated and terminated.get("exitCode") not in (0, None):
            return "%s %s exited %s (%s)" % (kind, name, terminated.get("exitCode"), terminated.get("reason") or "error")
        if kind == "container" and not status.get("ready"):
            return "container %s running but not ready" % name
    return None


def pod_problem(pod):
    """Why a pod is neither ready nor completed, or None when it is one of them."""
    status = pod.get("status") or {}
    phase = status.get("phase") or "Unknown"
    if phase == "Succeeded":
        return None
    if phase == "Running":
        problem = _container_problem(status.get("containerStatuses"), "container")
        return "Running, %s" % problem if problem else None
    if phase == "Failed":
        return "Failed, %s" % _failure(status)
    return _pending_problem(status, phase)


def _failure(status):
    """Why a Failed pod failed: its reason, else its container's problem; and its message."""
    why = status.get("reason") or _container_problem(status.get("containerStatuses"), "container") or "failed"
    if status.get("message"):
        why += ": " + _first_line(status["message"])
    return why


def _pending_problem(status, phase):
    """What holds a pod that is neither running nor done: its scheduling, else its (init) containers."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return "%s, not scheduled: %s" % (phase, _first_line(condition.get("message")) or condition.get("reason"))
    problem = _container_problem(status.get("initContainerStatuses"), "init container") or _container_problem(
        status.get("containerStatuses"), "container"
    )
    return "%s%s" % (phase, ", " + problem if problem else "")


def _pod_name(pod):
    return _dig(pod, "metadata", "name") or "?"


def stack_pods(cluster):
    """``(stack, namespace, pods, note)``: the stack whose pods are checked."""
    stack = cluster.get("stack") or "auto"
    namespaces = cluster.get("namespaces") or {}
    pods = cluster.get("pods") or {}
    if stack == "none":
        return None, None, [], "stack pods: not checked (validate_k8s_stack none)"
    order = ("gpu_operator", "device_plugin") if stack == "auto" else (stack,)
    for name in order:
        found = [p for p in (pods.get(name) or []) if not _dig(p, "metadata", "deletionTimestamp")]
        if found:
            return name, namespaces.get(name), found, None
    if stack == "auto":
        return (
            None,
            None,
            [],
            "stack pods: not checked: no GPU Operator pods in namespace %s and no device plugin pods in %s"
            % (namespaces.get("gpu_operator"), namespaces.get("device_plugin")),
        )
    return stack, namespaces.get(stack), [], None


# --- the CUDA pods --------------------------------------------------------------------------------


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


# --- nodes --------------------------------------------------------------------------------------


def _mig_enabled(facts):
    return any(g.get("mig_mode_current") == "enabled" for g in _dig(facts, "driver", "nvidia_smi", "gpus") or [])


def _allocatable(node, resource):
    allocatable = _dig(node, "status", "allocatable") or {}
    value = _int(allocatable.get(resource))
    mig = sum(_int(v) or 0 for k, v in allocatable.items() if str(k).startswith("nvidia.com/mig-"))
    return value, mig


def _ready(node):
    for condition in _dig(node, "status", "conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True", condition.get("reason"), condition.get("message")
    return False, None, "no Ready condition"


def _check_labels(checks, node, expect, gpu_count, mig):
    labels = _dig(node, "metadata", "labels") or {}
    problems = _expected_label_problems(labels, expect.get("labels") or {}) + _stack_label_problems(labels, expect, gpu_count, mig)
    if problems:
        checks.add("labels", FAILED, "node %s: %s" % (_dig(node, "metadata", "name"), "; ".join(problems)))
    else:
        checks.add("labels", OK, "node labels as expected (%s)" % ", ".join(sorted(expect.get("labels") or {})))


def _expected_label_problems(labels, expected):
    """The labels that are missing or have another value than expected ('' or None: any value)."""
    problems = []
    for key, value in sorted(expected.items()):
        if key not in labels:
            problems.append("label %s is missing" % key)
        elif value not in (None, "") and str(labels[key]) != str(value):
            problems.append("label %s is %r, expected %r" % (key, labels[key], str(value)))
    return problems


def _stack_label_problems(labels, expect, gpu_count, mig):
    """The labels the stack writes that disagree with the node: GPU count (without MIG), replicas, sharing config."""
    problems = []
    if LABEL_COUNT in labels and not mig and _int(labels[LABEL_COUNT]) != gpu_count:
        problems.append("label %s is %r, the node has %d GPUs" % (LABEL_COUNT, labels[LABEL_COUNT], gpu_count))
    replicas = expect.get("replicas") or 1
    if LABEL_REPLICAS in labels and _int(labels[LABEL_REPLICAS]) != replicas:
        problems.append(
            "label %s is %r, expected %d: the sharing config has not taken effect"
            % (LABEL_REPLICAS, labels[LABEL_REPLICAS], replicas)
        )
    config = expect.get("sharing_config") or ""
    if config and labels.get(LABEL_CONFIG) != config:
        problems.append(
            "label %s is %r, expected %r: the node runs another sharing config"
            % (LABEL_CONFIG, labels.get(LABEL_CONFIG), config)
        )
    return problems


def _check_allocatable(checks, node, expect, gpu_count, mig):
    resource = expect.get("resource") or "nvidia.com/gpu"
    replicas = expect.get("replicas") or 1
    value, mig_total = _allocatable(node, resource)
    name = _dig(node, "metadata", "name")
    if mig:
        total = (value or 0) + (mig_total if resource == "nvidia.com/gpu" else 0)
        if total > 0:
            checks.add("allocatable", OK, "node %s: %d allocatable GPU devices (MIG enabled)" % (name, total))
        else:
            checks.add("allocatable", FAILED, "node %s: MIG is enabled but no %s or nvidia.com/mig-* is allocatable" % (name, resource))
        checks.add("allocatable_count", SKIPPED, "allocatable count: not compared with the GPU count on MIG nodes")
        return total
    expected = gpu_count * replicas
    if value is None:
        checks.add(
            "allocatable",
            FAILED,
            "node %s advertises no %s (expected %d): the device plugin is not running there, or found no GPU"
            % (name, resource, expected),
        )
    elif value != expected:
        checks.add(
            "allocatable",
            FAILED,
            "node %s: %s allocatable is %d, expected %d (%d GPUs x %d replicas)" % (name, resource, value, expected, gpu_count, replicas),
        )
    else:
        checks.add(
            "allocatable", OK, "node %s: %d %s allocatable (%d GPUs x %d replicas)" % (name, value, resource, gpu_count, replicas)
        )
    return value


def _cuda_verdict(checks, plan_entry, cluster):
    """The cuda_pod check of the vector-add pod ``plan_entry`` from what the role read after it ran."""
    cuda = cluster.get("cuda") or {}
    name = plan_entry["metadata"]["name"]
    pod = dict((_pod_name(p), p) for p in cuda.get("pods") or []).get(name)
    log = (cuda.get("logs") or {}).get(name) or ""
    result = {"name": name, "phase": None, "passed": False, "log": _tail(log)}
    if pod is not None:
        result["phase"] = _dig(pod, "status", "phase") or "Unknown"
        result["passed"] = result["phase"] == "Succeeded" and PASSED in log
    status, msg = _cuda_pod_status(name, pod, result["phase"], log, cuda)
    checks.add("cuda_pod", status, msg)
    return result


def _cuda_pod_status(name, pod, phase, log, cuda):
    """``(status, msg)`` of one vector-add pod: not run, not found, passed, or why not."""
    if pod is None and cuda.get("error"):
        return FAILED, "CUDA pod %s was not run: %s" % (name, _first_line(cuda["error"]))
    if pod is None:
        return FAILED, "CUDA pod %s was not found after it was created" % name
    if phase == "Succeeded" and PASSED in log:
        return OK, "CUDA pod %s completed: Test PASSED" % name
    if phase == "Succeeded":
        return FAILED, "CUDA pod %s completed without %r in its log (%s)" % (name, PASSED, _tail(log) or "empty log")
    if phase == "Failed":
        return FAILED, "CUDA pod %s failed: %s%s" % (name, pod_problem(pod), "; log: " + _tail(log) if log.strip() else "")
    return FAILED, "CUDA pod %s did not complete within %s s: %s" % (name, cuda.get("timeout"), pod_problem(pod) or phase)


# --- everything ---------------------------------------------------------------------------------


def gpu_hosts(hosts, hostvars):
    """``[(host, facts, validation)]`` of the hosts with GPUs and a validation."""
    found = []
    for host in hosts or []:
        hv = hostvars.get(host) if hasattr(hostvars, "get") else None
        if hv is None:
            continue
        validation = hv.get("gpufleet_nvidia_validation") or {}
        facts = hv.get("gpufleet_nvidia") or {}
        if (facts.get("gpu_count") or validation.get("gpu_count") or 0) > 0 or (_dig(validation, "declared", "gpu_count") or 0) > 0:
            found.append((host, facts, validation))
    return found


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


def evaluate(hosts, hostvars, cluster):
    """The cluster verdict: fleet-level facts, per-host node verdicts, and the CUDA pods to run."""
    cluster = cluster or {}
    result = _unjudged(cluster)
    reason = no_cluster_reason(cluster)
    targets = gpu_hosts(hosts, hostvars)
    if reason:
        _not_checked(result, cluster, targets, reason)
        return result
    result["checked"] = True
    by_name = dict((_dig(n, "metadata", "name"), n) for n in cluster.get("nodes") or [])
    stack, pods = _judge_stack(result, cluster)
    checks_by_host, candidates, inventory_nodes = _judge_nodes(targets, by_name, result["stack"], pods, hostvars)
    _judge_monitoring(checks_by_host, targets, pods, cluster.get("monitoring"))
    _fleet_failures(result, cluster, stack, inventory_nodes)
    _judge_cuda_pods(result, cluster, candidates, checks_by_host)
    for host, (name, node, checks) in checks_by_host.items():
        result["nodes"][host] = _node_result(name, node, checks)
    _publish_labels(result, cluster, targets)
    return result


def _judge_monitoring(checks_by_host, targets, pods, read):
    """GFD's labels and the DCGM exporter's metrics on each GPU node in the cluster
    (:mod:`validate.monitoring`), where the role asked for them (``cluster.monitoring``)."""
    read = read or {}
    for host, facts, validation in targets:
        name, node, checks = checks_by_host[host]
        if node is None:
            continue
        expect = validation.get("cluster_expect") or {}
        if read.get("gfd_labels"):
            shared = (expect.get("replicas") or 1) > 1 or _mig_enabled(facts)
            monitoring.check_labels(checks, name, _dig(node, "metadata", "labels"), facts, pods, shared)
        if read.get("dcgm_exporter"):
            monitoring.check_metrics(checks, name, pods, read.get("scrapes"), read.get("dra"))


def _publish_labels(result, cluster, targets):
    """The verdict's ``labels``: with ``cluster.labels.enabled``, each GPU node's labels
    (:mod:`validate.labels`) and the patches that set them; a patch that failed fails the fleet."""
    wanted = cluster.get("labels") or {}
    if not wanted.get("enabled"):
        return
    found = node_labels.plan(targets, result["nodes"], cluster.get("nodes"), wanted.get("kept_nodes"), wanted.get("today"))
    result["labels"].update(found, enabled=True)
    if wanted.get("error"):
        result["labels"]["error"] = wanted["error"]
        result["failed"].append("could not label the GPU nodes (%s): %s" % (", ".join(node_labels.KEYS), _first_line(wanted["error"])))


def _unjudged(cluster):
    """The verdict before anything is judged."""
    return {
        "schema": SCHEMA,
        "checked": False,
        "reason": "",
        "server": _dig(cluster, "kubeconfig", "path"),
        "stack": {"name": None, "namespace": None, "status": SKIPPED, "msg": "", "total": 0, "ready": 0, "not_ready": []},
        "cuda_pod": {"status": SKIPPED, "msg": "", "image": _dig(cluster, "cuda", "image"), "pods": []},
        "cuda_pods": [],
        "nodes": {},
        "labels": {"enabled": False, "annotation": node_labels.annotation_key(), "nodes": {}, "patches": [], "error": None},
        "failed": [],
        "not_checked": [],
    }


def _not_checked(result, cluster, targets, reason):
    """The verdict of a cluster that was not read: every node not checked, for ``reason``."""
    result["reason"] = reason
    result["not_checked"].append(reason)
    if cluster.get("required") and cluster.get("enabled", True):
        result["failed"].append(reason + " (validate_cluster_required)")
    for host, dummy, validation in targets:
        node = _dig(validation, "cluster_expect", "node") or host
        result["nodes"][host] = _node_result(node, None, Checks(), skipped=reason)


def _judge_stack(result, cluster):
    """``(stack, pods)``: the stack whose pods are checked, and its pods; the verdict's ``stack``
    says how many are ready or completed, and why the others are not."""
    stack, namespace, pods, note = stack_pods(cluster)
    info = result["stack"]
    info.update({"name": stack, "namespace": namespace})
    if note:
        info["msg"] = note
        result["not_checked"].append(note)
    elif not pods:
        info.update({"status": FAILED, "msg": "no %s pods in namespace %s: it is not deployed" % (STACK_TITLES[stack], namespace)})
        result["failed"].append(info["msg"])
    else:
        bad = []
        for pod in pods:
            problem = pod_problem(pod)
            if problem:
                bad.append({"name": _pod_name(pod), "node": _dig(pod, "spec", "nodeName"), "why": problem})
        info.update({"total": len(pods), "ready": len(pods) - len(bad), "not_ready": bad})
        info["status"] = FAILED if bad else OK
        info["msg"] = "%s: %d of %d pods ready or completed in namespace %s" % (
            STACK_TITLES[stack], len(pods) - len(bad), len(pods), namespace)
    return stack, pods


def dra_of(hv):
    """The dra_driver role's entry of a host on the DRA layer (``{}`` where the role did not run on
    it), None for a host off it (the device plugin or the GPU Operator advertise its GPUs)."""
    hv = hv if hasattr(hv, "get") else {}
    entry = hv.get("dra_driver_node")
    if isinstance(entry, dict) and "published" in entry:
        return entry
    return {} if hv.get("gpufleet_cluster_layer") == "dra" else None


def _judge_nodes(targets, by_name, stack_info, pods, hostvars):
    """``(checks_by_host, candidates, inventory_nodes)``: each inventory GPU host's node and its
    checks, the ``(host, node, resource)`` that can run a vector-add pod, the nodes of the inventory."""
    checks_by_host, candidates, inventory_nodes = {}, [], set()
    for host, facts, validation in targets:
        expect = validation.get("cluster_expect") or {}
        name = expect.get("node") or host
        inventory_nodes.add(name)
        node = by_name.get(name)
        checks = Checks()
        checks_by_host[host] = (name, node, checks)
        if node is None:
            checks.add("node", FAILED, "node %s is not in the cluster (set gpufleet_node_name to the host's node name)" % name)
        elif _check_node(checks, node, name, facts, validation, stack_info, pods, dra_of(hostvars.get(host))):
            candidates.append((host, name, expect.get("resource") or "nvidia.com/gpu"))
    return checks_by_host, candidates, inventory_nodes


def _check_node(checks, node, name, facts, validation, stack_info, pods, dra=None):
    """The checks of a node in the cluster: Ready, allocatable (``dra`` on a DRA node: the
    dra_driver role's entry, ``{}`` where it did not run), labels, the stack's pods on it;
    returns its allocatable GPUs (None on a DRA node: no vector-add pod asks for nvidia.com/gpu there)."""
    expect = validation.get("cluster_expect") or {}
    gpu_count = facts.get("gpu_count") or validation.get("gpu_count") or 0
    mig = _mig_enabled(facts)
    ready, why, message = _ready(node)
    if ready:
        checks.add("node", OK, "node %s is Ready" % name)
    else:
        checks.add("node", FAILED, "node %s is not Ready (%s)" % (name, _first_line(message) or why or "unknown"))
    if dra is not None:
        allocatable = None
        _check_dra(checks, name, dra)
    else:
        allocatable = _check_allocatable(checks, node, expect, gpu_count, mig)
    _check_labels(checks, node, expect, gpu_count, mig)
    if stack_info["name"] and pods:
        _check_stack_pods(checks, name, stack_info, pods)
    return allocatable


def _check_dra(checks, name, entry):
    """The dra check of a DRA node: what the dra_driver role found (``dra_driver_node``), in place of
    the allocatable nvidia.com/gpu that no DRA node advertises."""
    if not entry.get("status"):
        return checks.add("dra", SKIPPED, (
            "node %s is on the DRA layer (gpufleet_cluster_layer: dra), which advertises no nvidia.com/gpu: its GPUs in "
            "ResourceSlices are checked by the dra_driver role, which did not run on it in this play" % name))
    claim = entry.get("claim")
    said = "%s%s" % (entry.get("text") or "DRA: %s devices published" % entry.get("published"), ", claim %s" % claim if claim else "")
    if entry["status"] != "ok":
        return checks.add("dra", FAILED, "node %s: %s" % (name, entry.get("message") or said))
    if claim and claim != "allocated, pod running":
        return checks.add("dra", FAILED, "node %s: %s: the ResourceClaim for one GPU is %s" % (name, said, claim))
    return checks.add("dra", OK, "node %s: %s" % (name, said))


def _check_stack_pods(checks, name, stack_info, pods):
    """The pods check: every pod of the stack on the node ``name`` is ready or completed."""
    title = STACK_TITLES[stack_info["name"]]
    mine = [p for p in stack_info["not_ready"] if p["node"] == name]
    if mine:
        checks.add(
            "pods",
            FAILED,
            "%s pods not ready on %s: %s" % (title, name, "; ".join("%s (%s)" % (p["name"], p["why"]) for p in mine)),
        )
    else:
        on_node = len([p for p in pods if _dig(p, "spec", "nodeName") == name])
        checks.add("pods", OK, "%s: %d pods on %s, all ready or completed" % (title, on_node, name))


def _fleet_failures(result, cluster, stack, inventory_nodes):
    """What fails the fleet beyond its nodes: vector-add pods left behind, the stack's pods not
    ready on nodes outside the inventory."""
    if cluster.get("cleanup_error"):
        result["failed"].append("could not remove the CUDA vector-add pods: %s" % _first_line(cluster["cleanup_error"]))
    for pod in result["stack"]["not_ready"]:
        if pod["node"] not in inventory_nodes:
            result["failed"].append(
                "%s pod %s not ready%s: %s"
                % (STACK_TITLES.get(stack, stack), pod["name"], " on " + pod["node"] if pod["node"] else "", pod["why"])
            )


def _judge_cuda_pods(result, cluster, candidates, checks_by_host):
    """The vector-add pods: the plan (``cuda_pods``), and once they ran, each one's verdict."""
    plan, note = cuda_pod_plan(cluster, sorted(candidates), bool(cluster.get("check_mode")))
    result["cuda_pods"] = plan
    info = result["cuda_pod"]
    if note:
        info["msg"] = note
        result["not_checked"].append(note)
    elif _dig(cluster, "cuda", "ran"):
        by_host = dict((p["metadata"]["annotations"]["gpufleet.nvidia/inventory-host"], p) for p in plan)
        for host, planned in sorted(by_host.items()):
            entry = _cuda_verdict(checks_by_host[host][2], planned, cluster)
            entry["node"] = planned["spec"]["nodeName"]
            info["pods"].append(entry)
        passed = [p for p in info["pods"] if p["passed"]]
        info["status"] = OK if len(passed) == len(info["pods"]) else FAILED
        info["msg"] = "CUDA vectorAdd pod (%s): %d of %d passed" % (info["image"], len(passed), len(info["pods"]))
    else:
        info["msg"] = "CUDA pod: planned on %s" % ", ".join(p["spec"]["nodeName"] for p in plan)


def _node_result(name, node, checks, skipped=None):
    if skipped:
        checks.add("cluster", SKIPPED, skipped)
    allocatable = _dig(node, "status", "allocatable") or {}
    return {
        "node": name,
        "found": node is not None,
        "status": checks.status(),
        "allocatable": dict((k, allocatable[k]) for k in sorted(allocatable) if str(k).startswith("nvidia.com/")),
        "checks": checks.items,
        "failed": checks.messages(FAILED),
        "drifted": checks.messages(DRIFT),
        "not_checked": checks.messages(SKIPPED),
    }
