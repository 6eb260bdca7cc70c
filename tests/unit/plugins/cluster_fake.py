"""The cluster layer's fake Kubernetes API server and fake helm, which share one timeline.

It is not Kubernetes and not Helm. The server (a ``fake_kube.ApiServer``, the tests' one fake API
server, with the objects of the cluster layer) answers what kubernetes.core's ``k8s`` and
``k8s_info`` ask for the cluster layer (API discovery, nodes read and merge-patched, namespaces,
ConfigMaps, Secrets and RuntimeClasses read, created and patched) from objects in memory. The fake
``helm`` (a script written by :meth:`FakeCluster.helm_binary`) sends its arguments and its values
file to the same server, which plays the helm CLI's answers (texts as Helm 3.18 prints them; the
real binaries' answers are tested in test_helm.py) from releases in memory:

- ``charts``: the versions the chart repository has;
- ``fail_next_upgrade``: the next ``helm upgrade`` times out in a pre-upgrade hook and leaves the
  release ``failed``, as Helm does;
- ``unreachable``: every request that needs the cluster fails as helm does without one.

Every API request and every helm call lands in ``timeline`` as ``(kind, method or verb, path or
argv)``, so a test asserts the order of what the collection did, and that nothing was written (a
patch that changes nothing is recorded as ``PATCH (no change)``, as kubernetes.core patches and
compares; a request with ``dryRun=All``, check mode's, as ``... (dry run)`` and kept nowhere).

:class:`DraCluster` adds what the DRA layer reads: the API server's ``/version`` (the
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
import json
import os
import stat
import sys

import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.fake_kube import ApiServer, merge_patch

# The published gpu-operator charts beside the checkout: the fake's `helm show values` and
# `helm show crds` answer with a release's own files where they are there.
REFERENCE_CHARTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))),
                                "shared", "reference", "charts")
# Without them: defaults that name the components the roles set, each an open map (the fake is
# not the chart; test_chart_values checks the roles' values against the real ones), and one CRD.
FALLBACK_VALUES = {
    "gpu-operator": dict((c, {}) for c in (
        "operator", "validator", "driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "migManager",
        "nodeStatusExporter", "gds", "gdrcopy", "cdi", "mig", "node-feature-discovery", "clusterPolicy", "gpuCluster", "draDriver")),
    "dra-driver-nvidia-gpu": dict((k, {}) for k in (
        "resources", "kubeletPlugin", "controller", "webhook", "featureGates", "image")),
    "nvidia-device-plugin": {"config": {}, "runtimeClassName": None, "migStrategy": "none", "gfd": {}, "image": {}, "nfd": {},
                             "imagePullSecrets": [], "nodeSelector": {}, "affinity": {}, "tolerations": []},
}
FALLBACK_VALUES["dra-driver-nvidia-gpu"].update(nvidiaDriverRoot="/", gpuResourcesEnabledOverride=False, imagePullSecrets=[])
FALLBACK_CRDS = [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                  "metadata": {"name": "clusterpolicies.nvidia.com"},
                  "spec": {"group": "nvidia.com", "names": {"kind": "ClusterPolicy", "plural": "clusterpolicies"}, "scope": "Cluster",
                           "versions": [{"name": "v1", "served": True, "storage": True,
                                         "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}]
UNREACHABLE = 'Error: Kubernetes cluster unreachable: Get "https://127.0.0.1:1/version": dial tcp 127.0.0.1:1: connect: connection refused\n'

HELM_SCRIPT = r'''#!%(python)s
import json, sys, urllib.request
argv = sys.argv[1:]
files = {}
for i, arg in enumerate(argv):
    if arg in ("--values", "-f") and i + 1 < len(argv):
        with open(argv[i + 1]) as f:
            files[argv[i + 1]] = f.read()
req = urllib.request.Request(%(url)r, data=json.dumps({"argv": argv, "files": files}).encode(),
                             headers={"Content-Type": "application/json"})
answer = json.load(urllib.request.urlopen(req))
sys.stdout.write(answer["stdout"])
sys.stderr.write(answer["stderr"])
sys.exit(answer["rc"])
'''


def node(name, labels=None, annotations=None):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": "uid-" + name, "resourceVersion": "1",
                         "labels": dict({"kubernetes.io/hostname": name}, **(labels or {})), "annotations": dict(annotations or {})},
            "spec": {}, "status": {"nodeInfo": {"containerRuntimeVersion": "containerd://1.7.24"}}}


class FakeCluster(ApiServer):
    version = "v1.33.2"
    groups = ("node.k8s.io/v1", "apiextensions.k8s.io/v1")
    stores = ("nodes", "objects")

    def __init__(self, nodes, charts=("v25.10.0", "v26.3.3", "v26.7.0"), helm_version="v3.18.0"):
        self.nodes = dict((n["metadata"]["name"], copy.deepcopy(n)) for n in nodes)
        self.objects = {}  # (kind, namespace, name) -> object
        self.releases = {}  # (namespace, name) -> release
        self.charts = list(charts)
        self.helm_version = helm_version
        self.fail_next_upgrade = False
        self.unreachable = False
        self.chart_values = None  # set: what `helm show values` answers, for every version
        self.timeline = []
        super().__init__()

    def _request(self, method, url, body):
        if url.path == "/_helm":
            return 200, self.helm(body["argv"], body["files"])
        before = self.snapshot()
        answer = super()._request(method, url, body)
        if "dryRun=All" in url.query:
            method += " (dry run)"  # check mode: the server answers what it would do, and keeps nothing
        elif method in ("PATCH", "PUT") and before == self.snapshot():
            method += " (no change)"  # kubernetes.core patches and compares: a patch that changes nothing is no write
        self.timeline.append(("api", method, url.path))
        return answer

    # --- files for the collection ------------------------------------------------------------
    # The fake helm's script (a subclass may hand it more of the caller's environment).
    helm_script = HELM_SCRIPT

    def helm_binary(self, directory):
        path = os.path.join(directory, "helm")
        with open(path, "w") as f:
            f.write(self.helm_script % {"python": sys.executable, "url": self.url + "/_helm"})
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        return path

    # --- what the tests read -----------------------------------------------------------------
    def writes(self):
        """Every write request: API writes (a PATCH that changes nothing too: the real API server's
        audit log records it as a write) and helm calls that change a release; not dry runs."""
        return [e for e in self.timeline
                if (e[0] == "api" and e[1].split(" (no change)")[0] in ("POST", "PATCH", "PUT", "DELETE"))
                or (e[0] == "helm" and e[1] in ("upgrade", "rollback", "install"))]

    def labels(self, name):
        return dict(self.nodes[name]["metadata"].get("labels") or {})

    # --- the API -------------------------------------------------------------------------------
    def _object_path(self, path):
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "v1"]:
            rest = parts[2:]
        elif parts[:3] in (["apis", "node.k8s.io", "v1"], ["apis", "apiextensions.k8s.io", "v1"]):
            rest = parts[3:]
        else:
            return None
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            return None
        kinds = {"nodes": "Node", "namespaces": "Namespace", "configmaps": "ConfigMap", "secrets": "Secret", "runtimeclasses": "RuntimeClass",
                 "customresourcedefinitions": "CustomResourceDefinition", "pods": "Pod"}
        return kinds.get(rest[0]), namespace, rest[1] if len(rest) > 1 else None

    def answer(self, method, path, query, body):  # pylint: disable=too-many-return-statements
        target = self._object_path(path)
        if target is None or target[0] is None:
            return self.status(404, "NotFound", "the server could not find the requested resource")
        kind, namespace, name = target
        if kind == "Node":
            if name is None:
                return 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                             "items": [copy.deepcopy(self.nodes[n]) for n in sorted(self.nodes)]}
            if name not in self.nodes:
                return self.status(404, "NotFound", 'nodes "%s" not found' % name)
            if method == "PATCH":
                merge_patch(self.nodes[name], body or {})
            return 200, copy.deepcopy(self.nodes[name])
        if name is None and method == "GET":
            items = [copy.deepcopy(o) for (k, ns, n), o in sorted(self.objects.items()) if k == kind and namespace in (None, ns)]
            return 200, {"kind": kind + "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}
        if kind == "Namespace" and name is None and method == "POST":
            name = body["metadata"]["name"]
        key = (kind, namespace, name or (body or {}).get("metadata", {}).get("name"))
        if method == "POST":
            obj = copy.deepcopy(body)
            obj["metadata"].setdefault("uid", "uid-%s" % key[2])
            obj["metadata"]["resourceVersion"] = "1"
            self.objects[key] = obj
            return 201, obj
        if key not in self.objects:
            return self.status(404, "NotFound", '%s "%s" not found' % (kind.lower() + "s", key[2]))
        if method in ("PATCH", "PUT"):
            merge_patch(self.objects[key], body or {})
        return 200, copy.deepcopy(self.objects[key])

    # --- helm ----------------------------------------------------------------------------------
    @staticmethod
    def _opt(argv, name):
        return argv[argv.index(name) + 1] if name in argv else None

    def helm(self, argv, files):
        verb = argv[0] if argv else ""
        if verb == "show" or verb == "get":
            verb = " ".join(argv[:2])
        self.timeline.append(("helm", verb.split()[0], " ".join(argv)))
        if verb == "version":
            return self._out(self.helm_version)
        if verb in ("show chart", "show values", "show crds", "template"):
            version = self._opt(argv, "--version")
            if version not in self.charts:
                return self._err('Error: chart "gpu-operator" version "%s" not found in %s repository\n'
                                 % (version, self._opt(argv, "--repo")))
            if verb == "show chart":
                return self._out("apiVersion: v2\nname: gpu-operator\nversion: %s\nappVersion: %s\n"
                                 "dependencies:\n- name: node-feature-discovery\n  version: 0.19.0\n" % (version, version))
            if verb in ("show values", "show crds"):
                return self._out(self.chart_files(argv[2], version, verb.split()[1]))
            return self._out("---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: gpu-operator\n")
        if self.unreachable:
            return self._err(UNREACHABLE)
        namespace = self._opt(argv, "--namespace")
        name = argv[2] if verb.startswith("get ") else argv[1]
        release = self.releases.get((namespace, name))
        if verb in ("status", "get values", "get metadata") and release is None:
            return self._err("Error: release: not found\n")
        # The shapes of Helm 3.18's answers, captured against a real API server
        # (tests/unit/fixtures/helm/README.md): status names no chart, get metadata does.
        if verb == "status":
            return self._out(json.dumps({"name": name, "namespace": namespace, "version": release["revision"],
                                         "info": {"status": release["status"], "description": release["description"]},
                                         "config": release["values"], "manifest": ""}))
        if verb == "get metadata":
            return self._out(json.dumps({"name": name, "chart": "gpu-operator", "version": release["chart_version"],
                                         "appVersion": release["chart_version"], "namespace": namespace,
                                         "revision": release["revision"], "status": release["status"]}))
        if verb == "get values":
            return self._out(json.dumps(release["values"]))
        if verb == "upgrade":
            values = json.loads(files[self._opt(argv, "--values")])
            revision = (release or {}).get("revision", 0) + 1
            failed = self.fail_next_upgrade
            self.fail_next_upgrade = False
            self.releases[(namespace, name)] = {
                "revision": revision, "chart_version": self._opt(argv, "--version"), "values": values,
                "status": "failed" if failed else "deployed",
                "description": "Upgrade \"%s\" failed: pre-upgrade hooks failed: timed out waiting for the condition" % name
                if failed else ("Install complete" if release is None else "Upgrade complete")}
            if failed:
                return self._err("Error: UPGRADE FAILED: pre-upgrade hooks failed: timed out waiting for the condition\n")
            return self._out('Release "%s" has been upgraded. Happy Helming!\n' % name)
        return self._err("Error: unknown command %r for the fake helm\n" % verb)

    def chart_files(self, ref, version, what):
        """``helm show values`` / ``show crds`` of a chart version: the published chart's files
        where they are beside the checkout, else the fallbacks above."""
        name = os.path.basename(ref).split("-v")[0] if ref.endswith(".tgz") else ref
        folder = os.path.join(REFERENCE_CHARTS, "%s-v%s" % (name, str(version or "").lstrip("v")))
        if what == "values":
            if self.chart_values is not None:
                return yaml.safe_dump(self.chart_values)
            path = os.path.join(folder, "values.yaml")
            return open(path).read() if os.path.isfile(path) else yaml.safe_dump(FALLBACK_VALUES.get(name, {}))
        crds = os.path.join(folder, "crds")
        if os.path.isdir(crds):
            return "".join("---\n" + open(os.path.join(crds, n)).read() for n in sorted(os.listdir(crds)))
        return yaml.safe_dump_all(FALLBACK_CRDS) if name == "gpu-operator" else ""

    @staticmethod
    def _out(text):
        return {"rc": 0, "stdout": text, "stderr": ""}

    @staticmethod
    def _err(text):
        return {"rc": 1, "stdout": "", "stderr": text}


#: The kinds DraCluster keeps itself, by the resource's name in a path.
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

    def served_groups(self):
        return list(self.groups) + (["resource.k8s.io/v1"] if self.resource_api else []) + (["nvidia.com/v1"] if self.policies_api else [])

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

    def answer(self, method, path, query, body):
        target = self._target(path)
        if target is None:
            return super().answer(method, path, query, body)
        kind, namespace, name = target
        if kind == "Namespace" and method == "DELETE":
            return self._delete_namespace(name)
        if kind == "Namespace":
            return super().answer(method, path, query, body)
        if name is None and method == "GET":
            return 200, {"kind": kind + "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": self._list(kind, namespace)}
        if method == "DELETE":
            removed = self.objects.pop((kind, namespace, name), None)
            return (200, removed) if removed else self.status(404, "NotFound", '%s "%s" not found' % (kind.lower(), name))
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
            return self.status(404, "NotFound", '%s "%s" not found' % (kind.lower(), key[2]))
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
