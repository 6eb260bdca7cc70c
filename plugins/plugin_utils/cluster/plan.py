# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the cluster layer applies, built from the inventory: Helm values, objects, node labels.

Plain functions over plain data, shared by the filter plugins ``gpu_fleet_nodes``,
``gpu_operator_plan``, ``device_plugin_plan``, ``gpu_node_label_patches`` and
``image_pull_secret``, and by the unit tests that render every example fleet. Nothing here talks
to a cluster. Problems are collected, not raised, so that a role can stop before anything is
applied and show all of them at once; each names the variable, the bad value and what would be
accepted.

Everything returned is deterministic (dicts built in a fixed order, lists sorted, YAML dumped
the same way each time) so that a second run hands Helm the very same values and nothing changes.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import re

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import mig_fit, operator_releases
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import deep_merge, host_fact, plain, plural
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.versions import version_tuple
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import gpu_table

try:
    import yaml
except ImportError:  # pragma: no cover - controller-side code; ansible-core requires PyYAML
    yaml = None

try:
    from ansible.module_utils.parsing.convert_bool import boolean as _ansible_boolean
except ImportError:  # pragma: no cover - ansible-core is always there on the controller
    _ansible_boolean = None

# --- Names the NVIDIA stack uses ----------------------------------------------------------------
LABEL_DEPLOY_DRIVER = "nvidia.com/gpu.deploy.driver"
LABEL_DEPLOY_TOOLKIT = "nvidia.com/gpu.deploy.container-toolkit"
LABEL_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
LABEL_MIG_CONFIG = "nvidia.com/mig.config"
LABEL_GPU_PRESENT = "nvidia.com/gpu.present"
LABEL_POD_SECURITY = "pod-security.kubernetes.io/enforce"

DRIVER_METHODS = ("package", "preinstalled", "operator")
HOST_DRIVER_METHODS = ("package", "preinstalled")
RUNTIMES = ("containerd", "crio", "docker", "k3s", "rke2", "none")
# The runtime each flavour is to the GPU Operator.
RUNTIME_FAMILY = {
    "containerd": "containerd",
    "k3s": "containerd",
    "rke2": "containerd",
    "crio": "crio",
    "docker": "docker",
}
MIG_STRATEGIES = ("none", "single", "mixed")
SHARING_STRATEGIES = ("none", "time-slicing", "mps")
# How the device plugin hands a pod its GPUs (k8s-device-plugin's --device-list-strategy).
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEVICE_LIST_DEFAULT = ("envvar", "volume-mounts")
SHARING_OPTIONS = ("strategy", "replicas", "rename_by_default", "fail_requests_greater_than_one", "resources")
POD_SECURITY_LEVELS = ("", "privileged", "baseline", "restricted")
# The per-host inventory variables the cluster layer reads.
HOST_VARS = (
    "gpufleet_node_name",
    "nvidia_driver_method",
    "container_toolkit_enabled",
    "container_toolkit_runtime",
    "gpufleet_sharing_config",
    "gpufleet_mig_config",
    # The container_toolkit role's switches that decide whether the node's runtime hands over
    # CDI devices (defaults as in that role: TOOLKIT_ENABLE_CDI_DEFAULT, set_as_default false).
    "container_toolkit_enable_cdi",
    "container_toolkit_set_as_default",
)
#: roles/container_toolkit's default of container_toolkit_enable_cdi (role defaults are not in
#: hostvars); CDI on, as NVIDIA's own since toolkit 1.18 and GPU Operator 25.10.
TOOLKIT_ENABLE_CDI_DEFAULT = True

# k3s and RKE2 run their own containerd: its config is generated from a template under
# /var/lib/rancher/<distribution>/agent/etc/containerd, the socket is /run/k3s/containerd, and
# from containerd 2 (config version 3) the generated config imports config-v3.toml.d/*.toml.
# The toolkit reads the generated file (RUNTIME_CONFIG_SOURCE=file=...) and writes its runtime
# into a drop-in there, which survives the distribution regenerating config.toml. Names from
# the GPU Operator's "Specifying Configuration Options for containerd" and RKE2's
# "Deploy NVIDIA operator" documentation.
RANCHER_CONTAINERD = {
    "k3s": "/var/lib/rancher/k3s/agent/etc/containerd",
    "rke2": "/var/lib/rancher/rke2/agent/etc/containerd",
}
RANCHER_CONTAINERD_SOCKET = "/run/k3s/containerd/containerd.sock"

# GPU Operator chart components whose image repository an air-gapped site redirects, as
# chart value paths. Each takes ``repository`` and ``imagePullSecrets`` (a list of names).
GPU_OPERATOR_IMAGE_COMPONENTS = (
    "operator",
    "validator",
    "driver",
    "driver.manager",
    "toolkit",
    "devicePlugin",
    "dcgm",
    "dcgmExporter",
    "gfd",
    "migManager",
    "nodeStatusExporter",
    "gds",
    "gdrcopy",
)
# Components that take imagePullSecrets (the driver manager shares the driver's pod).
GPU_OPERATOR_PULL_SECRET_COMPONENTS = tuple(c for c in GPU_OPERATOR_IMAGE_COMPONENTS if c != "driver.manager")
NFD_IMAGE = "node-feature-discovery"

# Values the role derives itself; an override there would undo the derivation silently.
GPU_OPERATOR_DERIVED_VALUES = (
    "driver.enabled",
    "toolkit.enabled",
    "mig.strategy",
    "devicePlugin.config",
)
DEVICE_PLUGIN_DERIVED_VALUES = ("config", "migStrategy")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_RESOURCE = re.compile(r"^nvidia\.com/(gpu|mig-[0-9][0-9a-z.+]*)$")
_CHART_VERSION = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+$")
_DRIVER_VERSION = re.compile(r"^[0-9]{3}(\.[0-9]{1,3}){0,2}$")
_REGISTRY = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*$")
_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$")


# --- Small helpers ------------------------------------------------------------------------------
def _q(value):
    """A value as it appears in a message: strings quoted, the rest as YAML would show them."""
    if isinstance(value, str):
        return repr(value)  # a newline or an escape shows as \n, \x1b
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _one_of(choices):
    return "one of: " + ", ".join(c if c else "''" for c in choices)


def to_bool(value, var, problems):
    """``value`` as a bool, the way Ansible reads yes/no/true/1; a problem when it is not one."""
    if isinstance(value, bool):
        return value
    try:
        if _ansible_boolean is None:  # pragma: no cover
            raise TypeError(value)
        return _ansible_boolean(value, strict=True)
    except TypeError:
        problems.append("%s: %s is not a boolean (expected true or false)" % (var, _q(value)))
        return False


def dump_yaml(data, sort_keys=False):
    """YAML text the same way every time: block style, keys in the order they were built (or
    sorted, for data whose order came from the user's inventory)."""
    if yaml is None:  # pragma: no cover
        raise RuntimeError("PyYAML is required on the control host")
    return yaml.safe_dump(data, default_flow_style=False, sort_keys=sort_keys, width=1000)


def _paths(data, prefix=""):
    for key, value in data.items():
        path = "%s.%s" % (prefix, key) if prefix else str(key)
        yield path
        if isinstance(value, dict):
            yield from _paths(value, path)


def _set_path(data, dotted, value):
    parts = dotted.split(".")
    for part in parts[:-1]:
        data = data.setdefault(part, {})
    data[parts[-1]] = value


def _check_overrides(overrides, var, derived, problems):
    if not isinstance(overrides, dict):
        problems.append("%s: %s is not a mapping of chart values (expected a dict)" % (var, _q(overrides)))
        return {}
    reported = []
    for path in _paths(overrides):
        if any(path.startswith(r + ".") for r in reported):
            continue
        if any(path == owned or path.startswith(owned + ".") for owned in derived):
            reported.append(path)
            problems.append(
                "%s.%s: the role sets this value from the inventory; remove it from %s (see the "
                "role's README for the variable that drives it)" % (var, path, var)
            )
    return overrides


