"""The fake Kubernetes API server of the tests: one HTTP server on 127.0.0.1, objects in memory.

It is not Kubernetes. :class:`ApiServer` is what every fake API server of the tests shares: the
HTTP plumbing (:class:`JsonServer`), a kubeconfig that points at it, the API's discovery (one table
of the resources the clients ask about, :data:`RESOURCES`), ``Status`` answers, merge patches,
label selectors, dry runs (``dryRun=All``: the answer of the write, and nothing kept), and every
request in ``requests`` as ``(method, path, query, body)``. :class:`FakeKube` is the one for the
drain, the upgrade and the validate role: nodes, pods, evictions and PodDisruptionBudgets, and
plays what their tests need:

- ``pdb_refusals``: per PDB, how many evictions of its pods it answers ``429 Too Many Requests``
  (with the API server's message naming the budget) before it lets one through; ``None`` refuses
  forever;
- an accepted eviction marks the pod terminating; it disappears after ``terminate_reads`` reads of
  it (``0``: at once);
- ``node_script``: per node, the states (dicts merged into the node) its next reads return, one per
  read, to play a node coming back from a reboot.

The cluster layer's fake (``cluster_fake.FakeCluster``, with a fake helm) is another
:class:`ApiServer`. The objects are plain dicts; ``node()``, ``pod()`` and ``pdb()`` build the ones
the tests use.
"""

from __future__ import annotations

import copy
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml


