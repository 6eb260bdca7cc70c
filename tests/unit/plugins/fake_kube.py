"""A fake Kubernetes API server for the upgrade's tests: nodes, pods, evictions and PDBs in memory.

It is not Kubernetes. It answers the requests that ``plugins/module_utils/upgrade/drain.py`` (the Python
kubernetes client: read / patch a node, list the pods of a node, read a pod, evict a pod, list the
PodDisruptionBudgets of a namespace) and the validate role's ``kubernetes.core`` reads (API
discovery, node list, pod list by namespace and label) make, and plays what the tests need:

- ``pdb_refusals``: per PDB, how many evictions of its pods it answers ``429 Too Many Requests``
  (with the API server's message naming the budget) before it lets one through; ``None`` refuses
  forever;
- an accepted eviction marks the pod terminating; it disappears after ``terminate_reads`` reads of
  it (``0``: at once);
- ``node_script``: per node, the states (dicts merged into the node) its next reads return, one per
  read, to play a node coming back from a reboot;
- every request is kept in ``requests`` as ``(method, path, query, body)``.

The objects are plain dicts; ``node()``, ``pod()`` and ``pdb()`` build the ones the tests use.
"""

from __future__ import annotations

import copy
import urllib.parse

import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.fake_http import JsonServer

RESOURCES = {
    "kind": "APIResourceList",
    "groupVersion": "v1",
    "resources": [
        {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node", "verbs": ["get", "list", "patch", "watch"]},
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
         "verbs": ["create", "delete", "get", "list", "patch", "watch"]},
        {"name": "pods/eviction", "singularName": "", "namespaced": True, "kind": "Eviction", "group": "policy", "version": "v1",
         "verbs": ["create"]},
        {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]},
        {"name": "namespaces", "singularName": "namespace", "namespaced": False, "kind": "Namespace", "verbs": ["get", "list"]},
    ],
}
POLICY = {
    "kind": "APIResourceList",
    "groupVersion": "policy/v1",
    "resources": [
        {"name": "poddisruptionbudgets", "singularName": "poddisruptionbudget", "namespaced": True,
         "kind": "PodDisruptionBudget", "verbs": ["get", "list"]},
    ],
}
GROUPS = {
    "kind": "APIGroupList",
    "apiVersion": "v1",
    "groups": [{"name": "policy", "versions": [{"groupVersion": "policy/v1", "version": "v1"}],
                "preferredVersion": {"groupVersion": "policy/v1", "version": "v1"}}],
}


def node(name, gpus=1, resource="nvidia.com/gpu", ready=True, unschedulable=False, annotations=None):
    """A GPU node as the API returns it."""
    alloc = {"cpu": "32", "memory": "257000000Ki", "pods": "110"}
    if gpus is not None:
        alloc[resource] = str(gpus)
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": "node-" + name, "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true"},
                     "annotations": dict(annotations or {})},
        "spec": {},
        "status": {
            "allocatable": alloc,
            "capacity": dict(alloc),
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady" if ready else "KubeletNotReady",
                 "message": "kubelet is posting ready status" if ready else "container runtime network not ready"},
            ],
        },
    }
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    return obj


def pod(name, node_name, namespace="ml", gpus=1, resource="nvidia.com/gpu", labels=None, owner=None, phase="Running",
        annotations=None, init=False, limits_only=False):
    """A pod on ``node_name`` asking for ``gpus`` of ``resource`` (none when ``gpus`` is 0)."""
    container = {"name": "main", "image": "busybox", "resources": {}}
    if gpus:
        container["resources"]["limits"] = {resource: str(gpus)}
        if not limits_only:
            container["resources"]["requests"] = {resource: str(gpus)}
    spec = {"nodeName": node_name, "containers": [{"name": "sidecar", "image": "busybox"}]}
    if init:
        spec["initContainers"] = [container]
    else:
        spec["containers"].append(container)
    meta = {"name": name, "namespace": namespace, "uid": "uid-%s-%s" % (namespace, name), "labels": dict(labels or {}),
            "annotations": dict(annotations or {})}
    if owner:
        kind, owner_name = owner
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": owner_name, "uid": "owner-" + owner_name,
                                    "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def pdb(name, namespace="ml", match_labels=None, match_expressions=None, disruptions_allowed=0):
    selector = {}
    if match_labels is not None:
        selector["matchLabels"] = match_labels
    if match_expressions is not None:
        selector["matchExpressions"] = match_expressions
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": selector},
        "status": {"disruptionsAllowed": disruptions_allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1},
    }