def _check_name(value, var, pattern, what, problems):
    if not isinstance(value, str) or not value or not pattern.fullmatch(value) or len(value) > 253:
        problems.append("%s: %s is not %s" % (var, _q(value), what))
        return False
    return True


def _check_input(value, var, validator, problems):
    """``validator`` of common/inputs on ``value``; its refusal as a problem of ``var``."""
    try:
        validator(value)
    except inputs.Invalid as exc:
        problems.append("%s: %s is not %s" % (var, _q(value), exc.expected))


def chart_repo_url(url):
    """Whether ``url`` is a whole chart repository URL (http, https or oci, printable ASCII, no whitespace)."""
    try:
        return bool(inputs.url(url, schemes=("http", "https", "oci")))
    except inputs.Invalid:
        return False


def _check_namespace(value, var, problems):
    if not isinstance(value, str) or len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        problems.append(
            "%s: %s is not a namespace name (expected a DNS label: lower-case alphanumerics and "
            "'-', at most 63 characters)" % (var, _q(value))
        )


def _check_duration(value, var, problems):
    if not isinstance(value, str) or not _DURATION.fullmatch(value):
        problems.append("%s: %s is not a duration (expected e.g. 10m or 900s)" % (var, _q(value)))


# --- The fleet, from the inventory -------------------------------------------------------------
def discovered_gpus(facts):
    """What discovery found on a node, as the cluster plan uses it; None when it did not read it."""
    if not isinstance(facts, dict) or not facts:
        return None
    smi = ((facts.get("driver") or {}).get("nvidia_smi") or {})
    return {
        "count": facts.get("gpu_count") or 0,
        "smi": [
            {"name": g.get("name"), "mig_capable": bool(g.get("mig_capable")), "memory_total_mib": g.get("memory_total_mib")}
            for g in smi.get("gpus") or [] if isinstance(g, dict)
        ],
        # What the PCI bus says of each GPU, for when nvidia-smi does not answer.
        "pci": [
            {"name": g.get("name"), "device_id": g.get("device_id"), "mig_capable": gpu_table.mig_capable(g.get("device_id") or "")}
            for g in facts.get("gpus") or [] if isinstance(g, dict)
        ],
    }


def discovered_runtime_version(facts, runtime):
    """The version discovery found of the node's containerd or CRI-O; None otherwise (k3s and
    RKE2 embed a containerd whose version discovery does not read)."""
    if not isinstance(facts, dict) or runtime not in ("containerd", "crio"):
        return None
    found = ((facts.get("container") or {}).get(runtime) or {}).get("version")
    return found if isinstance(found, str) and found else None


def _run_problem(host, where, run):
    """A node this run set out to discover and did not: its state is unknown."""
    if not isinstance(run, dict) or not run.get("discovered"):
        return None
    if host in (run.get("hosts") or []) and host not in (run.get("reached") or []):
        return (
            "%s: failed or was unreachable in this run before the cluster layer, so how it is prepared now is not "
            "known; the cluster change is refused for the whole fleet, not planned without it (fix the host, or "
            "leave it out of this run with --limit '!%s', which plans it from the inventory)" % (where, host)
        )
    return None


def fleet_nodes(hosts, hostvars, role, run=None):
    """The GPU nodes the inventory declares, as the cluster layer sees them.

    ``hosts`` is the inventory group that declares the cluster's GPU nodes (all of it, whatever
    an earlier play did with a host). Per host (inventory variables; defaults in brackets):
    ``nvidia_driver_method`` (required: package, preinstalled or operator), ``gpufleet_node_name``
    [the inventory name], ``container_toolkit_enabled`` [true unless the driver method is
    operator], ``container_toolkit_runtime`` [containerd], ``gpufleet_sharing_config`` [none: the
    default config] and ``gpufleet_mig_config`` [none]. A host is *prepared* for a component when
    this collection put it on the host: the driver when the method is package or preinstalled,
    the toolkit when its role is enabled.

    ``run`` (site.yml's record of its discovery: ``{discovered, hosts, reached}``) makes a node
    that this run failed to discover a problem, never a node left out.
    """
    if hosts is None:
        hosts = []
    if isinstance(hosts, str) or not isinstance(hosts, (list, tuple)):
        return {"nodes": [], "problems": ["%s: the node group is not a list of hosts (got %s)" % (role, _q(hosts))]}
    problems, nodes, seen = [], [], {}
    run = _run_lookup(run)
    for host in hosts:
        if host not in hostvars:
            problems.append("%s: host %s of the node group is not in the inventory" % (role, _q(host)))
            continue
        nodes.append(_fleet_node(host, hostvars[host], "%s: host %s" % (role, _q(host)), run, seen, problems))
    nodes.sort(key=lambda n: (str(n["name"]), str(n["host"])))
    return {"nodes": nodes, "problems": problems}


def _run_lookup(run):
    """The run's record with sets for its hosts, looked up once per node (its lists would make
    the lookups quadratic in the fleet's size): ``hosts`` and ``reached`` (discovery), ``failed``
    (nodes whose host layer failed in this run) and ``moved`` (nodes moved from the operator's
    driver to the host's before the host layers)."""
    if not isinstance(run, dict):
        return run
    found = dict(run)
    for key in ("hosts", "reached", "failed", "moved"):
        found[key] = set(run.get(key) or [])
    return found


def _held(host, run):
    """``(held, moved_back)``: the node's host layer failed in this run, so the parts of the
    cluster change that rely on it are held back; a node that was moving from the operator's
    driver to the host's goes back to the operator's."""
    if not isinstance(run, dict) or host not in run.get("failed", ()):
        return False, False
    return True, host in run.get("moved", ())


def _fleet_node(host, raw, where, run, seen, problems):
    """One host of the node group as a node of the plan; what is wrong with it goes to ``problems``."""
    hv = dict((k, plain(raw[k])) for k in HOST_VARS if k in raw)
    failed = _run_problem(host, where, run)
    if failed:
        problems.append(failed)
    name = _node_name(hv.get("gpufleet_node_name") or host, host, where, seen, problems)
    method = _driver_method(hv, where, problems)
    host_toolkit = to_bool(hv.get("container_toolkit_enabled", method != "operator"), "%s: container_toolkit_enabled" % where, problems)
    held, moved_back = _held(host, run)
    if moved_back:
        method, host_toolkit = "operator", False
    runtime = hv.get("container_toolkit_runtime", "containerd")
    if runtime not in RUNTIMES:
        problems.append(
            "%s: container_toolkit_runtime %s is not a container runtime (expected %s)" % (where, _q(runtime), _one_of(RUNTIMES))
        )
    sharing = hv.get("gpufleet_sharing_config") or ""
    mig = hv.get("gpufleet_mig_config") or ""
    for var, value in (("gpufleet_sharing_config", sharing), ("gpufleet_mig_config", mig)):
        _check_label_value(value, "%s: %s" % (where, var), problems)
    return {
        "host": host,
        "name": name,
        "driver_method": method,
        "host_driver": method in HOST_DRIVER_METHODS,
        "host_toolkit": host_toolkit,
        "runtime": runtime,
        "sharing_config": sharing,
        "mig_config": mig,
        "gpus": plain(discovered_gpus(host_fact(raw, "gpufleet_nvidia"))),
        "runtime_version": discovered_runtime_version(host_fact(raw, "gpufleet_nvidia"), runtime),
        "cdi_ready": _cdi_ready(hv, where, problems),
        "operator_driver": ((host_fact(raw, "gpufleet_nvidia") or {}).get("driver") or {}).get("source") == "operator",
        "held": held,
        "moved_back": moved_back,
    }


