# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU Operator's release, built from the inventory: chart values, objects, node labels.

The code of the ``gpu_operator_plan`` filter. ``driver.enabled`` / ``toolkit.enabled`` follow from
how the nodes were prepared; the runtime, the driver containers' modules, the toolkit's containerd
settings, MIG (:mod:`cluster.mig_manager`), sharing (:mod:`cluster.sharing`) and the images are each
a step that reads the role's settings and records its problems (:class:`cluster.checks.Settings`).
"""

from __future__ import annotations

import copy
import functools
import json
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import deep_merge, plural
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.versions import version_tuple
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import operator_releases, release
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.checks import (
    DNS_SUBDOMAIN, Settings, check_name, one_of, quoted,
)
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.fleet import held_back, nodes_of
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.mig_manager import mig_plan
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.node_labels import (
    LABEL_DEPLOY_DRIVER, LABEL_DEPLOY_TOOLKIT, LABEL_MIG_CONFIG, LABEL_PLUGIN_CONFIG, label_plan,
)
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.sharing import check_node_sharing, plugin_configs

# The runtime each flavour is to the GPU Operator.
RUNTIME_FAMILY = {
    "containerd": "containerd",
    "k3s": "containerd",
    "rke2": "containerd",
    "crio": "crio",
    "docker": "docker",
}
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
IMAGE_COMPONENTS = (
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
PULL_SECRET_COMPONENTS = tuple(c for c in IMAGE_COMPONENTS if c != "driver.manager")
# Values the role derives itself; an override there would undo the derivation silently.
DERIVED_VALUES = (
    "driver.enabled",
    "toolkit.enabled",
    "mig.strategy",
    "devicePlugin.config",
)
_DRIVER_VERSION = re.compile(r"^[0-9]{3}(\.[0-9]{1,3}){0,2}$")


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
    s = Settings(settings, "gpu_operator")
    nodes = nodes_of(fleet, s)
    pod_security = release.common(s)
    chart = release.chart(s, "gpu-operator", operator_releases.DEFAULT)
    chart["values_crd"] = operator_releases.VALUES_CRD
    if chart.get("version"):
        chart["lines"] = operator_releases.chart_lines()
    deploys = {"driver": any(not n["host_driver"] for n in nodes), "toolkit": any(not n["host_toolkit"] for n in nodes)}
    runtime = _runtime(s, nodes)
    driver, extras = _driver(s, deploys["driver"])
    toolkit = _toolkit(s, deploys["toolkit"], runtime)
    mig = mig_plan(s, nodes)
    sharing = _sharing(s, nodes, mig["strategy"])
    extras["host_toolkit"] = any(n["host_toolkit"] for n in nodes)
    values = _values(s, driver, toolkit, mig, sharing, extras)
    planned = operator_releases.plan_release(s, [n for n in nodes if not n["host_toolkit"]], values)
    _check_cdi_agreement(nodes, values.get("cdi") or {}, s.problems, mig["notes"])
    removable = {LABEL_DEPLOY_DRIVER: ["false"], LABEL_DEPLOY_TOOLKIT: ["false"], LABEL_PLUGIN_CONFIG: list(sharing["data"]),
                 LABEL_MIG_CONFIG: sorted(mig["names"])}
    return release.result(
        s.problems,
        chart=chart,
        chart_values=values,
        objects=[release.namespace_object(s.get("namespace"), pod_security)] + mig["objects"],
        node_labels=label_plan(nodes, functools.partial(_node_labels, deploys), removable),
        summary=_summary(nodes, deploys, runtime, sharing["data"], mig, planned),
        warnings=(planned or {}).get("warnings") or [],
        driver_sides=[{"host": n["host"], "name": n["name"], "host_driver": n["host_driver"],
                       "operator_driver": n["operator_driver"]} for n in nodes],
        held=held_back(nodes),
    )


def _runtime(s, nodes):
    """The runtime flavour the toolkit's containerd settings are for.

    The operator reads each node's runtime from the node (containerRuntimeVersion) since
    v25.3; operator.defaultRuntime is no longer read and is not set. What stays one per
    cluster is the toolkit's containerd settings (toolkit.env) where the operator deploys the
    toolkit: k3s and RKE2 keep containerd elsewhere than a plain containerd does.
    """
    runtime = s.get("container_runtime") or ""
    if runtime and runtime not in RUNTIME_FAMILY:
        s.problems.append(
            "gpu_operator_container_runtime: %s is not a container runtime the GPU Operator configures "
            "(expected %s, or '' to take it from the nodes' container_toolkit_runtime)"
            % (quoted(runtime), one_of(sorted(RUNTIME_FAMILY)))
        )
        runtime = ""
    for node in nodes:
        if node["host_toolkit"] and node["runtime"] == "none":
            s.problems.append(
                "gpu_operator: host %s: container_toolkit_runtime is 'none', but the operator's pods run "
                "with runtimeClassName nvidia, which needs the host's runtime to have an nvidia handler "
                "(expected containerd, crio, docker, k3s or rke2; or container_toolkit_enabled: false so "
                "the operator deploys the toolkit)" % quoted(node["host"])
            )
    return runtime or _toolkit_runtime(nodes, s.problems)


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


def _driver(s, enabled):
    """The chart's ``driver`` values, and the switches of the modules the driver containers load
    (``{rdma_enabled, rdma_use_host_mofed, gds_enabled, gdrcopy_enabled}``)."""
    driver = {"enabled": enabled}
    precompiled = s.flag("driver_use_precompiled", False)
    version = _driver_version(s.get("driver_version") or "", precompiled, s.problems)
    if version:
        driver["version"] = version
    if precompiled:
        driver["usePrecompiled"] = True
    extras = _driver_modules(s, enabled)
    if extras["rdma_enabled"]:
        driver["rdma"] = {"enabled": True, "useHostMofed": extras["rdma_use_host_mofed"]}
    policy = s.get("driver_upgrade_policy") or {}
    if not isinstance(policy, dict):
        s.problems.append(
            "gpu_operator_driver_upgrade_policy: %s is not a mapping (expected chart keys such as "
            "autoUpgrade, maxParallelUpgrades, drain)" % quoted(policy)
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
            "a release such as 580.95.05)" % quoted(version)
        )
    elif precompiled and "." in version:
        problems.append(
            "gpu_operator_driver_version: %s is a release, but precompiled driver images are chosen by "
            "branch (gpu_operator_driver_use_precompiled is true; expected a branch such as %s)"
            % (quoted(version), version.split(".", maxsplit=1)[0])
        )
    return version


def _driver_modules(s, driver_enabled):
    """GPUDirect RDMA, GDS and GDRCopy: modules only the operator's driver containers load."""
    extras = dict((key, s.flag(key, False)) for key in ("rdma_enabled", "rdma_use_host_mofed", "gds_enabled", "gdrcopy_enabled"))
    if extras["rdma_use_host_mofed"] and not extras["rdma_enabled"]:
        s.problems.append(
            "gpu_operator_rdma_use_host_mofed: true only applies to GPUDirect RDMA (gpu_operator_rdma_enabled "
            "is false; expected gpu_operator_rdma_enabled: true, or gpu_operator_rdma_use_host_mofed: false)"
        )
    for var in ("rdma_enabled", "gds_enabled", "gdrcopy_enabled"):
        if extras[var] and not driver_enabled:
            s.problems.append(
                "gpu_operator_%s: true needs the operator's driver containers, which load the kernel modules "
                "it adds, but every GPU node has a host driver (nvidia_driver_method package or preinstalled) "
                "(expected nvidia_driver_method: operator on the nodes that need it, or the module loaded on "
                "the hosts and gpu_operator_%s: false)" % (var, var)
            )
    return extras


