# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pods of the GPU stack in the cluster: why one is neither ready nor completed.

Read by the cluster verdict (:mod:`validate.cluster`) for the GPU Operator's or the device plugin's
pods, and for the CUDA vector-add pods (:mod:`validate.cuda`). Nothing here talks to the cluster.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig

STACK_TITLES = {"gpu_operator": "GPU Operator", "device_plugin": "NVIDIA device plugin"}


def first_line(text):
    """The first line of ``text`` that is not blank, at most 300 characters ('' without one)."""
    for line in str(text or "").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def tail(text, lines=4, limit=400):
    """The last ``lines`` lines of ``text`` that are not blank, on one line, at most ``limit`` characters."""
    kept = [l.rstrip() for l in str(text or "").splitlines() if l.strip()][-lines:]
    out = " | ".join(kept)
    return out if len(out) <= limit else "..." + out[-(limit - 3):]


def _container_problem(statuses, kind):
    for status in statuses or []:
        name = status.get("name")
        waiting = _dig(status, "state", "waiting")
        terminated = _dig(status, "state", "terminated")
        last = _dig(status, "lastState", "terminated")
        if waiting:
            why = waiting.get("reason") or "waiting"
            if waiting.get("message"):
                why += ": " + first_line(waiting["message"])
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
        why += ": " + first_line(status["message"])
    return why


def _pending_problem(status, phase):
    """What holds a pod that is neither running nor done: its scheduling, else its (init) containers."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return "%s, not scheduled: %s" % (phase, first_line(condition.get("message")) or condition.get("reason"))
    problem = _container_problem(status.get("initContainerStatuses"), "init container") or _container_problem(
        status.get("containerStatuses"), "container"
    )
    return "%s%s" % (phase, ", " + problem if problem else "")


def pod_name(pod):
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