def _cdi_ready(hv, where, problems):
    """Why the node's runtime, as the container_toolkit role configures it, hands a pod the CDI
    devices the device plugin names: ``default_runtime`` (nvidia its default runtime: the NVIDIA
    runtime reads the CDI annotations itself), ``enable_cdi`` (CDI on in the runtime), or ``""``."""
    cdi = to_bool(hv.get("container_toolkit_enable_cdi", TOOLKIT_ENABLE_CDI_DEFAULT), "%s: container_toolkit_enable_cdi" % where,
                  problems)
    default = to_bool(hv.get("container_toolkit_set_as_default", False), "%s: container_toolkit_set_as_default" % where, problems)
    return "default_runtime" if default else "enable_cdi" if cdi else ""


def _node_name(name, host, where, seen, problems):
    """The node's name in the cluster, checked, and recorded in ``seen`` (name -> host)."""
    if not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        problems.append(
            "%s: gpufleet_node_name %s is not a Kubernetes node name (expected lower-case "
            "alphanumerics, '-' and '.'; set gpufleet_node_name to the node's name in the cluster)"
            % (where, _q(name))
        )
    elif name in seen:
        problems.append(
            "%s: gpufleet_node_name %s is also the node of host %s (expected one host per node)"
            % (where, _q(name), _q(seen[name]))
        )
    else:
        seen[name] = host
    return name


def _driver_method(hv, where, problems):
    """The declared ``nvidia_driver_method``; a problem when it is missing (then package) or unknown."""
    if "nvidia_driver_method" not in hv:
        problems.append(
            "%s: nvidia_driver_method is not set in the inventory, so how the node is prepared is not declared "
            "(expected %s for every node of the GPU node group)" % (where, _one_of(DRIVER_METHODS))
        )
    method = hv.get("nvidia_driver_method", "package")
    if method not in DRIVER_METHODS:
        problems.append(
            "%s: nvidia_driver_method %s is not a driver method (expected %s)" % (where, _q(method), _one_of(DRIVER_METHODS))
        )
    return method


def _check_label_value(value, var, problems):
    if value and (not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.fullmatch(value)):
        problems.append(
            "%s %s is not a label value (expected at most 63 alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric)" % (var, _q(value))
        )


def _fleet(fleet, role, group):
    if not isinstance(fleet, dict) or "nodes" not in fleet:
        return [], ["%s: the fleet is not the output of gpufleet.nvidia.gpu_fleet_nodes" % role]
    nodes = fleet["nodes"]
    problems = list(fleet.get("problems", []))
    if not nodes and not problems:
        problems.append(
            "%s_node_group: no GPU nodes in group %s (expected the inventory group that declares every GPU node of "
            "the cluster, each with its nvidia_driver_method; or gpufleet_gpu_node_group set to that group)"
            % (role, _q(group))
        )
    return nodes, problems


# --- Device plugin configuration (time-slicing, MPS, MIG strategy) -----------------------------
def plugin_configs(configs, default, mig_strategy, prefix, problems, extra_flags=None):
    """The device plugin's named configs as ``{name: YAML text}``, in the k8s-device-plugin
    ``api/config/v1`` format, one per entry of ``<prefix>_sharing_configs``.

    Each entry: ``strategy`` (none | time-slicing | mps), ``replicas`` (at least 2 when shared),
    ``rename_by_default``, ``fail_requests_greater_than_one``, ``resources`` (default
    ``[nvidia.com/gpu]``). A config named ``default`` without sharing is added when the default
    named by ``<prefix>_sharing_default`` is ``default`` and not declared.
    """
    if mig_strategy not in MIG_STRATEGIES:
        problems.append(
            "%s_mig_strategy: %s is not a MIG strategy (expected %s)" % (prefix, _q(mig_strategy), _one_of(MIG_STRATEGIES))
        )
    configs = _sharing_configs(configs, default, prefix, problems)
    data = {}
    for name in sorted(configs, key=str):
        doc = _named_plugin_config(name, configs[name], mig_strategy, prefix, problems, extra_flags or {})
        if doc is not None:
            data[name] = dump_yaml(doc)
    return data


def _sharing_configs(configs, default, prefix, problems):
    """``<prefix>_sharing_configs`` as a dict, with the ``default`` config it may leave implied."""
    var = prefix + "_sharing_configs"
    if configs is None:
        configs = {}
    if not isinstance(configs, dict):
        problems.append("%s: %s is not a mapping of config names to configs (expected a dict)" % (var, _q(configs)))
        configs = {}
    configs = dict(configs)
    if default == "default" and "default" not in configs:
        configs["default"] = {"strategy": "none"}
    if default not in configs:
        problems.append(
            "%s_sharing_default: %s is not one of the configs in %s (expected %s)"
            % (prefix, _q(default), var, _one_of(sorted(str(k) for k in configs)))
        )
    return configs


def _named_plugin_config(name, entry, mig_strategy, prefix, problems, extra_flags):
    """The config document of one entry of ``<prefix>_sharing_configs``, or None when it cannot be built."""
    var = prefix + "_sharing_configs"
    where = "%s.%s" % (var, name)
    if not isinstance(name, str) or len(name) > 63 or not _LABEL_VALUE.fullmatch(name) or not name:
        problems.append(
            "%s: %s is not a config name (expected a label value: at most 63 alphanumerics, '-', "
            "'_' or '.', starting and ending with an alphanumeric)" % (var, _q(name))
        )
        return None
    if entry is None:
        entry = {}
    if not isinstance(entry, dict):
        problems.append("%s: %s is not a config (expected a dict with %s)" % (where, _q(entry), ", ".join(SHARING_OPTIONS)))
        return None
    for key in sorted(entry, key=str):
        if key not in SHARING_OPTIONS:
            problems.append("%s: unknown option %s (expected %s)" % (where, _q(key), _one_of(SHARING_OPTIONS)))
    return _plugin_config(entry, where, mig_strategy, prefix, problems, extra_flags)


def _plugin_config(entry, where, mig_strategy, prefix, problems, extra_flags):
    strategy = entry.get("strategy", "none")
    if strategy not in SHARING_STRATEGIES:
        problems.append("%s.strategy: %s is not a sharing strategy (expected %s)" % (where, _q(strategy), _one_of(SHARING_STRATEGIES)))
        return None
    flags = {"migStrategy": mig_strategy}
    flags.update(extra_flags)
    doc = {"version": "v1", "flags": flags}
    if strategy == "none":
        _check_unshared(entry, where, problems)
        return doc
    if strategy == "mps" and mig_strategy != "none":
        problems.append(
            "%s.strategy: 'mps' does not combine with MIG (%s_mig_strategy is %s; expected "
            "%s_mig_strategy 'none' for a fleet that uses MPS, or strategy time-slicing)"
            % (where, prefix, _q(mig_strategy), prefix)
        )
    count = _replicas(entry, where, strategy, problems)
    resources = _shared_resources(entry, where, mig_strategy, prefix, problems)
    shared = {
        "renameByDefault": to_bool(entry.get("rename_by_default", False), where + ".rename_by_default", problems),
        "failRequestsGreaterThanOne": to_bool(
            entry.get("fail_requests_greater_than_one", False), where + ".fail_requests_greater_than_one", problems
        ),
        "resources": [{"name": r, "replicas": count} for r in resources if isinstance(r, str)],
    }
    doc["sharing"] = {"timeSlicing" if strategy == "time-slicing" else "mps": shared}
    return doc


_SHARED_ONLY = ("replicas", "rename_by_default", "fail_requests_greater_than_one", "resources")


def _check_unshared(entry, where, problems):
    """A config that shares nothing takes none of the sharing options."""
    shared_only = [k for k in _SHARED_ONLY if k in entry]
    if shared_only:
        problems.append(
            "%s: %s only apply to a shared config (strategy is 'none'; expected strategy "
            "time-slicing or mps)" % (where, ", ".join(shared_only))
        )


def _replica_count(replicas):
    """``replicas`` as an int (a number or a string of digits), or None."""
    if isinstance(replicas, bool) or replicas is None:
        return None
    if isinstance(replicas, int):
        return replicas
    if isinstance(replicas, str) and replicas.isdigit():
        return int(replicas)
    return None


