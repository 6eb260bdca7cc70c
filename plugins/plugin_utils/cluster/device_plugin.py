# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The standalone device plugin's release, built from the inventory: values, RuntimeClass, labels.

The code of the ``device_plugin_plan`` filter: NVIDIA's nvidia-device-plugin chart for a fleet
whose every GPU node has its driver and toolkit on the host.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import deep_merge
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import release
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.checks import (
    DNS_LABEL, DNS_SUBDOMAIN, Settings, check_name, one_of, quoted,
)
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.fleet import held_back, nodes_of
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.node_labels import LABEL_GPU_PRESENT, LABEL_PLUGIN_CONFIG, label_plan
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.sharing import check_node_sharing, plugin_configs

# How the device plugin hands a pod its GPUs (k8s-device-plugin's --device-list-strategy).
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEVICE_LIST_DEFAULT = ("envvar", "volume-mounts")
# Values the role derives itself; an override there would undo the derivation silently.
DERIVED_VALUES = ("config", "migStrategy")


def device_plugin_plan(fleet, settings):
    """Values for NVIDIA's nvidia-device-plugin chart, the ``nvidia`` RuntimeClass and labels.

    The standalone path needs every GPU node prepared on the host (driver and toolkit with a
    runtime that has an ``nvidia`` handler); a node left to the GPU Operator is a problem.
    """
    s = Settings(settings, "device_plugin")
    nodes = nodes_of(fleet, s)
    pod_security = release.common(s)
    chart = release.chart(s, "nvidia-device-plugin", "0.20.0")
    for node in nodes:
        _check_host_prepared(node, s.problems)
    rc_name = s.get("runtime_class_name") or ""
    objects = [release.namespace_object(s.get("namespace"), pod_security)] + _runtime_class(s, rc_name)
    mig_strategy = s.get("mig_strategy", "none")
    default = s.get("sharing_default") or "default"
    flags = {"failOnInitError": s.flag("fail_on_init_error", True),
             "plugin": {"deviceListStrategy": _device_list_strategy(s.get("device_list_strategy", DEVICE_LIST_DEFAULT), s.problems)}}
    data = plugin_configs(s, default, mig_strategy, extra_flags=flags)
    check_node_sharing(s, nodes, data)
    values = _values(s, data, default, rc_name)
    summary = {
        "nodes": [n["name"] for n in nodes],
        "runtime_class": rc_name or "(default runtime)",
        "sharing_configs": sorted(data),
        "mig_strategy": mig_strategy,
    }
    return release.result(
        s.problems,
        chart=chart,
        chart_values=values,
        objects=objects,
        node_labels=label_plan(nodes, _node_labels, {LABEL_PLUGIN_CONFIG: list(data)}),
        summary=summary,
        held=held_back(nodes),
    )


def _device_list_strategy(value, problems):
    """The plugin's device list strategies, checked: a non-empty list of distinct known names."""
    var = "device_plugin_device_list_strategy"
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        problems.append("%s: %s is not a list of strategies (expected e.g. %s)" % (var, quoted(value), list(DEVICE_LIST_DEFAULT)))
        return list(DEVICE_LIST_DEFAULT)
    for item in value:
        if item not in DEVICE_LIST_STRATEGIES:
            problems.append("%s: %s is not a device list strategy (expected %s)" % (var, quoted(item), one_of(DEVICE_LIST_STRATEGIES)))
    if len(set(map(str, value))) != len(value):
        problems.append("%s: %s names a strategy twice (expected each once)" % (var, quoted(value)))
    return list(value)


def _check_host_prepared(node, problems):
    """The standalone device plugin needs the node's driver and toolkit on the host."""
    where = "device_plugin: host %s" % quoted(node["host"])
    if not node["host_driver"]:
        problems.append(
            "%s: nvidia_driver_method is %s, but the standalone device plugin needs the driver on the host "
            "(expected package or preinstalled; or the gpufleet.nvidia.gpu_operator role for this fleet)"
            % (where, quoted(node["driver_method"]))
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


def _runtime_class(s, rc_name):
    """The RuntimeClass the plugin's pods run with, as a list of none or one object."""
    if not rc_name:
        return []
    ok = check_name(
        rc_name, "device_plugin_runtime_class_name", DNS_SUBDOMAIN,
        "a RuntimeClass name (expected lower-case alphanumerics, '-' and '.', or '' to use the default runtime)", s.problems,
    )
    rc_handler = s.get("runtime_class_handler") or ""
    ok = check_name(
        rc_handler, "device_plugin_runtime_class_handler", DNS_LABEL,
        "a runtime handler (expected a DNS label such as nvidia)", s.problems,
    ) and ok
    if not ok:
        return []
    return [{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": rc_name}, "handler": rc_handler}]


def _values(s, data, default, rc_name):
    """The nvidia-device-plugin chart's values: configs, GFD, runtime class, images, then the overrides."""
    gfd = s.flag("gfd_enabled", True)
    # The chart's node-feature-discovery subchart (alias nfd, condition nfd.enabled,gfd.enabled):
    # GFD's labels need NFD's master; off where the cluster runs its own NFD.
    nfd = s.flag("nfd_enabled", True) and gfd
    values = {"config": {"map": data, "default": default}, "gfd": {"enabled": gfd}, "nfd": {"enabled": nfd}}
    if rc_name:
        values["runtimeClassName"] = rc_name
    registry = release.image_registry(s)
    release.set_image(values, registry, "k8s-device-plugin", s.get("image_repository"), release.pull_secrets(s))
    if registry and nfd:
        values["nfd"]["image"] = {"repository": registry + "/" + release.NFD_IMAGE}
    return deep_merge(values, release.overrides(s, DERIVED_VALUES))


def _node_labels(node):
    labels = {LABEL_GPU_PRESENT: "true"}
    if node["sharing_config"]:
        labels[LABEL_PLUGIN_CONFIG] = node["sharing_config"]
    return labels