def _toolkit(s, enabled, runtime):
    """The chart's ``toolkit`` values: the containerd settings of a k3s or RKE2 fleet, then
    ``gpu_operator_toolkit_env`` (its own names sorted)."""
    toolkit = {"enabled": enabled}
    env = _rancher_env(runtime) if enabled else []
    extra_env = s.get("toolkit_env") or {}
    if not isinstance(extra_env, dict):
        s.problems.append(
            "gpu_operator_toolkit_env: %s is not a mapping of variable names to values (expected e.g. "
            "{RUNTIME_DROP_IN_CONFIG: /etc/containerd/conf.d/99-nvidia.toml})" % quoted(extra_env)
        )
        extra_env = {}
    env_dict = dict(env)
    order = [item[0] for item in env] + sorted(k for k in extra_env if k not in env_dict)
    for key, value in extra_env.items():
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            s.problems.append("gpu_operator_toolkit_env: %s is not an environment variable name" % quoted(key))
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


def _sharing(s, nodes, mig_strategy):
    """The device plugin's configs as the operator deploys them: ``{default, data, config_map}``."""
    default = s.get("sharing_default") or "default"
    data = plugin_configs(s, default, mig_strategy)
    check_node_sharing(s, nodes, data)
    cm_name = s.get("sharing_config_map") or ""
    check_name(cm_name, "gpu_operator_sharing_config_map", DNS_SUBDOMAIN, "a ConfigMap name (expected lower-case alphanumerics, '-' and '.')",
               s.problems)
    return {"default": default, "data": data, "config_map": cm_name}