def _replicas(entry, where, strategy, problems):
    replicas = entry.get("replicas")
    count = _replica_count(replicas)
    if count is None or count < 2:
        problems.append(
            "%s.replicas: %s is not a number of replicas for %s (expected an integer of at least 2)"
            % (where, _q(replicas), strategy)
        )
        count = 2
    return count


def _shared_resources(entry, where, mig_strategy, prefix, problems):
    """The resources a shared config replicates, each checked; the default when they are not a list."""
    resources = entry.get("resources", ["nvidia.com/gpu"])
    if isinstance(resources, str) or not isinstance(resources, (list, tuple)) or not resources:
        problems.append("%s.resources: %s is not a list of resource names (expected e.g. [nvidia.com/gpu])" % (where, _q(resources)))
        resources = ["nvidia.com/gpu"]
    seen = set()
    for resource in resources:
        problem = _resource_problem(resource, seen, mig_strategy, prefix)
        if problem:
            problems.append("%s.resources: %s %s" % (where, _q(resource), problem))
        seen.add(resource)
    return resources


def _resource_problem(resource, seen, mig_strategy, prefix):
    if not isinstance(resource, str) or not _RESOURCE.fullmatch(resource):
        return "is not a GPU resource name (expected nvidia.com/gpu or nvidia.com/mig-<profile>, e.g. nvidia.com/mig-1g.10gb)"
    if resource.startswith("nvidia.com/mig-") and mig_strategy != "mixed":
        return "is only advertised with MIG strategy 'mixed' (%s_mig_strategy is %s; expected nvidia.com/gpu)" % (prefix, _q(mig_strategy))
    if resource in seen:
        return "is listed twice (expected each resource once)"
    return None


def _check_node_sharing(nodes, names, prefix, problems):
    for node in nodes:
        if node["sharing_config"] and node["sharing_config"] not in names:
            problems.append(
                "%s: host %s: gpufleet_sharing_config %s is not one of the configs in %s_sharing_configs "
                "(expected %s)" % (prefix, _q(node["host"]), _q(node["sharing_config"]), prefix, _one_of(sorted(names)))
            )


# --- Images and pull secrets --------------------------------------------------------------------
def _pull_secrets(settings, prefix, problems):
    """Names of the image pull secrets: the listed ones plus the one the role creates."""
    var = prefix + "_image_pull_secrets"
    listed = settings.get("image_pull_secrets") or []
    if isinstance(listed, str) or not isinstance(listed, (list, tuple)):
        problems.append("%s: %s is not a list of secret names (expected e.g. [nvcr-pull])" % (var, _q(listed)))
        listed = []
    names = []
    for name in listed:
        if _check_name(name, var, _DNS_SUBDOMAIN, "a secret name (expected lower-case alphanumerics, '-' and '.')", problems):
            names.append(name)
    secret = registry_secret(settings, prefix, problems)
    if secret and secret not in names:
        names.append(secret)
    return names


def registry_secret(settings, prefix, problems):
    """The name of the pull secret the role creates from the registry credentials, or ''."""
    server = settings.get("registry_server") or ""
    username = settings.get("registry_username") or ""
    password_set = to_bool(settings.get("registry_password_set", False), prefix + "_registry_password", problems)
    given = [n for n, v in (("server", server), ("username", username), ("password", password_set)) if v]
    if not given:
        return ""
    missing = [n for n in ("server", "username", "password") if n not in given]
    if missing:
        problems.append(
            "%s_registry_%s: not set, but %s are (expected all of %s_registry_server, _username and "
            "_password for a pull secret, or none)"
            % (prefix, missing[0], ", ".join("%s_registry_%s" % (prefix, n) for n in given), prefix)
        )
        return ""
    if not isinstance(server, str) or "://" in server or "/" in server:
        problems.append(
            "%s_registry_server: %s is not a registry host (expected host[:port], e.g. registry.example.com:5000)"
            % (prefix, _q(server))
        )
    name = settings.get("registry_secret_name") or ""
    if not _check_name(name, prefix + "_registry_secret_name", _DNS_SUBDOMAIN, "a secret name (expected lower-case alphanumerics, '-' and '.')", problems):
        return ""
    return name


def _image_registry(settings, prefix, problems):
    registry = settings.get("image_registry") or ""
    if registry and (not isinstance(registry, str) or not _REGISTRY.fullmatch(registry)):
        problems.append(
            "%s_image_registry: %s is not a registry prefix (expected host[:port][/path] without a scheme, "
            "e.g. registry.example.com:5000/nvidia)" % (prefix, _q(registry))
        )
        return ""
    return registry


def image_pull_secret(credentials, name, namespace):
    """A ``kubernetes.io/dockerconfigjson`` Secret for one registry. ``credentials`` holds
    ``server``, ``username`` and ``password``; the password is never part of an error message."""
    credentials = plain(credentials or {})
    missing = [k for k in ("server", "username", "password") if not credentials.get(k)]
    if missing:
        raise ValueError("registry credentials lack %s" % ", ".join(missing))
    user = str(credentials["username"])
    password = str(credentials["password"])
    auth = base64.b64encode(("%s:%s" % (user, password)).encode("utf-8")).decode("ascii")
    config = {"auths": {str(credentials["server"]): {"username": user, "password": password, "auth": auth}}}
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "gpufleet.nvidia"}},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(text.encode("utf-8")).decode("ascii")},
    }


# --- Objects and chart --------------------------------------------------------------------------
def namespace_object(name, pod_security):
    meta = {"name": name}
    if pod_security:
        meta["labels"] = {LABEL_POD_SECURITY: pod_security}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def _chart(settings, prefix, name, problems):
    path = settings.get("chart_path") or ""
    if path:
        _check_input(path, prefix + "_chart_path", inputs.chart_path, problems)
        return {"ref": path, "check_values": True}
    version = settings.get("chart_version")
    if not isinstance(version, str) or not _CHART_VERSION.fullmatch(version):
        problems.append(
            "%s_chart_version: %s is not a chart version (expected e.g. %s)"
            % (prefix, _q(version), operator_releases.DEFAULT if prefix == "gpu_operator" else "0.20.0")
        )
    url = settings.get("chart_repo_url") or ""
    if not chart_repo_url(url):
        problems.append(
            "%s_chart_repo_url: %s is not a chart repository URL (expected http(s)://... or oci://..., "
            "or %s_chart_path for a chart on the control host)" % (prefix, _q(url), prefix)
        )
    return {"ref": name, "repo_url": url, "version": version, "check_values": True}


def _common(settings, prefix, problems):
    _check_namespace(settings.get("namespace"), prefix + "_namespace", problems)
    _check_input(settings.get("release_name"), prefix + "_release_name", inputs.release_name, problems)
    _check_duration(settings.get("wait_timeout"), prefix + "_wait_timeout", problems)
    level = settings.get("namespace_pod_security") or ""
    if level not in POD_SECURITY_LEVELS:
        problems.append(
            "%s_namespace_pod_security: %s is not a Pod Security level (expected %s)"
            % (prefix, _q(level), _one_of(POD_SECURITY_LEVELS))
        )
        level = ""
    return level


def _label_plan(nodes, wanted, removable):
    """Per node: labels to set, and label values the role owns and removes when not wanted."""
    plan = []
    for node in nodes:
        labels = wanted(node)
        entry = {
            "host": node["host"],
            "name": node["name"],
            "labels": dict(sorted(labels.items())),
            "remove": dict((k, sorted(v)) for k, v in sorted(removable.items()) if k not in labels),
        }
        if node.get("held") and not node.get("moved_back"):
            entry["hold"] = True  # its host layer failed: its labels stay as they are
        plan.append(entry)
    return plan


def _result(problems, **parts):
    result = {"problems": problems}
    if problems:
        for key in parts:
            parts[key] = None
    result.update(parts)
    return result