class JsonServer(object):
    """An HTTP server on a free port of 127.0.0.1: each request's JSON body goes with ``(method, url,
    body)`` to ``handle`` (under one lock), whose ``(code, answer[, content type])`` goes back, the
    answer a JSON-able value or bytes."""

    def __init__(self, handle):
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                return

            def _handle(self, method):
                url = urllib.parse.urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                with server.lock:
                    answer = handle(method, url, body)
                code, data, content_type = (tuple(answer) + ("application/json",))[:3]
                data = data if isinstance(data, bytes) else json.dumps(data).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                self._handle("GET")

            def do_POST(self):  # noqa: N802
                self._handle("POST")

            def do_PATCH(self):  # noqa: N802
                self._handle("PATCH")

            def do_PUT(self):  # noqa: N802
                self._handle("PUT")

            def do_DELETE(self):  # noqa: N802
                self._handle("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self, silent=False):
        """Stop answering; ``silent`` keeps the socket listening, so that a client's connection is
        taken and never answered (a cluster that does not answer, not one that refuses)."""
        self.server.shutdown()
        if not silent:
            self.server.server_close()


def _resource(name, kind, namespaced, verbs, singular=None, **more):
    found = {"name": name, "singularName": singular if singular is not None else name[:-1], "namespaced": namespaced,
             "kind": kind, "verbs": verbs.split()}
    found.update(more)
    return found


_RW = "create delete get list patch update watch"
#: What the fakes serve, by group version: the union of what the drain, kubernetes.core's modules
#: and the cluster layer ask about (which of the groups a fake serves: :meth:`ApiServer.served`).
RESOURCES = {
    "v1": [
        _resource("nodes", "Node", False, "get list patch update watch"),
        _resource("namespaces", "Namespace", False, _RW),
        _resource("configmaps", "ConfigMap", True, _RW),
        _resource("secrets", "Secret", True, _RW),
        _resource("pods", "Pod", True, "create delete deletecollection get list patch update watch"),
        _resource("pods/eviction", "Eviction", True, "create", singular="", group="policy", version="v1"),
        _resource("pods/log", "Pod", True, "get", singular=""),
    ],
    "policy/v1": [_resource("poddisruptionbudgets", "PodDisruptionBudget", True, "get list")],
    "node.k8s.io/v1": [_resource("runtimeclasses", "RuntimeClass", False, _RW)],
    "apiextensions.k8s.io/v1": [_resource("customresourcedefinitions", "CustomResourceDefinition", False, _RW)],
    "resource.k8s.io/v1": [_resource("deviceclasses", "DeviceClass", False, _RW), _resource("resourceclaims", "ResourceClaim", True, _RW),
                           _resource("resourceslices", "ResourceSlice", False, "get list watch")],
    "nvidia.com/v1": [_resource("clusterpolicies", "ClusterPolicy", False, "get list watch", singular="clusterpolicy")],
}


def merge_patch(target, patch):
    """A JSON merge patch (RFC 7386): ``None`` removes a key."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def selected(labels, selector):
    """Whether ``labels`` match a label selector of ``key=value`` terms."""
    for term in filter(None, (selector or "").split(",")):
        key, dummy, value = term.partition("=")
        if (labels or {}).get(key) != value:
            return False
    return True


class ApiServer(object):
    """What every fake API server shares (the module's docstring); a fake answers in :meth:`answer`."""

    #: The API server's version, and the groups it serves beside v1.
    version = "v1.31.0"
    groups = ("policy/v1",)
    #: The attributes that hold the fake's objects: a dry run puts them back as they were.
    stores = ()

    def __init__(self):
        self.requests = []
        self._http = JsonServer(self._request)
        self.url = self._http.url

    def _request(self, method, url, body):
        query = urllib.parse.parse_qs(url.query)
        self.requests.append((method, url.path, url.query, body))
        path = url.path.rstrip("/")
        served = self.served()
        if path in served:
            return 200, served[path]
        before = self.snapshot()
        answer = self.answer(method, path, query, body)
        if "All" in query.get("dryRun", []):
            self.put_back(before)
        return answer

    def answer(self, method, path, query, body):
        return self.not_found(path)

    def snapshot(self):
        return copy.deepcopy(dict((name, getattr(self, name)) for name in self.stores))

    def put_back(self, snapshot):
        for name, value in snapshot.items():
            setattr(self, name, value)

    def served(self):
        """The discovery documents, by path."""
        groups = self.served_groups()
        minor = self.version.split(".")[1]
        found = {"/version": {"major": "1", "minor": minor, "gitVersion": self.version},
                 "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
                 "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g) for g in groups]}}
        for group_version in ["v1"] + groups:
            path = "/api/v1" if group_version == "v1" else "/apis/" + group_version
            found[path] = {"kind": "APIResourceList", "groupVersion": group_version, "resources": RESOURCES[group_version]}
        return found

    def served_groups(self):
        return list(self.groups)

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

    @staticmethod
    def status(code, reason, message, causes=None):
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason,
                "code": code}
        if causes:
            body["details"] = {"causes": causes}
        return code, body, "application/json"

    def not_found(self, what):
        return self.status(404, "NotFound", "%s not found" % what)


def _group(group_version):
    name, version = group_version.split("/")
    found = {"groupVersion": group_version, "version": version}
    return {"name": name, "versions": [found], "preferredVersion": found}


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


class FakeKube(ApiServer):
    """Nodes, pods, evictions and PodDisruptionBudgets (the module's docstring)."""

    stores = ("nodes", "pods", "pdbs", "_terminating")

    def __init__(self, nodes=(), pods=(), pdbs=(), pdb_refusals=None, terminate_reads=0, node_script=None):
        self.nodes = dict((n["metadata"]["name"], copy.deepcopy(n)) for n in nodes)
        self.pods = dict(((p["metadata"]["namespace"], p["metadata"]["name"]), copy.deepcopy(p)) for p in pods)
        self.pdbs = [copy.deepcopy(b) for b in pdbs]
        self.pdb_refusals = dict(pdb_refusals or {})
        self.terminate_reads = terminate_reads
        self.node_script = dict((k, list(v)) for k, v in (node_script or {}).items())
        self.evictions = []
        self._terminating = {}
        super().__init__()

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
        shown = copy.deepcopy(obj)
        if script:
            merge_patch(shown, script.pop(0))
        return shown

    def _evict(self, namespace, name):
        key = (namespace, name)
        target = self.pods.get(key)
        if target is None:
            if key in self._terminating:
                return 201, {"kind": "Status", "status": "Success", "code": 201}
            return self.not_found('pods "%s"' % name)
        budgets = [b for b in self.pdbs if b["metadata"]["namespace"] == namespace and _pdb_selects(b, target["metadata"].get("labels"))]
        if len(budgets) > 1:
            return self.status(500, "InternalError", "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
        if budgets and self._refuses(budgets[0]["metadata"]["name"]):
            self.evictions.append(("%s/%s" % key, 429))
            return self.status(
                429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
                causes=[{"reason": "DisruptionBudget",
                         "message": "The disruption budget %s needs 1 healthy pods and has 1 currently" % budgets[0]["metadata"]["name"]}],
            )
        self.evictions.append(("%s/%s" % key, 201))
        del self.pods[key]
        target["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
        self._terminating[key] = target
        return 201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    def _refuses(self, budget):
        """Whether the budget refuses this eviction (counting down its ``pdb_refusals``)."""
        left = self.pdb_refusals.get(budget, 0)
        if left is not None and left > 0:
            self.pdb_refusals[budget] = left - 1
        return left is None or left > 0

    def answer(self, method, path, query, body):
        parts = path.split("/")
        if path == "/api/v1/nodes":
            items = [self._read_node(n) for n in sorted(self.nodes)]
            return 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}
        if path.startswith("/api/v1/nodes/"):
            return self._node(method, parts[4], path, body)
        if path == "/api/v1/pods":
            selector = (query.get("fieldSelector") or [""])[0]
            wanted = selector.split("=", 1)[1] if selector.startswith("spec.nodeName=") else None
            return 200, self._pod_list(self.all_pods(), lambda shown: wanted is None or shown["spec"].get("nodeName") == wanted)
        if path.startswith("/api/v1/namespaces") and len(parts) <= 5:
            return self._namespace(method, parts, body)
        if parts[1:4] == ["apis", "policy", "v1"] and len(parts) >= 7 and parts[4] == "namespaces" and parts[6] == "poddisruptionbudgets":
            return self._budget(method, parts[5], parts[7] if len(parts) > 7 else None, body)
        if parts[1:4] == ["api", "v1", "namespaces"] and len(parts) >= 6 and parts[5] == "pods":
            return self._pod(method, parts[4], parts[6:], query, body)
        return self.not_found(path)

    def _node(self, method, name, path, body):
        if name not in self.nodes:
            return self.not_found('nodes "%s"' % name)
        if method == "PATCH":
            merge_patch(self.nodes[name], {"status": (body or {}).get("status") or {}} if path.endswith("/status") else body or {})
            return 200, copy.deepcopy(self.nodes[name])
        return 200, self._read_node(name)

    def _namespace(self, method, parts, body):
        if len(parts) == 4 and method == "POST":
            return 201, body
        if len(parts) == 5 and method == "DELETE":
            namespace = parts[4]
            for key in [k for k in self.all_pods() if k[0] == namespace]:
                self.pods.pop(key, None)
                self._terminating.pop(key, None)
            self.pdbs = [b for b in self.pdbs if b["metadata"]["namespace"] != namespace]
            return 200, {"kind": "Namespace", "metadata": {"name": namespace}}
        return self.not_found("/".join(parts))

    def _budget(self, method, namespace, name, body):
        if name is None and method == "POST":
            budget = copy.deepcopy(body)
            budget["metadata"]["namespace"] = namespace
            budget.setdefault("status", {"observedGeneration": 1, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1,
                                         "disruptionsAllowed": 0})
            self.pdbs.append(budget)
            return 201, budget
        if name is None:
            items = [b for b in self.pdbs if b["metadata"]["namespace"] == namespace]
            return 200, {"kind": "PodDisruptionBudgetList", "apiVersion": "policy/v1", "metadata": {}, "items": items}
        found = [b for b in self.pdbs if b["metadata"]["namespace"] == namespace and b["metadata"]["name"] == name]
        if not found:
            return self.not_found('poddisruptionbudgets.policy "%s"' % name)
        if method == "DELETE":
            self.pdbs.remove(found[0])
        return 200, found[0]

    def _pod_list(self, keys, wanted):
        """The pods of ``keys`` (each read once, in order) that are still there and ``wanted``."""
        items = [shown for shown in (self._read_pod(key) for key in sorted(keys)) if shown is not None and wanted(shown)]
        return {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}

    def _pod(self, method, namespace, rest, query, body):
        """A pod request: ``rest`` is what follows ``.../pods`` (nothing, the name, the name and a subresource)."""
        if not rest and method == "POST":
            return 201, self.create_pod(namespace, body)
        if not rest:
            selector = (query.get("labelSelector") or [""])[0]
            keys = [key for key in self.all_pods() if key[0] == namespace]
            return 200, self._pod_list(keys, lambda shown: selected(shown["metadata"].get("labels"), selector))
        if rest[1:] == ["eviction"] and method == "POST":
            return self._evict(namespace, rest[0])
        shown = self._read_pod((namespace, rest[0]))
        if shown is None:
            return self.not_found('pods "%s"' % rest[0])
        if method == "DELETE":
            self.pods.pop((namespace, rest[0]), None)
            self._terminating.pop((namespace, rest[0]), None)
        return 200, shown

    def create_pod(self, namespace, body):
        """The pod a POST creates: Running at once (a test's fake may play it otherwise)."""
        created = copy.deepcopy(body)
        created["metadata"].update({"namespace": namespace, "uid": "uid-%s-%s" % (namespace, created["metadata"]["name"])})
        created["status"] = {"phase": "Running"}
        self.pods[(namespace, created["metadata"]["name"])] = created
        return created
