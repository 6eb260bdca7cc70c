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

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import DRIFT, FAILED, OK, SKIPPED, Checks
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate import labels as node_labels
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate import monitoring
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate.cuda import cuda_pod_plan, cuda_verdict
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate.nodes import check_node, dra_of, mig_enabled
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate.pods import STACK_TITLES, first_line, pod_name, pod_problem, stack_pods


SCHEMA = 1
_IMPORT_ERROR = "Failed to import the required Python library"


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
        first_line(error) or "no answer",
    )


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
            shared = (expect.get("replicas") or 1) > 1 or mig_enabled(facts)
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
        result["failed"].append("could not label the GPU nodes (%s): %s" % (", ".join(node_labels.KEYS), first_line(wanted["error"])))


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
                bad.append({"name": pod_name(pod), "node": _dig(pod, "spec", "nodeName"), "why": problem})
        info.update({"total": len(pods), "ready": len(pods) - len(bad), "not_ready": bad})
        info["status"] = FAILED if bad else OK
        info["msg"] = "%s: %d of %d pods ready or completed in namespace %s" % (
            STACK_TITLES[stack], len(pods) - len(bad), len(pods), namespace)
    return stack, pods


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
        elif check_node(checks, node, name, facts, validation, stack_info, pods, dra_of(hostvars.get(host))):
            candidates.append((host, name, expect.get("resource") or "nvidia.com/gpu"))
    return checks_by_host, candidates, inventory_nodes


def _fleet_failures(result, cluster, stack, inventory_nodes):
    """What fails the fleet beyond its nodes: vector-add pods left behind, the stack's pods not
    ready on nodes outside the inventory."""
    if cluster.get("cleanup_error"):
        result["failed"].append("could not remove the CUDA vector-add pods: %s" % first_line(cluster["cleanup_error"]))
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
            entry = cuda_verdict(checks_by_host[host][2], planned, cluster)
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