# --- The GPU Operator ---------------------------------------------------------------------------
def gpu_operator_plan(fleet, settings):
    """Values for the gpu-operator chart, the objects to apply beside it and the node labels.

    ``driver.enabled`` / ``toolkit.enabled`` follow from how the nodes were prepared: no node
    prepared -> the operator deploys both; all prepared -> neither; a mix -> enabled, and the
    prepared nodes get ``nvidia.com/gpu.deploy.driver=false`` and / or
    ``nvidia.com/gpu.deploy.container-toolkit=false``.

    A pipeline: read the fleet and the settings, derive what the operator deploys, check and
    build each part of the values (runtime, driver, toolkit, MIG, sharing, images), then the
    objects, the node labels and the summary. Problems are collected in the order of the steps.
    """
    p = "gpu_operator"
    s = plain(settings or {})
    nodes, problems = _fleet(fleet, p, s.get("node_group"))
    pod_security = _common(s, p, problems)
    chart = _chart(s, p, "gpu-operator", problems)
    chart["values_crd"] = operator_releases.VALUES_CRD
    if chart.get("version"):
        chart["lines"] = operator_releases.chart_lines()
    deploys = {"driver": any(not n["host_driver"] for n in nodes), "toolkit": any(not n["host_toolkit"] for n in nodes)}
    runtime = _operator_runtime(s, nodes, problems)
    driver, extras = _operator_driver(s, deploys["driver"], problems)
    toolkit = _operator_toolkit(s, deploys["toolkit"], runtime, problems)
    mig = _operator_mig(s, nodes, problems)
    sharing = _operator_sharing(s, nodes, mig["strategy"], problems)
    extras["host_toolkit"] = any(n["host_toolkit"] for n in nodes)
    values = _operator_values(s, driver, toolkit, mig, sharing, extras, problems)
    release = operator_releases.plan_release(s, nodes, [n for n in nodes if not n["host_toolkit"]], values, problems)
    _check_cdi_agreement(nodes, values.get("cdi") or {}, problems, mig["notes"])
    removable = {LABEL_DEPLOY_DRIVER: ["false"], LABEL_DEPLOY_TOOLKIT: ["false"], LABEL_PLUGIN_CONFIG: list(sharing["data"]),
                 LABEL_MIG_CONFIG: sorted(mig["names"])}
    return _result(
        problems,
        chart=chart,
        chart_values=values,
        objects=[namespace_object(s.get("namespace"), pod_security)] + mig["objects"],
        node_labels=_label_plan(nodes, functools.partial(_operator_node_labels, deploys), removable),
        summary=_operator_summary(nodes, deploys, runtime, sharing["data"], mig, release),
        warnings=(release or {}).get("warnings") or [],
        driver_sides=[{"host": n["host"], "name": n["name"], "host_driver": n["host_driver"],
                       "operator_driver": n["operator_driver"]} for n in nodes],
        held=_held_back(nodes),
    )


def _held_back(nodes):
    """What of the change is held back for the nodes whose host layer failed in this run."""
    held = []
    for node in nodes:
        if node.get("moved_back"):
            held.append("%s: its host layer failed while it moved from the GPU Operator's driver to the host's: it goes "
                        "back to the operator's driver (planned as driver_method operator), and stays cordoned" % node["host"])
        elif node.get("held"):
            held.append("%s: its host layer failed: its node labels are left as they are" % node["host"])
    return held


# --- GPU Operator: container runtime ------------------------------------------------------------
def _operator_runtime(settings, nodes, problems):
    """The runtime flavour the toolkit's containerd settings are for.

    The operator reads each node's runtime from the node (containerRuntimeVersion) since
    v25.3; operator.defaultRuntime is no longer read and is not set. What stays one per
    cluster is the toolkit's containerd settings (toolkit.env) where the operator deploys the
    toolkit: k3s and RKE2 keep containerd elsewhere than a plain containerd does.
    """
    runtime = settings.get("container_runtime") or ""
    if runtime and runtime not in RUNTIME_FAMILY:
        problems.append(
            "gpu_operator_container_runtime: %s is not a container runtime the GPU Operator configures "
            "(expected %s, or '' to take it from the nodes' container_toolkit_runtime)"
            % (_q(runtime), _one_of(sorted(RUNTIME_FAMILY)))
        )
        runtime = ""
    for node in nodes:
        if node["host_toolkit"] and node["runtime"] == "none":
            problems.append(
                "gpu_operator: host %s: container_toolkit_runtime is 'none', but the operator's pods run "
                "with runtimeClassName nvidia, which needs the host's runtime to have an nvidia handler "
                "(expected containerd, crio, docker, k3s or rke2; or container_toolkit_enabled: false so "
                "the operator deploys the toolkit)" % _q(node["host"])
            )
    return runtime or _toolkit_runtime(nodes, problems)


def _toolkit_runtime(nodes, problems):
    """The runtime flavour whose containerd settings the operator's toolkit gets: that of the
    nodes where the operator deploys the toolkit (else of any node); flavours that need
    different settings there cannot share one release."""
    by_runtime = {}
    for node in nodes:
        if not node["host_toolkit"] and node["runtime"] in RUNTIME_FAMILY:
            by_runtime.setdefault(node["runtime"], []).append(node["host"])
    settings = set(r if r in RANCHER_CONTAINERD else "default" for r in by_runtime)
    if len(settings) > 1:
        problems.append(
            "gpu_operator: the nodes whose toolkit the operator deploys run container runtimes that keep containerd "
            "in different places (%s), and the toolkit's containerd settings (toolkit.env) are one per release "
            "(expected one of k3s, rke2 or the others for those nodes, the toolkit prepared on the host for the rest "
            "(container_toolkit_enabled: true), or gpu_operator_container_runtime set)"
            % "; ".join("%s: %s" % (r, ", ".join(by_runtime[r])) for r in sorted(by_runtime))
        )
    flavours = sorted(by_runtime) or sorted(set(n["runtime"] for n in nodes if n["runtime"] in RUNTIME_FAMILY))
    return flavours[0] if flavours else "containerd"


# --- GPU Operator: driver -----------------------------------------------------------------------
def _operator_driver(settings, enabled, problems):
    """The chart's ``driver`` values, and the switches of the modules the driver containers load
    (``{rdma_enabled, rdma_use_host_mofed, gds_enabled, gdrcopy_enabled}``)."""
    driver = {"enabled": enabled}
    precompiled = to_bool(settings.get("driver_use_precompiled", False), "gpu_operator_driver_use_precompiled", problems)
    version = _driver_version(settings.get("driver_version") or "", precompiled, problems)
    if version:
        driver["version"] = version
    if precompiled:
        driver["usePrecompiled"] = True
    extras = _driver_modules(settings, enabled, problems)
    if extras["rdma_enabled"]:
        driver["rdma"] = {"enabled": True, "useHostMofed": extras["rdma_use_host_mofed"]}
    policy = settings.get("driver_upgrade_policy") or {}
    if not isinstance(policy, dict):
        problems.append(
            "gpu_operator_driver_upgrade_policy: %s is not a mapping (expected chart keys such as "
            "autoUpgrade, maxParallelUpgrades, drain)" % _q(policy)
        )
    elif policy:
        driver["upgradePolicy"] = copy.deepcopy(policy)
    return driver, extras


def _driver_version(version, precompiled, problems):
    """``gpu_operator_driver_version`` as text, checked; '' for the chart's default."""
    if not version:
        return ""
    version = str(version)
    if not _DRIVER_VERSION.fullmatch(version):
        problems.append(
            "gpu_operator_driver_version: %s is not a driver version (expected a branch such as 580 or "
            "a release such as 580.95.05)" % _q(version)
        )
    elif precompiled and "." in version:
        problems.append(
            "gpu_operator_driver_version: %s is a release, but precompiled driver images are chosen by "
            "branch (gpu_operator_driver_use_precompiled is true; expected a branch such as %s)"
            % (_q(version), version.split(".", maxsplit=1)[0])
        )
    return version


