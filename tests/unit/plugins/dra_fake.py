"""The cluster layer's fake API server and helm (cluster_fake.FakeCluster), with what the DRA layer reads.

It is not Kubernetes. Beside what FakeCluster answers, it serves the API server's ``/version`` (the
``version`` a test gives), the ``resource.k8s.io/v1`` group (DeviceClasses created, read and patched;
ResourceSlices listed from ``slices``; ResourceClaims created and read), ``nvidia.com/v1`` ClusterPolicies
(listed from ``cluster_policies``, only while ``policies_api`` is true), and Pods and Namespaces created,
read and deleted. ``allocate`` plays the scheduler and the kubelet plugin: a pod created with a
``resourceClaimName`` has that claim allocated a device of its node's slices and runs; false leaves the
claim unallocated and the pod Pending. Every request lands in FakeCluster's ``timeline``.

Its helm also plays what kubernetes.core.helm asks to uninstall a release (``helm version`` as Helm
prints it, ``list --output=yaml --filter``, ``get values --output=yaml``, ``uninstall``); that module
names the namespace in ``HELM_NAMESPACE``, which the fake helm passes on as ``--namespace``.
"""

from __future__ import annotations

import copy

import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.cluster_fake import CORE, GROUPS, HELM_SCRIPT, NODE_API, FakeCluster