def _merge(target, patch):
    """A JSON merge patch (RFC 7386): ``None`` removes a key."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _selected(labels, selector):
    for term in filter(None, (selector or "").split(",")):
        key, dummy, value = term.partition("=")
        if (labels or {}).get(key) != value:
            return False
    return True


def _pdb_selects(budget, labels):
    selector = budget["spec"].get("selector")
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


class FakeKube(object):
    def __init__(self, nodes=(), pods=(), pdbs=(), pdb_refusals=None, terminate_reads=0, node_script=None):
        self.nodes = dict((n["metadata"]["name"], copy.deepcopy(n)) for n in nodes)
        self.pods = dict(((p["metadata"]["namespace"], p["metadata"]["name"]), copy.deepcopy(p)) for p in pods)
        self.pdbs = [copy.deepcopy(b) for b in pdbs]
        self.pdb_refusals = dict(pdb_refusals or {})
        self.terminate_reads = terminate_reads
        self.node_script = dict((k, list(v)) for k, v in (node_script or {}).items())
        self.requests = []
        self.evictions = []
        self._terminating = {}
        self._http = JsonServer(self._request)
        self.url = self._http.url

    def _request(self, method, url, body):
        query = urllib.parse.parse_qs(url.query)
        self.requests.append((method, url.path, url.query, body))
        return self.answer(method, url.path.rstrip("/"), query, body)

    def close(self, silent=False):
        self._http.close(silent)

    def kubeconfig(self, path):
        """Write a kubeconfig for this server at ``path``; returns ``path``."""
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        }
        with open(path, "w") as handle:
            yaml.safe_dump(config, handle)
        return path

    # --- what the tests look at ---------------------------------------------------------------

    def writes(self, node_name=None):
        """The requests that change something (PATCH, POST, DELETE), optionally about one node."""
        found = [r for r in self.requests if r[0] in ("PATCH", "POST", "DELETE")]
        if node_name is None:
            return found
        pods = set("/api/v1/namespaces/%s/pods/%s" % key for key, p in self.all_pods().items() if p["spec"].get("nodeName") == node_name)
        return [r for r in found if r[1] == "/api/v1/nodes/" + node_name or r[1].rsplit("/eviction", 1)[0] in pods]

    def all_pods(self):
        pods = dict(self.pods)
        pods.update(self._terminating)
        return pods

    def evicted(self):
        """``ns/name`` of the pods whose eviction was accepted, in order."""
        return [e[0] for e in self.evictions if e[1] == 201]

    # --- the API --------------------------------------------------------------------------------

    @staticmethod
    def _status(code, reason, message, causes=None):
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason,
                "code": code}
        if causes:
            body["details"] = {"causes": causes}
        return code, body, "application/json"

    def _not_found(self, what):
        return self._status(404, "NotFound", "%s not found" % what)

    def _read_pod(self, key):
        """A pod as read now; a terminating pod disappears after ``terminate_reads`` reads."""
        if key in self._terminating:
            entry = self._terminating[key]
            reads = entry["metadata"].setdefault("_reads", 0)
            if reads >= self.terminate_reads:
                del self._terminating[key]
                return None
            entry["metadata"]["_reads"] = reads + 1
            shown = copy.deepcopy(entry)
            del shown["metadata"]["_reads"]
            return shown
        return copy.deepcopy(self.pods.get(key))

    def _read_node(self, name):
        obj = self.nodes.get(name)
        if obj is None:
            return None
        script = self.node_script.get(name)
        if script:
            state = script.pop(0)
            shown = copy.deepcopy(obj)
            _merge(shown, state)
            return shown
        return copy.deepcopy(obj)

    def _evict(self, namespace, name):
        key = (namespace, name)
        target = self.pods.get(key)
        if target is None:
            if key in self._terminating:
                return 201, {"kind": "Status", "status": "Success", "code": 201}, "application/json"
            return self._not_found('pods "%s"' % name)
        budgets = [b for b in self.pdbs if b["metadata"]["namespace"] == namespace and _pdb_selects(b, target["metadata"].get("labels"))]
        if len(budgets) > 1:
            return self._status(500, "InternalError", "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
        if budgets:
            budget = budgets[0]
            bname = budget["metadata"]["name"]
            left = self.pdb_refusals.get(bname, 0)
            if left is None or left > 0:
                if left is not None:
                    self.pdb_refusals[bname] = left - 1
                self.evictions.append(("%s/%s" % key, 429))
                return self._status(
                    429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
                    causes=[{"reason": "DisruptionBudget", "message": "The disruption budget %s needs 1 healthy pods and has 1 currently" % bname}],
                )
        self.evictions.append(("%s/%s" % key, 201))
        del self.pods[key]
        target["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
        self._terminating[key] = target
        return 201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}, "application/json"

    def answer(self, method, path, query, body):  # pylint: disable=too-many-return-statements,too-many-branches
        ok = "application/json"
        if path == "/version":
            return 200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0"}, ok
        if path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}, ok
        if path == "/apis":
            return 200, GROUPS, ok
        if path == "/api/v1":
            return 200, RESOURCES, ok
        if path == "/apis/policy/v1":
            return 200, POLICY, ok
        if path == "/api/v1/nodes":
            items = [self._read_node(n) for n in sorted(self.nodes)]
            return 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}, ok
        if path == "/api/v1/namespaces" and method == "POST":
            return 201, body, ok
        if path.startswith("/api/v1/namespaces/") and len(path.split("/")) == 5 and method == "DELETE":
            namespace = path.split("/")[4]
            for key in [k for k in self.all_pods() if k[0] == namespace]:
                self.pods.pop(key, None)
                self._terminating.pop(key, None)
            self.pdbs = [b for b in self.pdbs if b["metadata"]["namespace"] != namespace]
            return 200, {"kind": "Namespace", "metadata": {"name": namespace}}, ok
        if path.startswith("/api/v1/nodes/"):
            name = path.split("/")[4]
            if name not in self.nodes:
                return self._not_found('nodes "%s"' % name)
            if method == "PATCH" and path.endswith("/status"):
                _merge(self.nodes[name], {"status": (body or {}).get("status") or {}})
                return 200, copy.deepcopy(self.nodes[name]), ok
            if method == "PATCH":
                _merge(self.nodes[name], body or {})
                return 200, copy.deepcopy(self.nodes[name]), ok
            return 200, self._read_node(name), ok
        if path == "/api/v1/pods":
            selector = (query.get("fieldSelector") or [""])[0]
            wanted = selector.split("=", 1)[1] if selector.startswith("spec.nodeName=") else None
            items = []
            for key in sorted(self.all_pods()):
                shown = self._read_pod(key)
                if shown is not None and (wanted is None or shown["spec"].get("nodeName") == wanted):
                    items.append(shown)
            return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}, ok
        parts = path.split("/")
        if len(parts) >= 7 and parts[1:4] == ["apis", "policy", "v1"] and parts[4] == "namespaces" and parts[6] == "poddisruptionbudgets":
            namespace = parts[5]
            if len(parts) == 7 and method == "POST":
                budget = copy.deepcopy(body)
                budget["metadata"]["namespace"] = namespace
                budget.setdefault("status", {"observedGeneration": 1, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1,
                                             "disruptionsAllowed": 0})
                self.pdbs.append(budget)
                return 201, budget, ok
            if len(parts) == 7:
                items = [b for b in self.pdbs if b["metadata"]["namespace"] == namespace]
                return 200, {"kind": "PodDisruptionBudgetList", "apiVersion": "policy/v1", "metadata": {}, "items": items}, ok
            found = [b for b in self.pdbs if b["metadata"]["namespace"] == namespace and b["metadata"]["name"] == parts[7]]
            if not found:
                return self._not_found('poddisruptionbudgets.policy "%s"' % parts[7])
            if method == "DELETE":
                self.pdbs.remove(found[0])
            return 200, found[0], ok
        if len(parts) >= 6 and parts[1:4] == ["api", "v1", "namespaces"] and parts[5] == "pods":
            namespace = parts[4]
            if len(parts) == 6 and method == "POST":
                created = copy.deepcopy(body)
                created["metadata"].update({"namespace": namespace, "uid": "uid-%s-%s" % (namespace, created["metadata"]["name"])})
                created["status"] = {"phase": "Running"}
                self.pods[(namespace, created["metadata"]["name"])] = created
                return 201, created, ok
            if len(parts) == 6:
                items = []
                for key in sorted(self.all_pods()):
                    if key[0] == namespace:
                        shown = self._read_pod(key)
                        if shown is not None and _selected(shown["metadata"].get("labels"), (query.get("labelSelector") or [""])[0]):
                            items.append(shown)
                return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}, ok
            name = parts[6]
            if len(parts) == 8 and parts[7] == "eviction" and method == "POST":
                return self._evict(namespace, name)
            shown = self._read_pod((namespace, name))
            if shown is None:
                return self._not_found('pods "%s"' % name)
            if method == "DELETE":
                self.pods.pop((namespace, name), None)
                self._terminating.pop((namespace, name), None)
            return 200, shown, ok
        return self._not_found(path)