def _driver_modules(settings, driver_enabled, problems):
    """GPUDirect RDMA, GDS and GDRCopy: modules only the operator's driver containers load."""
    extras = {}
    for key in ("rdma_enabled", "rdma_use_host_mofed", "gds_enabled", "gdrcopy_enabled"):
        extras[key] = to_bool(settings.get(key, False), "gpu_operator_" + key, problems)
    if extras["rdma_use_host_mofed"] and not extras["rdma_enabled"]:
        problems.append(
            "gpu_operator_rdma_use_host_mofed: true only applies to GPUDirect RDMA (gpu_operator_rdma_enabled "
            "is false; expected gpu_operator_rdma_enabled: true, or gpu_operator_rdma_use_host_mofed: false)"
        )
    for var in ("rdma_enabled", "gds_enabled", "gdrcopy_enabled"):
        if extras[var] and not driver_enabled:
            problems.append(
                "gpu_operator_%s: true needs the operator's driver containers, which load the kernel modules "
                "it adds, but every GPU node has a host driver (nvidia_driver_method package or preinstalled) "
                "(expected nvidia_driver_method: operator on the nodes that need it, or the module loaded on "
                "the hosts and gpu_operator_%s: false)" % (var, var)
            )
    return extras


# --- GPU Operator: toolkit ----------------------------------------------------------------------
def _operator_toolkit(settings, enabled, runtime, problems):
    """The chart's ``toolkit`` values: the containerd settings of a k3s or RKE2 fleet, then
    ``gpu_operator_toolkit_env`` (its own names sorted)."""
    toolkit = {"enabled": enabled}
    env = _rancher_env(runtime) if enabled else []
    extra_env = settings.get("toolkit_env") or {}
    if not isinstance(extra_env, dict):
        problems.append(
            "gpu_operator_toolkit_env: %s is not a mapping of variable names to values (expected e.g. "
            "{RUNTIME_DROP_IN_CONFIG: /etc/containerd/conf.d/99-nvidia.toml})" % _q(extra_env)
        )
        extra_env = {}
    env_dict = dict(env)
    order = [item[0] for item in env] + sorted(k for k in extra_env if k not in env_dict)
    for key, value in extra_env.items():
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            problems.append("gpu_operator_toolkit_env: %s is not an environment variable name" % _q(key))
        env_dict[key] = _env_value(value)
    if env_dict and enabled:
        toolkit["env"] = [{"name": k, "value": str(env_dict[k])} for k in order]
    return toolkit


def _rancher_env(runtime):
    """The toolkit's containerd settings for the containerd that k3s or RKE2 run (none for the others)."""
    if runtime not in RANCHER_CONTAINERD:
        return []
    base = RANCHER_CONTAINERD[runtime]
    return [
        ("CONTAINERD_CONFIG", base + "/config.toml"),
        ("CONTAINERD_SOCKET", RANCHER_CONTAINERD_SOCKET),
        ("RUNTIME_CONFIG_SOURCE", "file=" + base + "/config.toml"),
        ("RUNTIME_DROP_IN_CONFIG", base + "/config-v3.toml.d/99-nvidia.toml"),
    ]


def _env_value(value):
    """An environment value as text: strings as they are, booleans as true / false, the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value).lower()
    return json.dumps(value)


# --- GPU Operator: MIG --------------------------------------------------------------------------
def _operator_mig(settings, nodes, problems):
    """MIG: ``{strategy, values (migManager), objects (its ConfigMap), names (of the configs), notes}``."""
    strategy = settings.get("mig_strategy", "none")
    manager = to_bool(settings.get("mig_manager_enabled", True), "gpu_operator_mig_manager_enabled", problems)
    configs = settings.get("mig_configs") or {}
    default = settings.get("mig_default_config") or ""
    values = {"enabled": manager}
    if not isinstance(configs, dict):
        problems.append(
            "gpu_operator_mig_configs: %s is not a mapping of MIG config names to mig-parted device lists "
            "(expected a dict)" % _q(configs)
        )
        configs = {}
    names, objects = set(), []
    if configs:
        names = _check_mig_configs(configs, problems)
        objects, values["config"] = _mig_config_map(settings, configs, names, default, problems)
    elif default:
        values["config"] = {"default": default}
    notes = []
    for node in nodes:
        if node["mig_config"]:
            _check_node_mig(node, manager, names, strategy, configs, problems, notes)
    return {"strategy": strategy, "values": values, "objects": objects, "names": names, "notes": notes}


def _mig_config_map(settings, configs, names, default, problems):
    """The ConfigMap of the role's MIG configs (none when its name is wrong) and the chart's ``migManager.config``."""
    cm_name = settings.get("mig_config_map") or ""
    objects = []
    if _check_name(cm_name, "gpu_operator_mig_config_map", _DNS_SUBDOMAIN, "a ConfigMap name (expected lower-case alphanumerics, '-' and '.')", problems):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": cm_name,
                    "namespace": settings.get("namespace"),
                    "labels": {"app.kubernetes.io/managed-by": "gpufleet.nvidia"},
                },
                "data": {
                    "config.yaml": dump_yaml({"version": "v1", "mig-configs": configs}, sort_keys=True)
                },
            }
        )
    default = default or "all-disabled"
    if default not in names:
        problems.append(
            "gpu_operator_mig_default_config: %s is not one of the configs in gpu_operator_mig_configs "
            "(expected %s)" % (_q(default), _one_of(sorted(names)))
        )
    return objects, {"name": cm_name, "default": default}


def _check_node_mig(node, manager, names, strategy, configs, problems, notes):
    """A node's ``gpufleet_mig_config`` against the MIG settings and the node's GPUs."""
    where = "gpu_operator: host %s: gpufleet_mig_config %s" % (_q(node["host"]), _q(node["mig_config"]))
    if not manager:
        problems.append("%s needs the MIG manager (gpu_operator_mig_manager_enabled is false; expected true)" % where)
    if names and node["mig_config"] not in names:
        problems.append("%s is not one of the configs in gpu_operator_mig_configs (expected %s)" % (where, _one_of(sorted(names))))
    if node["mig_config"] != "all-disabled" and strategy == "none":
        problems.append(
            "%s partitions the GPUs, but gpu_operator_mig_strategy is 'none', which advertises no MIG "
            "devices (expected gpu_operator_mig_strategy single or mixed)" % where
        )
    _check_mig_fit(node, configs, problems, notes)


def _check_mig_fit(node, mig_configs, problems, notes):
    """The node's MIG config against the GPUs discovery found on it (see :mod:`ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.mig_fit`)."""
    name = node["mig_config"]
    entries = mig_fit.config_entries(name, mig_configs)
    gpus = node.get("gpus")
    if entries is None:
        return
    if gpus is None:
        notes.append("host %s: MIG config %s not checked against its GPUs: this run did not discover the node"
                     % (_q(node["host"]), _q(name)))
        return
    smi = gpus["smi"] or _pci_mig(gpus.get("pci"))
    if not smi:
        if any(isinstance(e, dict) and e.get("mig-enabled") for e in entries):
            notes.append("host %s: MIG config %s not checked against its GPUs: nvidia-smi did not answer there, and "
                         "their PCI device ids are not in the collection's table" % (_q(node["host"]), _q(name)))
        return
    for problem in mig_fit.fit(name, entries, smi):
        problems.append("gpu_operator: host %s: gpufleet_mig_config: %s (expected a config whose profiles the "
                        "node's GPUs have, or no gpufleet_mig_config)" % (_q(node["host"]), problem))


def _pci_mig(pci):
    """The GPUs as the PCI bus names them, where nvidia-smi did not answer: whether each can do MIG
    from its device id (no memory size, so no profile is sized); None when one is unknown."""
    if not pci or any(g.get("mig_capable") is None for g in pci):
        return None
    return [{"name": g.get("name"), "mig_capable": g["mig_capable"], "memory_total_mib": None,
             "mig_why": "its PCI device id %s is not a MIG chip (discovery read it; nvidia-smi did not answer)" % g.get("device_id")}
            for g in pci]