RESOURCE_API = {
    "kind": "APIResourceList", "groupVersion": "resource.k8s.io/v1",
    "resources": [
        {"name": "deviceclasses", "singularName": "deviceclass", "namespaced": False, "kind": "DeviceClass",
         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
        {"name": "resourceclaims", "singularName": "resourceclaim", "namespaced": True, "kind": "ResourceClaim",
         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
        {"name": "resourceslices", "singularName": "resourceslice", "namespaced": False, "kind": "ResourceSlice",
         "verbs": ["get", "list", "watch"]},
    ],
}
NVIDIA_API = {
    "kind": "APIResourceList", "groupVersion": "nvidia.com/v1",
    "resources": [{"name": "clusterpolicies", "singularName": "clusterpolicy", "namespaced": False, "kind": "ClusterPolicy",
                   "verbs": ["get", "list", "watch"]}],
}
PODS = {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "verbs": ["create", "delete", "get", "list", "patch", "watch"]}
KINDS = {"deviceclasses": "DeviceClass", "resourceclaims": "ResourceClaim", "resourceslices": "ResourceSlice",
         "clusterpolicies": "ClusterPolicy", "pods": "Pod", "namespaces": "Namespace"}


# FakeCluster's helm, which also passes on the namespace kubernetes.core.helm sets in the environment.
assert "argv = sys.argv[1:]\n" in HELM_SCRIPT, "cluster_fake's helm script changed: pass HELM_NAMESPACE on another way"
HELM_ENV_SCRIPT = HELM_SCRIPT.replace(
    "argv = sys.argv[1:]\n",
    "argv = sys.argv[1:]\nimport os\nif os.environ.get('HELM_NAMESPACE') and '--namespace' not in argv:\n"
    "    argv += ['--namespace', os.environ['HELM_NAMESPACE']]\n")


def gpu_slice(node, count):
    """The ResourceSlice the DRA driver publishes for ``count`` whole GPUs of ``node``."""
    devices = [{"name": "gpu-%d" % i, "attributes": {"type": {"string": "gpu"}, "index": {"int": i}}} for i in range(count)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": node + "-gpu.nvidia.com"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def _group(name):
    version = {"groupVersion": name + "/v1", "version": "v1"}
    return {"name": name, "versions": [version], "preferredVersion": version}


class DraCluster(FakeCluster):
    helm_script = HELM_ENV_SCRIPT

    def __init__(self, nodes, version="v1.34.2", slices=(), cluster_policies=(), charts=("v26.7.0",), **kwargs):
        super().__init__(nodes, charts=charts, **kwargs)
        self.version = version
        self.slices = [copy.deepcopy(s) for s in slices]
        self.cluster_policies = [copy.deepcopy(p) for p in cluster_policies]
        self.policies_api = True
        self.resource_api = True
        self.allocate = True

    def helm(self, argv, files):
        verb = argv[0] if argv else ""
        own = {"list": self._helm_list, "uninstall": self._helm_uninstall}
        if verb == "version" and "--template" not in argv:
            own["version"] = self._helm_build_info
        if verb == "get" and "--output=yaml" in argv:
            own["get"] = self._helm_get_values_yaml
        if verb not in own:
            return super(DraCluster, self).helm(argv, files)
        self.timeline.append(("helm", verb, " ".join(argv)))
        return own[verb](argv, self._opt(argv, "--namespace"))

    def _helm_build_info(self, argv, namespace):
        return self._out('version.BuildInfo{Version:"%s", GitCommit:"", GitTreeState:"clean", GoVersion:"go1.24.4"}\n' % self.helm_version)

    def _helm_list(self, argv, namespace):
        wanted = self._opt(argv, "--filter")
        found = [{"name": name, "namespace": ns, "revision": str(r["revision"]), "status": r["status"],
                  "chart": "chart-%s" % r["chart_version"], "app_version": r["chart_version"]}
                 for (ns, name), r in sorted(self.releases.items()) if ns == namespace and name == wanted]
        return self._out(yaml.safe_dump(found))

    def _helm_get_values_yaml(self, argv, namespace):
        name = [a for a in argv[2:] if not a.startswith("-")][0]
        return self._out(yaml.safe_dump(self.releases[(namespace, name)]["values"]))

    def _helm_uninstall(self, argv, namespace):
        name = [a for a in argv[1:] if not a.startswith("-")][0]
        if self.releases.pop((namespace, name), None) is None:
            return self._err("Error: uninstall: Release not loaded: %s: release: not found\n" % name)
        return self._out('release "%s" uninstalled\n' % name)

    def _discovery(self):
        groups = copy.deepcopy(GROUPS)
        groups["groups"] += [_group("resource.k8s.io")] if self.resource_api else []
        groups["groups"] += [_group("nvidia.com")] if self.policies_api else []
        core = copy.deepcopy(CORE)
        core["resources"].append(PODS)
        answers = {"/version": {"major": "1", "minor": self.version.split(".")[1], "gitVersion": self.version},
                   "/api": {"kind": "APIVersions", "versions": ["v1"]}, "/apis": groups, "/api/v1": core,
                   "/apis/node.k8s.io/v1": NODE_API}
        if self.resource_api:
            answers["/apis/resource.k8s.io/v1"] = RESOURCE_API
        if self.policies_api:
            answers["/apis/nvidia.com/v1"] = NVIDIA_API
        return answers

    @staticmethod
    def _target(path):
        """``(kind, namespace, name)`` of a path this fake serves itself, or None for FakeCluster's."""
        parts = path.strip("/").split("/")
        if parts[:3] in (["apis", "resource.k8s.io", "v1"], ["apis", "nvidia.com", "v1"]):
            rest = parts[3:]
        elif parts[:2] == ["api", "v1"]:
            rest = parts[2:]
        else:
            return None
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        elif rest[:1] == ["namespaces"] and len(rest) == 2:
            return "Namespace", None, rest[1]
        if not rest or rest[0] not in KINDS or KINDS[rest[0]] == "Namespace":
            return None
        return KINDS[rest[0]], namespace, rest[1] if len(rest) > 1 else None

    def answer(self, method, path, body):
        discovery = self._discovery()
        if path in discovery:
            return 200, discovery[path]
        target = self._target(path)
        if target is None:
            return super().answer(method, path, body)
        kind, namespace, name = target
        if kind == "Namespace" and method == "DELETE":
            return self._delete_namespace(name)
        if kind == "Namespace":
            return super().answer(method, path, body)
        if name is None and method == "GET":
            return 200, {"kind": kind + "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": self._list(kind, namespace)}
        if method == "DELETE":
            removed = self.objects.pop((kind, namespace, name), None)
            return (200, removed) if removed else self._status(404, "NotFound", '%s "%s" not found' % (kind.lower(), name))
        return self._store(method, kind, namespace, name, body)

    def _list(self, kind, namespace):
        if kind == "ResourceSlice":
            return copy.deepcopy(self.slices)
        if kind == "ClusterPolicy":
            return copy.deepcopy(self.cluster_policies)
        return [copy.deepcopy(v) for k, v in sorted(self.objects.items()) if k[0] == kind and (namespace is None or k[1] == namespace)]

    def _store(self, method, kind, namespace, name, body):
        key = (kind, namespace, name or ((body or {}).get("metadata") or {}).get("name"))
        if method == "POST":
            obj = copy.deepcopy(body)
            obj["metadata"].update({"uid": "uid-%s" % key[2], "resourceVersion": "1"})
            if namespace:
                obj["metadata"]["namespace"] = namespace
            self.objects[key] = obj
            if kind == "Pod":
                self._schedule(obj)
            return 201, copy.deepcopy(obj)
        if key not in self.objects:
            return self._status(404, "NotFound", '%s "%s" not found' % (kind.lower(), key[2]))
        if method in ("PATCH", "PUT"):
            for field, value in (body or {}).items():
                if field not in ("metadata", "status"):
                    self.objects[key][field] = copy.deepcopy(value)
        return 200, copy.deepcopy(self.objects[key])

    def _schedule(self, pod):
        """The scheduler and the kubelet plugin: allocate the pod's claim a device of its node, run the pod."""
        namespace = pod["metadata"]["namespace"]
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        node = terms[0]["matchFields"][0]["values"][0]
        devices = [d["name"] for s in self.slices if s["spec"]["nodeName"] == node for d in s["spec"]["devices"]]
        pod["status"] = {"phase": "Pending"}
        if not self.allocate or not devices:
            return
        for ref in pod["spec"].get("resourceClaims") or []:
            claim = self.objects.get(("ResourceClaim", namespace, ref["resourceClaimName"]))
            if claim is not None:
                claim["status"] = {"allocation": {"devices": {"results": [
                    {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": devices[0]}]}}}
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}

    def _delete_namespace(self, name):
        for key in [k for k in self.objects if k[1] == name or k == ("Namespace", None, name)]:
            del self.objects[key]
        return 200, {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": name}, "status": {"phase": "Terminating"}}
