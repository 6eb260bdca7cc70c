# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA's DRA driver for GPUs as a cluster layer: its plan, built from the inventory and discovery.

Two ways to install it, chosen by the GPU Operator release the site runs (``dra_driver_operator_version``):

- ``gpucluster``: GPU Operator 26.7 and later. The gpu-operator chart with ``clusterPolicy.deployCR=false``
  and ``gpuCluster.deployCR=true`` renders a GPUCluster (``nvidia.com/v1alpha1``) that manages the DRA
  driver (``draDriver.*``); the driver comes from the host (``driver.enabled=false``). The operator
  places the kubelet plugin itself (its ``nvidia.com/gpu.deploy.dra-driver`` label on GPU nodes), so the
  role sets no label, and every GPU node of the cluster is a DRA node.
- ``standalone``: no operator, or one older than 26.7. NVIDIA's ``dra-driver-nvidia-gpu`` chart with
  ``resources.gpus.enabled=true``, ``nvidiaDriverRoot`` the host's driver root, and the kubelet plugin
  kept to the nodes the role labels ``nvidia.com/dra-kubelet-plugin=true``; the device plugin must be off
  on those nodes (an older operator's ClusterPolicy with ``devicePlugin.enabled=false``).

What can be known from the inventory and discovery is checked by ``dra_plan`` (driver >= 580 on every DRA
node, a CDI-capable runtime, a mix of device-plugin and DRA nodes only where the chosen path can keep them
apart); what needs the cluster by :mod:`cluster.dra_cluster`, and what the driver publishes once
applied by :mod:`cluster.dra_validation`. Problems are collected, never raised, each naming the node or
variable, the value and what would be accepted.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import deep_merge, host_fact, plain
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.versions import try_parse_driver_version, version_tuple
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import operator_releases
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.checks import (
    CHART_VERSION, DNS_SUBDOMAIN, Settings, check_input, check_name, check_namespace, one_of, quoted, to_bool,
)
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.fleet import TOOLKIT_ENABLE_CDI_DEFAULT, nodes_of
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.node_labels import label_plan
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.release import (
    chart_repo_url, common, image_registry, namespace_object, overrides, pull_secrets, result, set_image,
)

ROLE = "dra_driver"
# The first GPU Operator release with the GPUCluster resource (crds/nvidia.com_gpuclusters.yaml).
GPUCLUSTER_RELEASE = (26, 7, 0)
MIN_DRIVER_BRANCH = 580
RESOURCE_API = "resource.k8s.io/v1"
DRIVER_NAME = "gpu.nvidia.com"
LABEL_KUBELET_PLUGIN = "nvidia.com/dra-kubelet-plugin"
# The DeviceClasses the DRA driver creates itself (its chart, or the operator for a GPUCluster):
# whole GPUs, MIG devices, GPUs for VFIO pass-through, and the two ComputeDomain classes.
DRIVER_DEVICE_CLASSES = (
    "gpu.nvidia.com",
    "mig.nvidia.com",
    "vfio.gpu.nvidia.com",
    "compute-domain-daemon.nvidia.com",
    "compute-domain-default-channel.nvidia.com",
)
ALLOCATIONS = ("dra", "device_plugin")
# containerd turns CDI on by default from 2.0; 1.7 has it behind enable_cdi. CRI-O has it on.
CONTAINERD_CDI_DEFAULT = (2, 0)
CONTAINERD_CDI_MIN = (1, 7)
CONTAINERD_FAMILY = ("containerd", "k3s", "rke2")
CHARTS = {"gpucluster": "gpu-operator", "standalone": "dra-driver-nvidia-gpu"}
DEFAULT_RELEASES = {"gpucluster": ("gpu-operator", "gpu-operator"), "standalone": ("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu")}
# Values the role derives; an override would undo the derivation silently.
DERIVED_VALUES = {
    "gpucluster": ("clusterPolicy.deployCR", "gpuCluster.deployCR", "driver.enabled", "toolkit.enabled"),
    "standalone": ("nvidiaDriverRoot", "resources.gpus.enabled", "gpuResourcesEnabledOverride", "kubeletPlugin.nodeSelector",
                   "kubeletPlugin.affinity"),
}
_FEATURE_GATE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
# The standalone chart from an OCI registry: NVIDIA publishes it at
# oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu as well as on NGC (the
# driver's docs/upgrade.md). Helm takes such a reference as the chart itself, with no --repo.
_OCI_CHART = re.compile(r"^oci://[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*/%s$" % CHARTS["standalone"])
# DeviceClass spec.extendedResourceName (resource.k8s.io/v1; beta in Kubernetes 1.36): an extended
# resource's name, a DNS subdomain prefix outside kubernetes.io and a name part.
_EXTENDED_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
# The resource the standalone chart's own gpu.nvidia.com class carries (templates/deviceclass-gpu.yaml,
# where resource.k8s.io/v1 is served); the operator's GPUCluster (v26.7.0) sets none.
CHART_EXTENDED_RESOURCE = "nvidia.com/gpu"


def _facts(raw):
    """The node's discovery facts (common/data.host_fact: ansible_facts first), None without any."""
    facts = host_fact(raw, "gpufleet_nvidia")
    return plain(facts) if isinstance(facts, dict) and facts else None


def _discovered_driver(facts):
    driver = (facts or {}).get("driver") or {}
    smi = driver.get("nvidia_smi") or {}
    return driver.get("version") or smi.get("driver_version") or None


def dra_node(node, raw):
    """A node of gpu_fleet_nodes with what the DRA layer reads besides: its allocation, driver, runtime, GPUs."""
    raw = raw or {}
    facts = _facts(raw)
    discovered = _discovered_driver(facts)
    declared = raw.get("nvidia_driver_version")
    # gpu_fleet_nodes' reading (None for k3s and RKE2, whose containerd is their own, not the host's
    # binary that discovery runs: the cluster check reads it from the kubelet).
    runtime_version = node.get("runtime_version")
    return {
        "host": node["host"],
        "name": node["name"],
        "allocation": plain(raw.get("gpufleet_gpu_allocation", "dra")),
        "host_driver": node["host_driver"],
        "host_toolkit": node["host_toolkit"],
        "driver_method": node["driver_method"],
        "driver": {"version": str(discovered or declared or ""), "source": "discovery" if discovered else "inventory" if declared else ""},
        "runtime": {"name": node["runtime"], "version": str(runtime_version or ""),
                    "cdi_enabled": plain(raw.get("container_toolkit_enable_cdi", TOOLKIT_ENABLE_CDI_DEFAULT))},
        "gpus": (facts or {}).get("gpu_count") if facts else None,
    }


def _check_node(node, problems):
    """What one DRA node needs of the host: the driver on it, R580 or later, and a CDI-capable runtime."""
    where = "%s: host %s" % (ROLE, quoted(node["host"]))
    if not node["host_driver"]:
        problems.append(
            "%s: nvidia_driver_method is %s, but the DRA layer needs the driver on the host (expected package or "
            "preinstalled, R%d or later)" % (where, quoted(node["driver_method"]), MIN_DRIVER_BRANCH))
        return
    _check_driver(where, node["driver"], problems)
    cdi = to_bool(node["runtime"]["cdi_enabled"], where + ": container_toolkit_enable_cdi", problems)
    problem = runtime_cdi_problem(node["runtime"]["name"], node["runtime"]["version"], cdi)
    if problem:
        problems.append("%s: %s" % (where, problem))


def _check_driver(where, driver, problems):
    version = try_parse_driver_version(driver["version"]) if driver["version"] else None
    if version is None:
        problems.append(
            "%s: the driver's version is not known (%s), and the DRA driver needs R%d or later (expected discovery "
            "to have read the node in this run, or nvidia_driver_version declared in the inventory)"
            % (where, quoted(driver["version"]) if driver["version"] else "not discovered, not declared", MIN_DRIVER_BRANCH))
    elif version.branch < MIN_DRIVER_BRANCH:
        problems.append(
            "%s: driver %s (from %s) is older than the DRA driver needs (expected R%d or later: upgrade the node's "
            "driver first, or leave it to the device plugin with gpufleet_gpu_allocation: device_plugin)"
            % (where, version, driver["source"], MIN_DRIVER_BRANCH))


def runtime_cdi_problem(runtime, version, cdi_enabled):
    """Why ``runtime`` at ``version`` cannot inject the DRA driver's CDI devices, or None when it can.

    ``version`` '' is not known yet (the cluster check reads the kubelet's own report later)."""
    if runtime == "crio":
        return None
    if runtime not in CONTAINERD_FAMILY:
        return ("container_toolkit_runtime is %s, which cannot inject CDI devices for the DRA driver (expected containerd, "
                "k3s, rke2 or crio)" % quoted(runtime))
    parsed = version_tuple(version)
    if parsed is None:
        return None
    if parsed[:2] < CONTAINERD_CDI_MIN:
        return ("containerd %s has no CDI support, which the DRA driver needs (expected containerd 1.7 or later with "
                "container_toolkit_enable_cdi: true, or 2.0 or later)" % version)
    if parsed[:2] < CONTAINERD_CDI_DEFAULT and not cdi_enabled:
        return ("containerd %s has CDI off unless enable_cdi is set, and container_toolkit_enable_cdi is false (expected "
                "container_toolkit_enable_cdi: true, or containerd 2.0 or later)" % version)
    return None


def dra_plan(fleet, settings, hostvars):
    """The chart, values, objects and node labels of the DRA layer, and every problem found.

    ``fleet`` is gpu_fleet_nodes' output, ``settings`` the role's variables without their prefix,
    ``hostvars`` the inventory's (for each node's discovery facts, ``gpufleet_gpu_allocation``,
    ``nvidia_driver_version`` and ``container_toolkit_enable_cdi``). A pipeline: the path from the
    operator release, the nodes and their checks (not for ``state`` absent), the release, the chart,
    the values, the objects.
    """
    s = Settings(settings, ROLE)
    base = nodes_of(fleet, s)
    mode = release_mode(s.get("operator_version"), s.problems)
    nodes = [dra_node(n, (hostvars or {}).get(n["host"])) for n in base]
    selected = _selected(nodes, mode, s.problems)
    if s.get("state") != "absent":  # removing the driver needs nothing of the nodes' drivers and runtimes
        for node in selected:
            _check_node(node, s.problems)
    release = _release(s, mode)
    pod_security = common(s.under(ROLE, namespace=release["namespace"], release_name=release["name"]))
    chart = _chart(s, mode)
    values = chart_values(s, mode, selected)
    classes = device_classes(s.get("device_classes"), mode, s.problems)
    chosen = set(n["name"] for n in selected)
    wanted = dict((n["name"], {LABEL_KUBELET_PLUGIN: "true"} if mode == "standalone" and n["name"] in chosen else {}) for n in nodes)
    return result(
        s.problems,
        mode=mode,
        chart=chart,
        release=release,
        chart_values=values,
        objects=[namespace_object(release["namespace"], pod_security)] + classes,
        node_labels=label_plan(nodes, lambda n: wanted[n["name"]], {LABEL_KUBELET_PLUGIN: ["true"]}),
        nodes=[{"host": n["host"], "name": n["name"], "gpus": n["gpus"], "runtime": n["runtime"]} for n in selected],
        validation=claim_checks(s, selected),
        summary=_summary(s, mode, nodes, selected, classes),
    )


def release_mode(operator_version, problems):
    """``gpucluster`` for GPU Operator 26.7 or later, ``standalone`` for an older one or none ('')."""
    text = operator_version or ""
    if not text:
        return "standalone"
    parsed = version_tuple(text) if isinstance(text, str) and CHART_VERSION.fullmatch(text) else None
    if parsed is None:
        problems.append(
            "%s_operator_version: %s is not a GPU Operator release (expected e.g. v26.7.0 for the GPUCluster path, "
            "an older release such as v26.3.3 or '' for the standalone dra-driver-nvidia-gpu chart)" % (ROLE, quoted(text)))
        return "gpucluster"
    return "gpucluster" if parsed >= GPUCLUSTER_RELEASE else "standalone"


def _selected(nodes, mode, problems):
    """The nodes whose GPUs DRA allocates; a mix with device-plugin nodes only where the path keeps them apart."""
    selected, left = [], []
    for node in nodes:
        if node["allocation"] not in ALLOCATIONS:
            problems.append("%s: host %s: gpufleet_gpu_allocation %s is not an allocation (expected %s)"
                            % (ROLE, quoted(node["host"]), quoted(node["allocation"]), one_of(ALLOCATIONS)))
        elif node["allocation"] == "dra":
            selected.append(node)
        else:
            left.append(node["host"])
    if left and mode == "gpucluster":
        problems.append(
            "%s: hosts %s keep the device plugin (gpufleet_gpu_allocation: device_plugin), but the GPUCluster of GPU Operator "
            "26.7 cannot coexist with a ClusterPolicy and places the DRA kubelet plugin on every GPU node itself (expected "
            "every node on DRA, or %s_operator_version older than v26.7.0 or '' for the standalone chart, whose kubelet "
            "plugin runs only on the nodes labelled %s=true)" % (ROLE, ", ".join(left), ROLE, LABEL_KUBELET_PLUGIN))
    if nodes and not selected:
        problems.append("%s: no node of the group has gpufleet_gpu_allocation: dra (expected at least one)" % ROLE)
    return selected


def _chart(s, mode):
    """The chart of the path: a local one (``chart_path``), an OCI reference (``chart_ref``, the
    standalone chart), else the repository's at the path's version."""
    problems = s.problems
    if s.get("chart_path"):
        check_input(s.get("chart_path"), ROLE + "_chart_path", inputs.chart_path, problems)
        return {"ref": s.get("chart_path"), "check_values": True}
    if s.get("chart_ref"):
        return _oci_chart(s, mode)
    # The GPUCluster path installs the operator's chart at the operator's release, which release_mode checked:
    # its values are checked like the gpu_operator role's, and an upgrade goes one release line at a time.
    version = s.get("operator_version") if mode == "gpucluster" else s.get("chart_version")
    if mode == "standalone" and (not isinstance(version, str) or not CHART_VERSION.fullmatch(version)):
        problems.append("%s_chart_version: %s is not a chart version (expected e.g. 0.5.0)" % (ROLE, quoted(version)))
    url = s.get("chart_repo_url") or ""
    if isinstance(url, str) and url.startswith("oci://"):
        problems.append("%s_chart_repo_url: %s is an OCI registry, which Helm does not take as a repository (expected %s_chart_ref: "
                        "%s/%s for the chart there)" % (ROLE, quoted(url), ROLE, url.rstrip("/"), CHARTS["standalone"]))
    elif not chart_repo_url(url):
        problems.append("%s_chart_repo_url: %s is not a chart repository URL (expected http(s)://..., %s_chart_ref for an oci:// "
                        "chart, or %s_chart_path for a chart on the control host)" % (ROLE, quoted(url), ROLE, ROLE))
    chart = {"ref": CHARTS[mode], "repo_url": url, "version": version, "check_values": True}
    if mode == "gpucluster":
        problem = operator_releases.parse(version) and operator_releases.release_problem(version, ROLE + "_operator_version")
        if problem:
            problems.append(problem)
        chart.update(values_crd=operator_releases.VALUES_CRD, lines=operator_releases.chart_lines())
    return chart


def _oci_chart(s, mode):
    """The standalone chart by its OCI reference, at ``chart_version``."""
    problems = s.problems
    ref, version = s.get("chart_ref"), s.get("chart_version")
    if mode != "standalone":
        problems.append("%s_chart_ref: the GPUCluster path installs the gpu-operator chart from %s_chart_repo_url (expected '' with "
                        "%s_operator_version %s)" % (ROLE, ROLE, ROLE, quoted(s.get("operator_version"))))
    elif not isinstance(ref, str) or not _OCI_CHART.fullmatch(ref):
        problems.append("%s_chart_ref: %s is not an OCI reference of the %s chart (expected e.g. "
                        "oci://registry.k8s.io/dra-driver-nvidia/charts/%s)" % (ROLE, quoted(ref), CHARTS["standalone"], CHARTS["standalone"]))
    if not isinstance(version, str) or not CHART_VERSION.fullmatch(version):
        problems.append("%s_chart_version: %s is not a chart version (expected e.g. 0.5.0)" % (ROLE, quoted(version)))
    return {"ref": ref, "version": version, "check_values": True}


def _release(s, mode):
    name, namespace = DEFAULT_RELEASES[mode]
    return {"name": s.get("release_name") or name, "namespace": s.get("namespace") or namespace}


def chart_values(s, mode, selected):
    """The chart's values for the path: the derived ones, the images, then the overrides."""
    gates = feature_gates(s.get("feature_gates"), s.problems)
    compute_domains = s.flag("compute_domains_enabled", False)
    registry = image_registry(s)
    secrets = pull_secrets(s)
    found = overrides(s, DERIVED_VALUES[mode])
    if mode == "gpucluster":
        values = _gpucluster_values(selected, gates, compute_domains, registry, secrets)
    else:
        values = _standalone_values(s, gates, compute_domains, registry, secrets)
        _check_webhook(compute_domains, found, s.problems)
    return deep_merge(values, found)


def _gpucluster_values(selected, gates, compute_domains, registry, secrets):
    """No driver root here: the operator's driver validation finds the host's driver and tells the DRA
    driver where it is (the driver-ready file: IS_HOST_DRIVER, NVIDIA_DRIVER_ROOT)."""
    dra = {"computeDomains": {"enabled": compute_domains}}
    if gates:
        dra["featureGates"] = gates
    if registry:
        dra["repository"] = registry
    if secrets:
        dra["imagePullSecrets"] = list(secrets)
    return {
        "clusterPolicy": {"deployCR": False},
        "gpuCluster": {"deployCR": True},
        "driver": {"enabled": False},
        "toolkit": {"enabled": not all(n["host_toolkit"] for n in selected)},
        "draDriver": dra,
        # The role applies the chart's CRDs before the release (roles/helm_release): no pre-upgrade hook.
        "operator": {"upgradeCRD": False},
    }


def _standalone_values(s, gates, compute_domains, registry, secrets):
    root = s.get("driver_root") or "/"
    if not isinstance(root, str) or not root.startswith("/"):
        s.problems.append("%s_driver_root: %s is not an absolute path (expected / for a driver installed on the host)" % (ROLE, quoted(root)))
    selector = {LABEL_KUBELET_PLUGIN: "true"}
    values = {
        "nvidiaDriverRoot": root,
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": compute_domains}},
        # The chart's own affinity asks for NFD's or the operator's labels; the role's label stands for them.
        "kubeletPlugin": {
            "nodeSelector": selector,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": LABEL_KUBELET_PLUGIN, "operator": "In", "values": ["true"]}]}]}}},
        },
    }
    if gates:
        values["featureGates"] = gates
    set_image(values, registry, "dra-driver-nvidia-gpu", secrets=secrets)
    return values


def _check_webhook(compute_domains, overrides, problems):
    """The standalone chart refuses ComputeDomains without its conversion webhook (which needs cert-manager or a secret)."""
    webhook = overrides.get("webhook") if isinstance(overrides, dict) else None
    if compute_domains and not (isinstance(webhook, dict) and webhook.get("enabled") is True):
        problems.append(
            "%s_compute_domains_enabled: true, but the dra-driver-nvidia-gpu chart serves ComputeDomains only with its "
            "webhook (expected %s_values_overrides.webhook.enabled: true with its tls settings, or compute domains off)" % (ROLE, ROLE))


def feature_gates(gates, problems):
    """``dra_driver_feature_gates``: gate name -> boolean, sorted."""
    var = ROLE + "_feature_gates"
    if not isinstance(gates, dict):
        problems.append("%s: %s is not a mapping of feature gates to booleans (expected e.g. {NVMLDeviceHealthCheck: true})" % (var, quoted(gates)))
        return {}
    found = {}
    for name in sorted(gates, key=str):
        if not isinstance(name, str) or not _FEATURE_GATE.fullmatch(name):
            problems.append("%s: %s is not a feature gate name (expected CamelCase, e.g. NVMLDeviceHealthCheck)" % (var, quoted(name)))
            continue
        found[name] = to_bool(gates[name], "%s.%s" % (var, name), problems)
    return found


def device_classes(classes, mode, problems):
    """DeviceClasses the site adds beside the driver's own: ``[{name, expression, extended_resource_name}]``,
    each a narrower selection of the driver's GPUs (a CEL expression over ``device.attributes['gpu.nvidia.com']``),
    optionally serving pods that ask for an extended resource (``nvidia.com/gpu``) through DRA."""
    var = ROLE + "_device_classes"
    if not isinstance(classes, (list, tuple)):
        problems.append("%s: %s is not a list of {name, expression} (expected e.g. [{name: h200.nvidia.com, expression: ...}])" % (var, quoted(classes)))
        return []
    objects, seen = [], set()
    # the standalone chart's gpu.nvidia.com already serves nvidia.com/gpu: a second class would take it over
    resources = {CHART_EXTENDED_RESOURCE: "the chart's own gpu.nvidia.com class"} if mode == "standalone" else {}
    for index, entry in enumerate(classes):
        where = "%s[%d]" % (var, index)
        obj = _device_class(entry, where, seen, problems)
        if obj and _extended_resource(entry, where, obj, resources, problems):
            objects.append(obj)
    return sorted(objects, key=lambda o: o["metadata"]["name"])


def _extended_resource(entry, where, obj, resources, problems):
    """Set ``spec.extendedResourceName`` from ``extended_resource_name``: valid, and one class per resource
    (Kubernetes gives a resource two classes claim to the newer one). False where it is refused."""
    name = entry.get("extended_resource_name")
    if name in (None, ""):
        return True
    where += ".extended_resource_name"
    if not isinstance(name, str) or len(name) > 316 or not _EXTENDED_RESOURCE.match(name) or name.split("/")[0].endswith("kubernetes.io"):
        problems.append("%s: %s is not an extended resource name (expected a domain-prefixed name outside kubernetes.io, e.g. "
                        "nvidia.com/gpu or example.com/h200)" % (where, quoted(name)))
        return False
    if name in resources:
        problems.append("%s: %s is already served by %s (expected one DeviceClass per extended resource: Kubernetes gives it to the "
                        "newer class)" % (where, quoted(name), resources[name]))
        return False
    resources[name] = "%s (%s)" % (obj["metadata"]["name"], where.rsplit(".", 1)[0])
    obj["spec"]["extendedResourceName"] = name
    return True


def _device_class(entry, where, seen, problems):
    if not isinstance(entry, dict) or set(entry) - {"name", "expression", "extended_resource_name"}:
        problems.append("%s: %s is not {name, expression, extended_resource_name} (expected those keys, the last one optional)"
                        % (where, quoted(entry)))
        return None
    name, expression = entry.get("name"), entry.get("expression")
    if not check_name(name, where + ".name", DNS_SUBDOMAIN, "a DeviceClass name (expected lower-case alphanumerics, '-' and '.')", problems):
        return None
    if name in DRIVER_DEVICE_CLASSES or name in seen:
        problems.append("%s.name: %s is %s (expected a name of the site's own, e.g. h200.gpu.example.com)"
                        % (where, quoted(name), "a class the DRA driver creates itself" if name in DRIVER_DEVICE_CLASSES else "listed twice"))
        return None
    seen.add(name)
    if not isinstance(expression, str) or not expression.strip():
        problems.append("%s.expression: %s is not a CEL expression (expected e.g. \"device.attributes['%s'].productName == 'NVIDIA H200'\")"
                        % (where, quoted(expression), DRIVER_NAME))
        return None
    selectors = [{"cel": {"expression": "device.driver == '%s' && device.attributes['%s'].type == 'gpu'" % (DRIVER_NAME, DRIVER_NAME)}},
                 {"cel": {"expression": expression.strip()}}]
    return {"apiVersion": RESOURCE_API, "kind": "DeviceClass",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpufleet.nvidia"}}, "spec": {"selectors": selectors}}


def claim_checks(s, nodes):
    """Per DRA node, a ResourceClaim for one whole GPU and a pause pod on that node that uses it: the
    validation creates them, waits for the claim to be allocated and the pod to run, then deletes them."""
    namespace = s.get("validate_namespace") or "gpufleet-dra-check"
    check_namespace(namespace, ROLE + "_validate_namespace", s.problems)
    image = s.get("validate_image") or ""
    if not isinstance(image, str) or not image or any(c.isspace() for c in image):
        s.problems.append("%s_validate_image: %s is not an image reference (expected e.g. registry.k8s.io/pause:3.10)" % (ROLE, quoted(image)))
    checks = []
    for node in nodes:
        name = ("gpufleet-dra-%s" % node["name"].replace(".", "-"))[:63].rstrip("-")
        meta = {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "gpufleet.nvidia"}}
        claim = {"apiVersion": RESOURCE_API, "kind": "ResourceClaim", "metadata": dict(meta),
                 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER_NAME, "count": 1}}]}}}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": dict(meta), "spec": {
            # the scheduler allocates the claim: matchFields keeps the pod to the node by name (nodeName would bypass it)
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node["name"]]}]}]}}},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "restartPolicy": "Never",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
            "containers": [{"name": "pause", "image": image, "resources": {"claims": [{"name": "gpu"}]}}]}}
        checks.append({"node": node["name"], "host": node["host"], "claim": claim, "pod": pod})
    return {"namespace": namespace, "checks": checks}


def _summary(s, mode, nodes, selected, classes):
    return {
        "path": mode,
        "operator_version": s.get("operator_version") or "",
        "nodes": [n["name"] for n in selected],
        "device_plugin_nodes": [n["name"] for n in nodes if n["allocation"] == "device_plugin"],
        "kubelet_plugin_on": ("the nodes labelled %s=true" % LABEL_KUBELET_PLUGIN) if mode == "standalone"
        else "every GPU node (the operator's nvidia.com/gpu.deploy.dra-driver label)",
        "device_classes": sorted(DRIVER_DEVICE_CLASSES[:2] + tuple(o["metadata"]["name"] for o in classes)),
        "drivers": dict((n["name"], n["driver"]["version"]) for n in selected),
    }