def _check_mig_configs(configs, problems):
    names = set()
    for name in sorted(configs, key=str):
        where = "gpu_operator_mig_configs.%s" % name
        if not isinstance(name, str) or not name or len(name) > 63 or not _LABEL_VALUE.fullmatch(name):
            problems.append("gpu_operator_mig_configs: %s is not a config name (expected a label value)" % _q(name))
            continue
        names.add(name)
        entries = configs[name]
        if isinstance(entries, str) or not isinstance(entries, (list, tuple)) or not entries:
            problems.append(
                "%s: %s is not a list of mig-parted device entries (expected e.g. [{devices: all, "
                "mig-enabled: true, mig-devices: {1g.10gb: 7}}])" % (where, _q(entries))
            )
            continue
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict) or "devices" not in entry or "mig-enabled" not in entry:
                problems.append(
                    "%s[%d]: %s is not a mig-parted device entry (expected a dict with devices and mig-enabled)"
                    % (where, index, _q(entry))
                )
            elif entry.get("mig-enabled") is True and not isinstance(entry.get("mig-devices"), dict):
                problems.append(
                    "%s[%d]: mig-enabled is true but mig-devices is %s (expected a mapping of MIG profiles to "
                    "counts, e.g. {1g.10gb: 7})" % (where, index, _q(entry.get("mig-devices")))
                )
    return names


# --- GPU Operator: sharing, images, the values --------------------------------------------------
def _operator_sharing(settings, nodes, mig_strategy, problems):
    """The device plugin's configs as the operator deploys them: ``{default, data, config_map}``."""
    default = settings.get("sharing_default") or "default"
    data = plugin_configs(settings.get("sharing_configs"), default, mig_strategy, "gpu_operator", problems)
    _check_node_sharing(nodes, data, "gpu_operator", problems)
    cm_name = settings.get("sharing_config_map") or ""
    _check_name(cm_name, "gpu_operator_sharing_config_map", _DNS_SUBDOMAIN, "a ConfigMap name (expected lower-case alphanumerics, '-' and '.')", problems)
    return {"default": default, "data": data, "config_map": cm_name}


def _operator_cdi(settings, problems):
    """``cdi``: CDI on (the chart's default since v25.10), and the NRI plugin only when asked (a
    value releases before 26.3 do not have; operator_releases checks the release and the nodes)."""
    cdi = {"enabled": to_bool(settings.get("cdi_enabled", True), "gpu_operator_cdi_enabled", problems)}
    if to_bool(settings.get("cdi_nri_plugin_enabled", False), "gpu_operator_cdi_nri_plugin_enabled", problems):
        cdi["nriPluginEnabled"] = True
    return cdi


def _check_cdi_agreement(nodes, cdi, problems, notes):
    """With cdi.enabled, the operator's device plugin names the GPUs as CDI devices (its
    cdi-annotations and cdi-cri strategies): on a node whose toolkit comes from the host, the
    runtime must hand them over. containerd 2.x has CDI on by default and CRI-O always; containerd
    1.x only with enable_cdi (container_toolkit_enable_cdi), unless nvidia is its default runtime."""
    if cdi.get("enabled") is not True:
        return
    unread = []
    for node in nodes:
        if not node["host_toolkit"] or node["runtime"] != "containerd" or node["cdi_ready"] == "default_runtime":
            continue
        found = version_tuple(node.get("runtime_version"))
        if found is None:
            unread.append(node["host"])
        elif found < (1, 7, 0):
            problems.append(
                "gpu_operator: host %s: containerd %s has no CDI in its CRI plugin (it ignores enable_cdi; 1.7 and later have "
                "it), and its toolkit is the host's: the operator (cdi.enabled) hands GPUs over as CDI devices, which that "
                "runtime would drop (expected container_toolkit_set_as_default: true on the node, so that the NVIDIA runtime "
                "reads them itself, containerd 1.7 or later, or gpu_operator_cdi_enabled: false)"
                % (_q(node["host"]), node["runtime_version"]))
        elif found < (2, 0, 0) and not node["cdi_ready"]:
            problems.append(
                "gpu_operator: host %s: containerd %s has CDI off unless enable_cdi is set, and its toolkit is the host's "
                "with container_toolkit_enable_cdi false: the operator (cdi.enabled) hands GPUs over as CDI devices, which "
                "that runtime would drop (expected container_toolkit_enable_cdi: true on the node, or gpu_operator_cdi_enabled: "
                "false)" % (_q(node["host"]), node["runtime_version"]))
    if unread:
        notes.append("CDI in containerd not checked on %s (%s): this run did not read their containerd version (containerd "
                     "before 2.0 needs container_toolkit_enable_cdi: true for the operator's CDI devices)"
                     % (plural(len(unread), "node"), ", ".join(unread)))


def _operator_device_plugin(sharing, volume_mounts):
    """``devicePlugin``: the sharing configs, and where the operator does not hand GPUs over by
    CDI and some nodes have their toolkit from the host (which isolates unprivileged containers
    by default: NVIDIA_VISIBLE_DEVICES is ignored in them), the volume-mounts strategy too. With
    CDI on, the operator sets its plugin's strategy to CDI itself."""
    plugin = {"config": {"create": True, "name": sharing["config_map"], "default": sharing["default"], "data": sharing["data"]}}
    if volume_mounts:
        plugin["env"] = [{"name": "DEVICE_LIST_STRATEGY", "value": "envvar,volume-mounts"}]
    return plugin


def _operator_values(settings, driver, toolkit, mig, sharing, extras, problems):
    """The gpu-operator chart's values: the derived ones, the images, then the overrides."""
    cdi = _operator_cdi(settings, problems)
    registry = _image_registry(settings, "gpu_operator", problems)
    repositories = _image_repositories(settings, problems)
    secrets = _pull_secrets(settings, "gpu_operator", problems)
    values = {
        "driver": driver,
        "toolkit": toolkit,
        "cdi": cdi,
        "dcgmExporter": {"enabled": to_bool(settings.get("dcgm_exporter_enabled", True), "gpu_operator_dcgm_exporter_enabled", problems)},
        "mig": {"strategy": mig["strategy"]},
        "migManager": mig["values"],
        "devicePlugin": _operator_device_plugin(sharing, extras["host_toolkit"] and not cdi["enabled"]),
        "gds": {"enabled": extras["gds_enabled"]},
        "gdrcopy": {"enabled": extras["gdrcopy_enabled"]},
        # The role applies the chart's CRDs before every install and upgrade (NVIDIA's first
        # documented way); the chart's own pre-upgrade hook (its second) is not needed then.
        "operator": {"upgradeCRD": False},
    }
    _set_images(values, registry, repositories, secrets)
    overrides = _check_overrides(settings.get("values_overrides") or {}, "gpu_operator_values_overrides", GPU_OPERATOR_DERIVED_VALUES, problems)
    return deep_merge(values, overrides)


def _image_repositories(settings, problems):
    """``gpu_operator_image_repositories``: a repository per chart component, checked."""
    components = GPU_OPERATOR_IMAGE_COMPONENTS + (NFD_IMAGE,)
    repositories = settings.get("image_repositories") or {}
    if not isinstance(repositories, dict):
        problems.append(
            "gpu_operator_image_repositories: %s is not a mapping of components to repositories (expected "
            "keys %s)" % (_q(repositories), _one_of(components))
        )
        return {}
    for key in sorted(repositories, key=str):
        if key not in components:
            problems.append(
                "gpu_operator_image_repositories: %s is not a chart component (expected %s)" % (_q(key), _one_of(components))
            )
    return repositories


def _set_images(values, registry, repositories, secrets):
    """Each component's image repository (its own, else the registry's) and the pull secrets."""
    for component in GPU_OPERATOR_IMAGE_COMPONENTS:
        repo = repositories.get(component) or registry
        if repo:
            _set_path(values, component + ".repository", repo)
    nfd_repo = repositories.get(NFD_IMAGE) or (registry + "/" + NFD_IMAGE if registry else "")
    if nfd_repo:
        values["node-feature-discovery"] = {"image": {"repository": nfd_repo}}
    if secrets:
        for component in GPU_OPERATOR_PULL_SECRET_COMPONENTS:
            _set_path(values, component + ".imagePullSecrets", list(secrets))


