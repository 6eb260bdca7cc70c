# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cordon a Kubernetes node, evict its GPU pods through the Eviction API, wait for it, uncordon it.

The ``gpufleet.nvidia.gpu_drain`` module runs :func:`run` on the control host. Everything goes
through ``upgrade.kube_api.KubeApi`` (the Python kubernetes client, made by kubernetes.core). kubernetes.core
has a drain of its own (``k8s_drain``), which evicts every pod of the node: this one evicts only the
pods that hold GPUs, keeps the cordon of someone else, names the budgets that block it and waits for
the node to come back.

- **cordon**: ``spec.unschedulable: true`` and the annotation ``gpufleet.nvidia/cordoned`` (the
  reason), so that a later uncordon knows the cordon was ours. A node someone else cordoned keeps
  their cordon and gets no annotation.
- **drain**: cordon, then evict every pod of the node that asks for one of ``resources`` (names,
  or prefixes ending with ``/``: ``nvidia.com/`` takes ``nvidia.com/gpu``, ``nvidia.com/gpu.shared``
  and the MIG devices) in a container or an init container, through the Eviction API so that
  PodDisruptionBudgets hold: a ``429`` is tried again every ``poll_interval`` seconds until
  ``timeout``, then the drain fails naming the pods and the budgets that block them. DaemonSet pods
  (their controller would put them back at once), mirror pods (the kubelet's static pods) and
  finished pods are left alone and listed. An evicted pod counts as gone once it is no longer on
  the node (404, another uid, or another node).
- **uncordon**: undoes our cordon; a node cordoned by someone else stays cordoned unless ``force``.
- **wait**: after any state, wait until the node is Ready and advertises its GPUs again.

Check mode reads only and says what would happen, including which pods a budget blocks right
now; the node it returns is the node as it is. Time goes through ``clock`` and ``sleep`` so that the tests need not wait.
"""

from __future__ import annotations

import re
import time

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig, plural as _plural
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.upgrade.kube_api import first_line

ANNOTATION = "gpufleet.nvidia/cordoned"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
DEFAULT_RESOURCES = ("nvidia.com/",)
STATES = ("cordon", "drain", "uncordon")
FINISHED = ("Succeeded", "Failed")
_PDB_IN_MESSAGE = re.compile(r"disruption budget ([a-z0-9]([-a-z0-9.]*[a-z0-9])?)")


def pod_key(pod):
    return "%s/%s" % (_dig(pod, "metadata", "namespace"), _dig(pod, "metadata", "name"))


# --- reading nodes and pods ---------------------------------------------------------------------


def check_resources(resources):
    resources = [str(r).strip() for r in resources or []]
    bad = [r for r in resources if not r or " " in r or "/" not in r]
    if not resources or bad:
        raise GpuFleetError(
            "gpu_drain: resources: %s is not a list of resource names or prefixes "
            "(expected e.g. [nvidia.com/gpu] or [nvidia.com/], a prefix ending with '/')" % (bad or resources),
            resources=resources,
        )
    return resources


def _matches(name, resources):
    return any(name.startswith(r) if r.endswith("/") else name == r for r in resources)


def gpu_resources(pod, resources):
    """The resources of ``resources`` that the pod's containers or init containers ask for."""
    found = set()
    spec = pod.get("spec") or {}
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for kind in ("requests", "limits"):
            for name, value in ((container.get("resources") or {}).get(kind) or {}).items():
                if _matches(name, resources) and str(value).strip() not in ("0", ""):
                    found.add(name)
    return sorted(found)


def _owner_kind(pod):
    for ref in _dig(pod, "metadata", "ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("kind")
    return None


def classify(pods, resources):
    """``(to_evict, terminating, left)`` among the node's pods that ask for ``resources``.

    ``left`` holds ``{pod, why}`` for the GPU pods that are not evicted.
    """
    to_evict, terminating, left = [], [], []
    for pod in sorted(pods, key=pod_key):
        if not gpu_resources(pod, resources):
            continue
        key = pod_key(pod)
        if _dig(pod, "status", "phase") in FINISHED:
            left.append({"pod": key, "why": "finished (%s): it holds no GPU" % _dig(pod, "status", "phase")})
        elif MIRROR_ANNOTATION in (_dig(pod, "metadata", "annotations") or {}):
            left.append({"pod": key, "why": "mirror pod: a static pod of the kubelet, not evictable"})
        elif _owner_kind(pod) == "DaemonSet":
            left.append({"pod": key, "why": "DaemonSet pod: its controller runs it on every node, cordoned or not"})
        elif _dig(pod, "metadata", "deletionTimestamp"):
            terminating.append(pod)
        else:
            to_evict.append(pod)
    return to_evict, terminating, left


def pdb_selects(budget, labels):
    """Whether the PodDisruptionBudget's selector selects a pod with ``labels`` (policy/v1 rules)."""
    selector = _dig(budget, "spec", "selector")
    if selector is None:
        return False
    labels = labels or {}
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_expression_holds(expr, labels) for expr in selector.get("matchExpressions") or [])


def _expression_holds(expr, labels):
    """One ``matchExpressions`` entry against a pod's labels; an operator it does not know selects."""
    key, operator, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    present = key in labels
    if operator in ("In", "NotIn"):
        found = present and labels[key] in values
        return found if operator == "In" else not found
    if operator in ("Exists", "DoesNotExist"):
        return present if operator == "Exists" else not present
    return True


def budgets_for(pod, budgets):
    labels = _dig(pod, "metadata", "labels") or {}
    return [b for b in budgets if pdb_selects(b, labels)]


def refusing_budget(body):
    """The budget's name in a 429's causes or message, if the API server named it."""
    texts = [c.get("message") or "" for c in _dig(body, "details", "causes") or []] + [body.get("message") or ""]
    for text in texts:
        match = _PDB_IN_MESSAGE.search(text)
        if match:
            return match.group(1)
    return None


def node_status(node):
    meta = node.get("metadata") or {}
    ready, why = False, "no Ready condition"
    for condition in _dig(node, "status", "conditions") or []:
        if condition.get("type") == "Ready":
            ready = condition.get("status") == "True"
            why = first_line(condition.get("message") or "") or condition.get("reason") or ""
    allocatable = _dig(node, "status", "allocatable") or {}
    return {
        "name": meta.get("name"),
        "ready": ready,
        "ready_reason": why,
        "unschedulable": bool(_dig(node, "spec", "unschedulable")),
        "cordoned_by": (meta.get("annotations") or {}).get(ANNOTATION),
        "allocatable": dict((k, str(allocatable[k])) for k in sorted(allocatable) if str(k).startswith("nvidia.com/")),
    }


def _int(value):
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def allocatable_problem(status, expect):
    """Why the node's allocatable GPUs are not what ``expect`` (resource, count, mig) says; None when they are."""
    resource = expect.get("resource") or "nvidia.com/gpu"
    count = _int(expect.get("count"))
    alloc = status.get("allocatable") or {}
    value = _int(alloc.get(resource))
    if expect.get("mig"):
        mig = sum(_int(v) for k, v in alloc.items() if k.startswith("nvidia.com/mig-")) if resource == "nvidia.com/gpu" else 0
        return None if value + mig > 0 else "advertises no %s or nvidia.com/mig-* (MIG enabled)" % resource
    if count > 0:
        return None if value == count else "advertises %d %s, expected %d" % (value, resource, count)
    return None if value > 0 else "advertises no %s" % resource


# --- the states ---------------------------------------------------------------------------------


def _read_node(api, name):
    node = api.node(name)
    if node is None:
        raise GpuFleetError(
            "gpu_drain: node %s is not in the cluster at %s (set gpufleet_node_name to the host's node name)" % (name, api.server),
            node=name,
        )
    return node


def _cordon_view(status):
    return {"unschedulable": status["unschedulable"], "cordoned_by": status["cordoned_by"]}


def _cordon(api, name, status, after, reason, check_mode):
    """Cordon; returns (changed, msg). ``after`` gets the node's cordon as it is (would be) afterwards."""
    if status["unschedulable"]:
        if status["cordoned_by"] is not None:
            return False, "node %s is cordoned (%s: %s)" % (name, ANNOTATION, status["cordoned_by"])
        return False, (
            "node %s was already cordoned, not by gpufleet.nvidia (no %s annotation): it stays cordoned after the "
            "upgrade unless uncordoned with force" % (name, ANNOTATION)
        )
    if not check_mode:
        api.patch_node(name, {"spec": {"unschedulable": True}, "metadata": {"annotations": {ANNOTATION: reason}}})
    after.update({"unschedulable": True, "cordoned_by": reason})
    return True, "node %s %scordoned" % (name, "would be " if check_mode else "")


def _uncordon(api, name, status, after, force, check_mode):
    if not status["unschedulable"]:
        if status["cordoned_by"] is None:
            return False, "node %s is schedulable" % name
        if not check_mode:
            api.patch_node(name, {"metadata": {"annotations": {ANNOTATION: None}}})
        after["cordoned_by"] = None
        return True, "node %s is schedulable; its stale %s annotation %s removed" % (name, ANNOTATION, "would be" if check_mode else "was")
    if status["cordoned_by"] is None and not force:
        return False, (
            "node %s was cordoned by someone else (no %s annotation): left cordoned (force: true uncordons it)" % (name, ANNOTATION)
        )
    if not check_mode:
        api.patch_node(name, {"spec": {"unschedulable": None}, "metadata": {"annotations": {ANNOTATION: None}}})
    after.update({"unschedulable": False, "cordoned_by": None})
    return True, "node %s %suncordoned" % (name, "would be " if check_mode else "")


def _budget_names(api, pod, cache):
    namespace = _dig(pod, "metadata", "namespace")
    if namespace not in cache:
        cache[namespace] = api.pdbs(namespace)
    return cache[namespace]


def _blocked_now(api, pods):
    """In check mode: the pods a budget would refuse to evict right now."""
    cache, blocked = {}, []
    for pod in pods:
        for budget in budgets_for(pod, _budget_names(api, pod, cache)):
            allowed = _int(_dig(budget, "status", "disruptionsAllowed"))
            if allowed < 1:
                name = "%s/%s" % (_dig(budget, "metadata", "namespace"), _dig(budget, "metadata", "name"))
                blocked.append({"pod": pod_key(pod), "pdb": name, "refusals": 0,
                                "msg": "PodDisruptionBudget %s allows no disruption now: the eviction would wait for it" % name})
    return blocked


def _gone(api, pod, node_name):
    current = api.pod(_dig(pod, "metadata", "namespace"), _dig(pod, "metadata", "name"))
    return (
        current is None
        or _dig(current, "metadata", "uid") != _dig(pod, "metadata", "uid")
        or _dig(current, "spec", "nodeName") != node_name
    )


def _evict_all(api, name, pods, terminating, params, clock, sleep):
    """Evict ``pods`` and wait until they and ``terminating`` are gone; returns the evicted keys."""
    deadline = clock() + params["timeout"]
    pending = [(pod_key(p), p) for p in pods]
    drained = {"evicted": [], "waiting": [(pod_key(p), p) for p in terminating], "refusals": {}, "budgets": {}}
    while True:
        pending = _evict_round(api, name, pending, drained, params.get("grace_period"))
        drained["waiting"] = [(key, pod) for key, pod in drained["waiting"] if not _gone(api, pod, name)]
        if not pending and not drained["waiting"]:
            return drained["evicted"]
        if clock() >= deadline:
            raise _drain_timeout(name, [drained["refusals"][key] for key, dummy in pending], drained, params["timeout"])
        sleep(params["poll_interval"])


def _evict_round(api, name, pending, drained, grace_period):
    """Ask once for the eviction of each pending pod; returns those a budget refused (429).

    ``drained`` keeps, across the rounds, the pods ``evicted``, those ``waiting`` to be gone, the
    ``refusals`` per pod, and the ``budgets`` read per namespace.
    """
    still = []
    for key, pod in pending:
        code, body = api.evict(_dig(pod, "metadata", "namespace"), _dig(pod, "metadata", "name"), grace_period)
        if code == 404 or 200 <= code < 300:
            drained["refusals"].pop(key, None)
            if code != 404:
                drained["evicted"].append(key)
                drained["waiting"].append((key, pod))
        elif code == 429:
            _note_refusal(api, key, pod, body, drained)
            still.append((key, pod))
        else:
            raise GpuFleetError(
                "gpu_drain: node %s: the eviction of pod %s failed: %s %s" % (name, key, code, body.get("message") or ""),
                evicted=drained["evicted"], pod=key,
            )
    return still


def _note_refusal(api, key, pod, body, drained):
    """Count a 429 for the pod, with the budget that refused it and the API server's words."""
    namespace = _dig(pod, "metadata", "namespace")
    budget = refusing_budget(body)
    if budget:
        budget = "%s/%s" % (namespace, budget)
    else:
        found = budgets_for(pod, _budget_names(api, pod, drained["budgets"]))
        budget = ", ".join("%s/%s" % (namespace, _dig(b, "metadata", "name")) for b in found) or None
    entry = drained["refusals"].setdefault(key, {"pod": key, "pdb": budget, "refusals": 0, "msg": ""})
    causes = "; ".join(c.get("message") or "" for c in _dig(body, "details", "causes") or [])
    entry.update({"pdb": budget, "refusals": entry["refusals"] + 1, "msg": causes or body.get("message") or "429 Too Many Requests"})


def _drain_timeout(name, blocked, drained, timeout):
    """The error of a drain whose pods are still on the node at its deadline."""
    waiting = drained["waiting"]
    parts = ["%s (eviction refused %s: %s%s)" % (
        b["pod"], _plural(b["refusals"], "time"), "PodDisruptionBudget %s: " % b["pdb"] if b["pdb"] else "", b["msg"]) for b in blocked]
    parts += ["%s (evicted, still terminating)" % key for key, dummy in waiting]
    return GpuFleetError(
        "gpu_drain: node %s: %s still on the node after %d s: %s. The node stays cordoned"
        % (name, _plural(len(blocked) + len(waiting), "GPU pod"), timeout, "; ".join(parts)),
        evicted=drained["evicted"], blocked=blocked, terminating=[key for key, dummy in waiting],
    )


def wait_node(api, name, params, clock, sleep):
    """Wait until the node is Ready and advertises its GPUs, as ``wait_ready`` / ``wait_allocatable`` ask."""
    deadline = clock() + params["wait_timeout"]
    start = clock()
    while True:
        status = node_status(_read_node(api, name))
        problems = []
        if params.get("wait_ready") and not status["ready"]:
            problems.append("not Ready (%s)" % status["ready_reason"])
        if params.get("wait_allocatable"):
            problem = allocatable_problem(status, params["wait_allocatable"])
            if problem:
                problems.append(problem)
        if not problems:
            return status, int(round(clock() - start))
        if clock() >= deadline:
            raise GpuFleetError(
                "gpu_drain: node %s did not come back within %d s: %s" % (name, params["wait_timeout"], "; ".join(problems)),
                node_status=status,
            )
        sleep(params["poll_interval"])


def check_params(params):
    """Refuse numbers that cannot be seconds, before anything is read or changed."""
    for key, minimum in (("timeout", 0), ("wait_timeout", 0), ("poll_interval", 0), ("grace_period", 0), ("request_timeout", 1)):
        value = params.get(key)
        if value is not None and value < minimum:
            raise GpuFleetError(
                "gpu_drain: %s: %s is not a number of seconds (expected %d or more)" % (key, value, minimum), **{key: value}
            )
    kubeconfig = params.get("kubeconfig")
    if kubeconfig is not None and not isinstance(kubeconfig, (str, dict)):
        raise GpuFleetError(
            "gpu_drain: kubeconfig: %r is neither a path nor a kubeconfig as a dict" % (kubeconfig,), kubeconfig=str(kubeconfig)
        )
    if not str(params.get("node") or "").strip():
        raise GpuFleetError("gpu_drain: node: the node's name is empty (expected the node's name in the cluster)")


def run(api, params, check_mode=False, clock=time.monotonic, sleep=time.sleep):
    """Bring node ``params['node']`` to ``params['state']``; the module's result (without ``diff``'s headers)."""
    check_params(params)
    name = params["node"]
    state = params.get("state") or "drain"
    resources = check_resources(params.get("resources") or DEFAULT_RESOURCES)
    status = node_status(_read_node(api, name))
    before = _cordon_view(status)
    after = dict(before)
    result = {"changed": False, "node": status, "evicted": [], "blocked": [], "left": [], "waited": 0}
    if state in ("cordon", "drain"):
        changed, msg = _cordon(api, name, status, after, params.get("reason") or "gpufleet.nvidia", check_mode)
    else:
        changed, msg = _uncordon(api, name, status, after, params.get("force"), check_mode)
    result["changed"] |= changed
    msgs = [msg]
    if not check_mode:
        status.update(after)
    gpu_pods = []
    if state == "drain":
        gpu_pods = _drain(api, name, resources, params, check_mode, (clock, sleep), result, msgs)
    if params.get("wait_ready") or params.get("wait_allocatable"):
        msgs.append(_wait(api, name, params, check_mode, (clock, sleep), result))
    result["msg"] = "; ".join(msgs)
    result["diff"] = {
        "before": dict(before, gpu_pods=gpu_pods),
        "after": dict(after, gpu_pods=[] if state == "drain" else gpu_pods),
    }
    return result


def _drain(api, name, resources, params, check_mode, timer, result, msgs):
    """Evict the node's GPU pods (in check mode: say which, and which a budget blocks now); the
    result gets them and ``msgs`` what was done. Returns the GPU pods that were on the node."""
    to_evict, terminating, left = classify(api.pods_on(name), resources)
    gpu_pods = [pod_key(p) for p in to_evict + terminating]
    result["left"] = left
    if check_mode:
        result["evicted"] = [pod_key(p) for p in to_evict]
        result["blocked"] = _blocked_now(api, to_evict)
        msgs.append("%s would be evicted%s" % (
            _plural(len(to_evict), "GPU pod"), ": " + ", ".join(result["evicted"]) if to_evict else ""))
        if result["blocked"]:
            msgs.append("blocked now: %s" % "; ".join("%s by %s" % (b["pod"], b["pdb"]) for b in result["blocked"]))
    else:
        result["evicted"] = _evict_all(api, name, to_evict, terminating, params, *timer)
        msgs.append("%s evicted%s" % (
            _plural(len(result["evicted"]), "GPU pod"), ": " + ", ".join(result["evicted"]) if result["evicted"] else ""))
    result["changed"] |= bool(to_evict)
    if left:
        msgs.append("left alone: %s" % "; ".join("%s (%s)" % (e["pod"], e["why"].split(":", maxsplit=1)[0]) for e in left))
    return gpu_pods


def _wait(api, name, params, check_mode, timer, result):
    """Wait until the node is back (not in check mode); the result gets the node as it is then. Returns what was done."""
    if check_mode:
        return "would wait until it is Ready and advertises its GPUs"
    status, result["waited"] = wait_node(api, name, params, *timer)
    result["node"] = status
    return "Ready%s after %d s" % (
        ", advertising " + ", ".join("%s %s" % (v, k) for k, v in status["allocatable"].items()) if status["allocatable"] else "",
        result["waited"])