def _cdi(s):
    """``cdi``: CDI on (the chart's default since v25.10), and the NRI plugin only when asked (a
    value releases before 26.3 do not have; operator_releases checks the release and the nodes)."""
    cdi = {"enabled": s.flag("cdi_enabled", True)}
    if s.flag("cdi_nri_plugin_enabled", False):
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
                % (quoted(node["host"]), node["runtime_version"]))
        elif found < (2, 0, 0) and not node["cdi_ready"]:
            problems.append(
                "gpu_operator: host %s: containerd %s has CDI off unless enable_cdi is set, and its toolkit is the host's "
                "with container_toolkit_enable_cdi false: the operator (cdi.enabled) hands GPUs over as CDI devices, which "
                "that runtime would drop (expected container_toolkit_enable_cdi: true on the node, or gpu_operator_cdi_enabled: "
                "false)" % (quoted(node["host"]), node["runtime_version"]))
    if unread:
        notes.append("CDI in containerd not checked on %s (%s): this run did not read their containerd version (containerd "
                     "before 2.0 needs container_toolkit_enable_cdi: true for the operator's CDI devices)"
                     % (plural(len(unread), "node"), ", ".join(unread)))


def _device_plugin(sharing, volume_mounts):
    """``devicePlugin``: the sharing configs, and where the operator does not hand GPUs over by
    CDI and some nodes have their toolkit from the host (which isolates unprivileged containers
    by default: NVIDIA_VISIBLE_DEVICES is ignored in them), the volume-mounts strategy too. With
    CDI on, the operator sets its plugin's strategy to CDI itself."""
    plugin = {"config": {"create": True, "name": sharing["config_map"], "default": sharing["default"], "data": sharing["data"]}}
    if volume_mounts:
        plugin["env"] = [{"name": "DEVICE_LIST_STRATEGY", "value": "envvar,volume-mounts"}]
    return plugin


def _values(s, driver, toolkit, mig, sharing, extras):
    """The gpu-operator chart's values: the derived ones, the images, then the overrides."""
    cdi = _cdi(s)
    registry = release.image_registry(s)
    repositories = _image_repositories(s)
    secrets = release.pull_secrets(s)
    values = {
        "driver": driver,
        "toolkit": toolkit,
        "cdi": cdi,
        "dcgmExporter": {"enabled": s.flag("dcgm_exporter_enabled", True)},
        "mig": {"strategy": mig["strategy"]},
        "migManager": mig["values"],
        "devicePlugin": _device_plugin(sharing, extras["host_toolkit"] and not cdi["enabled"]),
        "gds": {"enabled": extras["gds_enabled"]},
        "gdrcopy": {"enabled": extras["gdrcopy_enabled"]},
        # The role applies the chart's CRDs before every install and upgrade (NVIDIA's first
        # documented way); the chart's own pre-upgrade hook (its second) is not needed then.
        "operator": {"upgradeCRD": False},
    }
    _set_images(values, registry, repositories, secrets)
    return deep_merge(values, release.overrides(s, DERIVED_VALUES))


def _image_repositories(s):
    """``gpu_operator_image_repositories``: a repository per chart component, checked."""
    components = IMAGE_COMPONENTS + (release.NFD_IMAGE,)
    repositories = s.get("image_repositories") or {}
    if not isinstance(repositories, dict):
        s.problems.append(
            "gpu_operator_image_repositories: %s is not a mapping of components to repositories (expected "
            "keys %s)" % (quoted(repositories), one_of(components))
        )
        return {}
    for key in sorted(repositories, key=str):
        if key not in components:
            s.problems.append(
                "gpu_operator_image_repositories: %s is not a chart component (expected %s)" % (quoted(key), one_of(components))
            )
    return repositories


def _set_images(values, registry, repositories, secrets):
    """Each component's image repository (its own, else the registry's) and the pull secrets."""
    for component in IMAGE_COMPONENTS:
        repo = repositories.get(component) or registry
        if repo:
            release.set_path(values, component + ".repository", repo)
    nfd_repo = repositories.get(release.NFD_IMAGE) or (registry + "/" + release.NFD_IMAGE if registry else "")
    if nfd_repo:
        values["node-feature-discovery"] = {"image": {"repository": nfd_repo}}
    if secrets:
        for component in PULL_SECRET_COMPONENTS:
            release.set_path(values, component + ".imagePullSecrets", list(secrets))


def _node_labels(deploys, node):
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


def _summary(nodes, deploys, runtime, data, mig, planned):
    return {
        "release": None if planned is None else dict((k, planned.get(k)) for k in ("version", "line", "support", "source") if k in planned),
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
