# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU sharing as the device plugin reads it: time-slicing, MPS and the MIG strategy.

Each entry of ``<prefix>_sharing_configs`` becomes one of the device plugin's named configs, in
the k8s-device-plugin ``api/config/v1`` format; a node picks one with ``gpufleet_sharing_config``
(the label ``nvidia.com/device-plugin.config``). The GPU Operator and the standalone device
plugin write them the same way.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.checks import LABEL_VALUE, one_of, quoted, to_bool
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.release import dump_yaml

MIG_STRATEGIES = ("none", "single", "mixed")
SHARING_STRATEGIES = ("none", "time-slicing", "mps")
SHARING_OPTIONS = ("strategy", "replicas", "rename_by_default", "fail_requests_greater_than_one", "resources")
_RESOURCE = re.compile(r"^nvidia\.com/(gpu|mig-[0-9][0-9a-z.+]*)$")


def plugin_configs(s, default, mig_strategy, extra_flags=None):
    """The device plugin's named configs as ``{name: YAML text}``, in the k8s-device-plugin
    ``api/config/v1`` format, one per entry of ``<prefix>_sharing_configs``.

    Each entry: ``strategy`` (none | time-slicing | mps), ``replicas`` (at least 2 when shared),
    ``rename_by_default``, ``fail_requests_greater_than_one``, ``resources`` (default
    ``[nvidia.com/gpu]``). A config named ``default`` without sharing is added when the default
    named by ``<prefix>_sharing_default`` is ``default`` and not declared.
    """
    if mig_strategy not in MIG_STRATEGIES:
        s.problems.append(
            "%s_mig_strategy: %s is not a MIG strategy (expected %s)" % (s.prefix, quoted(mig_strategy), one_of(MIG_STRATEGIES))
        )
    configs = _sharing_configs(s, default)
    data = {}
    for name in sorted(configs, key=str):
        doc = _named_plugin_config(s, name, configs[name], mig_strategy, extra_flags or {})
        if doc is not None:
            data[name] = dump_yaml(doc)
    return data


def _sharing_configs(s, default):
    """``<prefix>_sharing_configs`` as a dict, with the ``default`` config it may leave implied."""
    var = s.prefix + "_sharing_configs"
    configs = s.get("sharing_configs")
    if configs is None:
        configs = {}
    if not isinstance(configs, dict):
        s.problems.append("%s: %s is not a mapping of config names to configs (expected a dict)" % (var, quoted(configs)))
        configs = {}
    configs = dict(configs)
    if default == "default" and "default" not in configs:
        configs["default"] = {"strategy": "none"}
    if default not in configs:
        s.problems.append(
            "%s_sharing_default: %s is not one of the configs in %s (expected %s)"
            % (s.prefix, quoted(default), var, one_of(sorted(str(k) for k in configs)))
        )
    return configs


def _named_plugin_config(s, name, entry, mig_strategy, extra_flags):
    """The config document of one entry of ``<prefix>_sharing_configs``, or None when it cannot be built."""
    var = s.prefix + "_sharing_configs"
    where = "%s.%s" % (var, name)
    if not isinstance(name, str) or len(name) > 63 or not LABEL_VALUE.fullmatch(name) or not name:
        s.problems.append(
            "%s: %s is not a config name (expected a label value: at most 63 alphanumerics, '-', "
            "'_' or '.', starting and ending with an alphanumeric)" % (var, quoted(name))
        )
        return None
    if entry is None:
        entry = {}
    if not isinstance(entry, dict):
        s.problems.append("%s: %s is not a config (expected a dict with %s)" % (where, quoted(entry), ", ".join(SHARING_OPTIONS)))
        return None
    for key in sorted(entry, key=str):
        if key not in SHARING_OPTIONS:
            s.problems.append("%s: unknown option %s (expected %s)" % (where, quoted(key), one_of(SHARING_OPTIONS)))
    return _plugin_config(s, entry, where, mig_strategy, extra_flags)


def _plugin_config(s, entry, where, mig_strategy, extra_flags):
    problems = s.problems
    strategy = entry.get("strategy", "none")
    if strategy not in SHARING_STRATEGIES:
        problems.append("%s.strategy: %s is not a sharing strategy (expected %s)" % (where, quoted(strategy), one_of(SHARING_STRATEGIES)))
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
            % (where, s.prefix, quoted(mig_strategy), s.prefix)
        )
    count = _replicas(entry, where, strategy, problems)
    resources = _shared_resources(s, entry, where, mig_strategy)
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
    if isinstance(replicas, int) and not isinstance(replicas, bool):
        return replicas
    return int(replicas) if isinstance(replicas, str) and replicas.isdigit() else None


def _replicas(entry, where, strategy, problems):
    replicas = entry.get("replicas")
    count = _replica_count(replicas)
    if count is None or count < 2:
        problems.append(
            "%s.replicas: %s is not a number of replicas for %s (expected an integer of at least 2)"
            % (where, quoted(replicas), strategy)
        )
        count = 2
    return count


def _shared_resources(s, entry, where, mig_strategy):
    """The resources a shared config replicates, each checked; the default when they are not a list."""
    resources = entry.get("resources", ["nvidia.com/gpu"])
    if isinstance(resources, str) or not isinstance(resources, (list, tuple)) or not resources:
        s.problems.append("%s.resources: %s is not a list of resource names (expected e.g. [nvidia.com/gpu])" % (where, quoted(resources)))
        resources = ["nvidia.com/gpu"]
    seen = set()
    for resource in resources:
        problem = _resource_problem(resource, seen, mig_strategy, s.prefix)
        if problem:
            s.problems.append("%s.resources: %s %s" % (where, quoted(resource), problem))
        seen.add(resource)
    return resources


def _resource_problem(resource, seen, mig_strategy, prefix):
    if not isinstance(resource, str) or not _RESOURCE.fullmatch(resource):
        return "is not a GPU resource name (expected nvidia.com/gpu or nvidia.com/mig-<profile>, e.g. nvidia.com/mig-1g.10gb)"
    if resource.startswith("nvidia.com/mig-") and mig_strategy != "mixed":
        return "is only advertised with MIG strategy 'mixed' (%s_mig_strategy is %s; expected nvidia.com/gpu)" % (prefix, quoted(mig_strategy))
    if resource in seen:
        return "is listed twice (expected each resource once)"
    return None


def check_node_sharing(s, nodes, names):
    """Each node's ``gpufleet_sharing_config`` is one of the configs."""
    for node in nodes:
        if node["sharing_config"] and node["sharing_config"] not in names:
            s.problems.append(
                "%s: host %s: gpufleet_sharing_config %s is not one of the configs in %s_sharing_configs "
                "(expected %s)" % (s.prefix, quoted(node["host"]), quoted(node["sharing_config"]), s.prefix, one_of(sorted(names)))
            )
