# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU Operator's MIG manager: the site's mig-parted configs, their ConfigMap, each node's config.

A node picks a config with ``gpufleet_mig_config`` (the label ``nvidia.com/mig.config``); the
config is checked against the role's configs and strategy, and against the GPUs discovery found
on the node (:mod:`cluster.mig_fit`).
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import mig_fit
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.checks import DNS_SUBDOMAIN, LABEL_VALUE, check_name, one_of, quoted
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.release import dump_yaml


def mig_plan(s, nodes):
    """MIG: ``{strategy, values (migManager), objects (its ConfigMap), names (of the configs), notes}``."""
    strategy = s.get("mig_strategy", "none")
    manager = s.flag("mig_manager_enabled", True)
    configs = s.get("mig_configs") or {}
    default = s.get("mig_default_config") or ""
    values = {"enabled": manager}
    if not isinstance(configs, dict):
        s.problems.append(
            "gpu_operator_mig_configs: %s is not a mapping of MIG config names to mig-parted device lists "
            "(expected a dict)" % quoted(configs)
        )
        configs = {}
    names, objects = set(), []
    if configs:
        names = _check_mig_configs(configs, s.problems)
        objects, values["config"] = _config_map(s, configs, names, default)
    elif default:
        values["config"] = {"default": default}
    notes = []
    for node in nodes:
        if node["mig_config"]:
            _check_node_mig(node, manager, names, strategy, configs, s.problems, notes)
    return {"strategy": strategy, "values": values, "objects": objects, "names": names, "notes": notes}


def _config_map(s, configs, names, default):
    """The ConfigMap of the role's MIG configs (none when its name is wrong) and the chart's ``migManager.config``."""
    cm_name = s.get("mig_config_map") or ""
    objects = []
    if check_name(cm_name, "gpu_operator_mig_config_map", DNS_SUBDOMAIN, "a ConfigMap name (expected lower-case alphanumerics, '-' and '.')",
                  s.problems):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": cm_name,
                    "namespace": s.get("namespace"),
                    "labels": {"app.kubernetes.io/managed-by": "gpufleet.nvidia"},
                },
                "data": {
                    "config.yaml": dump_yaml({"version": "v1", "mig-configs": configs}, sort_keys=True)
                },
            }
        )
    default = default or "all-disabled"
    if default not in names:
        s.problems.append(
            "gpu_operator_mig_default_config: %s is not one of the configs in gpu_operator_mig_configs "
            "(expected %s)" % (quoted(default), one_of(sorted(names)))
        )
    return objects, {"name": cm_name, "default": default}


def _check_node_mig(node, manager, names, strategy, configs, problems, notes):
    """A node's ``gpufleet_mig_config`` against the MIG settings and the node's GPUs."""
    where = "gpu_operator: host %s: gpufleet_mig_config %s" % (quoted(node["host"]), quoted(node["mig_config"]))
    if not manager:
        problems.append("%s needs the MIG manager (gpu_operator_mig_manager_enabled is false; expected true)" % where)
    if names and node["mig_config"] not in names:
        problems.append("%s is not one of the configs in gpu_operator_mig_configs (expected %s)" % (where, one_of(sorted(names))))
    if node["mig_config"] != "all-disabled" and strategy == "none":
        problems.append(
            "%s partitions the GPUs, but gpu_operator_mig_strategy is 'none', which advertises no MIG "
            "devices (expected gpu_operator_mig_strategy single or mixed)" % where
        )
    _check_mig_fit(node, configs, problems, notes)


def _check_mig_fit(node, mig_configs, problems, notes):
    """The node's MIG config against the GPUs discovery found on it (see :mod:`cluster.mig_fit`)."""
    name = node["mig_config"]
    entries = mig_fit.config_entries(name, mig_configs)
    gpus = node.get("gpus")
    if entries is None:
        return
    if gpus is None:
        notes.append("host %s: MIG config %s not checked against its GPUs: this run did not discover the node"
                     % (quoted(node["host"]), quoted(name)))
        return
    smi = gpus["smi"] or _pci_mig(gpus.get("pci"))
    if not smi:
        if any(isinstance(e, dict) and e.get("mig-enabled") for e in entries):
            notes.append("host %s: MIG config %s not checked against its GPUs: nvidia-smi did not answer there, and "
                         "their PCI device ids are not in the collection's table" % (quoted(node["host"]), quoted(name)))
        return
    for problem in mig_fit.fit(name, entries, smi):
        problems.append("gpu_operator: host %s: gpufleet_mig_config: %s (expected a config whose profiles the "
                        "node's GPUs have, or no gpufleet_mig_config)" % (quoted(node["host"]), problem))


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
        if not isinstance(name, str) or not name or len(name) > 63 or not LABEL_VALUE.fullmatch(name):
            problems.append("gpu_operator_mig_configs: %s is not a config name (expected a label value)" % quoted(name))
            continue
        names.add(name)
        entries = configs[name]
        if isinstance(entries, str) or not isinstance(entries, (list, tuple)) or not entries:
            problems.append(
                "%s: %s is not a list of mig-parted device entries (expected e.g. [{devices: all, "
                "mig-enabled: true, mig-devices: {1g.10gb: 7}}])" % (where, quoted(entries))
            )
            continue
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict) or "devices" not in entry or "mig-enabled" not in entry:
                problems.append(
                    "%s[%d]: %s is not a mig-parted device entry (expected a dict with devices and mig-enabled)"
                    % (where, index, quoted(entry))
                )
            elif entry.get("mig-enabled") is True and not isinstance(entry.get("mig-devices"), dict):
                problems.append(
                    "%s[%d]: mig-enabled is true but mig-devices is %s (expected a mapping of MIG profiles to "
                    "counts, e.g. {1g.10gb: 7})" % (where, index, quoted(entry.get("mig-devices")))
                )
    return names