# --- GPU Operator: node labels and summary ------------------------------------------------------
def _operator_node_labels(deploys, node):
    """The labels a node gets: the operator's driver / toolkit kept off a prepared node, its configs."""
    labels = {}
    if deploys["driver"] and node["host_driver"]:
        labels[LABEL_DEPLOY_DRIVER] = "false"
    if deploys["toolkit"] and node["host_toolkit"]:
        labels[LABEL_DEPLOY_TOOLKIT] = "false"
    if node["sharing_config"]:
        labels[LABEL_PLUGIN_CONFIG] = node["sharing_config"]
    if node["mig_config"]:
        labels[LABEL_MIG_CONFIG] = node["mig_config"]
    return labels


def _who_deploys(nodes, prepared, deployed):
    """``operator`` (no node prepared on the host), ``host`` (the operator deploys it nowhere) or ``mixed``."""
    if not any(n[prepared] for n in nodes):
        return "operator"
    return "host" if not deployed else "mixed"


def _operator_summary(nodes, deploys, runtime, data, mig, release):
    return {
        "release": None if release is None else dict((k, release.get(k)) for k in ("version", "line", "support", "source") if k in release),
        "driver": _who_deploys(nodes, "host_driver", deploys["driver"]),
        "toolkit": _who_deploys(nodes, "host_toolkit", deploys["toolkit"]),
        "container_runtime": runtime,
        "nodes": [n["name"] for n in nodes],
        "host_driver_nodes": [n["name"] for n in nodes if n["host_driver"]],
        "host_toolkit_nodes": [n["name"] for n in nodes if n["host_toolkit"]],
        "sharing_configs": sorted(data),
        "mig_strategy": mig["strategy"],
        "notes": mig["notes"],
    }


# --- The standalone device plugin ---------------------------------------------------------------
def device_plugin_plan(fleet, settings):
    """Values for NVIDIA's nvidia-device-plugin chart, the ``nvidia`` RuntimeClass and labels.

    The standalone path needs every GPU node prepared on the host (driver and toolkit with a
    runtime that has an ``nvidia`` handler); a node left to the GPU Operator is a problem.
    """
    p = "device_plugin"
    s = plain(settings or {})
    nodes, problems = _fleet(fleet, p, s.get("node_group"))
    pod_security = _common(s, p, problems)
    chart = _chart(s, p, "nvidia-device-plugin", problems)
    for node in nodes:
        _check_host_prepared(node, problems)
    rc_name = s.get("runtime_class_name") or ""
    objects = [namespace_object(s.get("namespace"), pod_security)] + _runtime_class(s, rc_name, problems)
    mig_strategy = s.get("mig_strategy", "none")
    default = s.get("sharing_default") or "default"
    flags = {"failOnInitError": to_bool(s.get("fail_on_init_error", True), "device_plugin_fail_on_init_error", problems),
             "plugin": {"deviceListStrategy": _device_list_strategy(s.get("device_list_strategy", DEVICE_LIST_DEFAULT), problems)}}
    data = plugin_configs(s.get("sharing_configs"), default, mig_strategy, p, problems, extra_flags=flags)
    _check_node_sharing(nodes, data, p, problems)
    values = _device_plugin_values(s, data, default, rc_name, problems)
    summary = {
        "nodes": [n["name"] for n in nodes],
        "runtime_class": rc_name or "(default runtime)",
        "sharing_configs": sorted(data),
        "mig_strategy": mig_strategy,
    }
    return _result(
        problems,
        chart=chart,
        chart_values=values,
        objects=objects,
        node_labels=_label_plan(nodes, _device_plugin_node_labels, {LABEL_PLUGIN_CONFIG: list(data)}),
        summary=summary,
        held=_held_back(nodes),
    )


def _device_list_strategy(value, problems):
    """The plugin's device list strategies, checked: a non-empty list of distinct known names."""
    var = "device_plugin_device_list_strategy"
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        problems.append("%s: %s is not a list of strategies (expected e.g. %s)" % (var, _q(value), list(DEVICE_LIST_DEFAULT)))
        return list(DEVICE_LIST_DEFAULT)
    for item in value:
        if item not in DEVICE_LIST_STRATEGIES:
            problems.append("%s: %s is not a device list strategy (expected %s)" % (var, _q(item), _one_of(DEVICE_LIST_STRATEGIES)))
    if len(set(map(str, value))) != len(value):
        problems.append("%s: %s names a strategy twice (expected each once)" % (var, _q(value)))
    return list(value)


def _check_host_prepared(node, problems):
    """The standalone device plugin needs the node's driver and toolkit on the host."""
    where = "device_plugin: host %s" % _q(node["host"])
    if not node["host_driver"]:
        problems.append(
            "%s: nvidia_driver_method is %s, but the standalone device plugin needs the driver on the host "
            "(expected package or preinstalled; or the gpufleet.nvidia.gpu_operator role for this fleet)"
            % (where, _q(node["driver_method"]))
        )
    if not node["host_toolkit"]:
        problems.append(
            "%s: container_toolkit_enabled is false, but the standalone device plugin needs the NVIDIA "
            "Container Toolkit on the host (expected true; or the gpufleet.nvidia.gpu_operator role)" % where
        )
    elif node["runtime"] == "none":
        problems.append(
            "%s: container_toolkit_runtime is 'none', so no runtime has an nvidia handler for the "
            "device plugin's pods (expected containerd, crio, docker, k3s or rke2)" % where
        )


def _runtime_class(settings, rc_name, problems):
    """The RuntimeClass the plugin's pods run with, as a list of none or one object."""
    if not rc_name:
        return []
    ok = _check_name(
        rc_name, "device_plugin_runtime_class_name", _DNS_SUBDOMAIN,
        "a RuntimeClass name (expected lower-case alphanumerics, '-' and '.', or '' to use the default runtime)", problems,
    )
    rc_handler = settings.get("runtime_class_handler") or ""
    ok = _check_name(
        rc_handler, "device_plugin_runtime_class_handler", _DNS_LABEL,
        "a runtime handler (expected a DNS label such as nvidia)", problems,
    ) and ok
    if not ok:
        return []
    return [{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": rc_name}, "handler": rc_handler}]


def _device_plugin_values(settings, data, default, rc_name, problems):
    """The nvidia-device-plugin chart's values: configs, GFD, runtime class, images, then the overrides."""
    gfd = to_bool(settings.get("gfd_enabled", True), "device_plugin_gfd_enabled", problems)
    # The chart's node-feature-discovery subchart (alias nfd, condition nfd.enabled,gfd.enabled):
    # GFD's labels need NFD's master; off where the cluster runs its own NFD.
    nfd = to_bool(settings.get("nfd_enabled", True), "device_plugin_nfd_enabled", problems) and gfd
    values = {"config": {"map": data, "default": default}, "gfd": {"enabled": gfd}, "nfd": {"enabled": nfd}}
    if rc_name:
        values["runtimeClassName"] = rc_name
    registry = _image_registry(settings, "device_plugin", problems)
    repository = settings.get("image_repository") or (registry + "/k8s-device-plugin" if registry else "")
    if repository:
        values["image"] = {"repository": repository}
    if registry and nfd:
        values["nfd"]["image"] = {"repository": registry + "/" + NFD_IMAGE}
    secrets = _pull_secrets(settings, "device_plugin", problems)
    if secrets:
        values["imagePullSecrets"] = [{"name": n} for n in secrets]
    overrides = _check_overrides(settings.get("values_overrides") or {}, "device_plugin_values_overrides", DEVICE_PLUGIN_DERIVED_VALUES, problems)
    return deep_merge(values, overrides)


def _device_plugin_node_labels(node):
    labels = {LABEL_GPU_PRESENT: "true"}
    if node["sharing_config"]:
        labels[LABEL_PLUGIN_CONFIG] = node["sharing_config"]
    return labels
