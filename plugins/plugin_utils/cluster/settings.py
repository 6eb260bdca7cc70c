# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster layer's settings come from one place, whatever ``--limit`` says.

site.yml's cluster plays run their tasks once, with the variables of the run's first host. A
cluster setting put on a group or a host, rather than on ``all``, then depends on which host
comes first: a full run and a ``--limit`` run would deploy two different releases. So every
cluster setting must have one value on every host of the inventory (set on ``all``, or the same
everywhere); a setting that differs is refused by name, with the hosts on each side.
"""

from __future__ import annotations

import json

__all__ = ["CLUSTER_PREFIXES", "CLUSTER_VARS", "disagreements"]

# Every variable of the cluster roles, and the fleet-wide ones they default from.
CLUSTER_PREFIXES = ("gpu_operator_", "device_plugin_", "dra_driver_")
CLUSTER_VARS = (
    "gpufleet_cluster_layer", "gpufleet_kubeconfig", "gpufleet_kube_context", "gpufleet_helm_binary",
    "gpufleet_gpu_node_group", "gpufleet_image_pull_secrets", "gpufleet_image_registry", "gpufleet_registry_server",
    "gpufleet_registry_username", "gpufleet_registry_password", "gpufleet_sharing_configs", "gpufleet_sharing_default",
    "gpufleet_mig_strategy",
)
_UNSET = "(unset: the role's default)"
_SHOWN = 3


def _is_setting(name):
    return name in CLUSTER_VARS or name.startswith(CLUSTER_PREFIXES)


def _shown(name, value):
    if "password" in name or "secret" in name.split("_")[-1:]:
        return "(a value, not shown)"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _values(hostvars, hosts):
    """``{setting: {shown value: [hosts]}}`` over ``hosts``; a host without the setting has it unset."""
    names = set()
    for host in hosts:
        names.update(k for k in hostvars[host].keys() if isinstance(k, str) and _is_setting(k))
    found = {}
    for name in sorted(names):
        by_value = found.setdefault(name, {})
        for host in hosts:
            vars_ = hostvars[host]
            shown = _shown(name, vars_[name]) if name in vars_ else _UNSET
            by_value.setdefault(shown, []).append(host)
    return found


def _describe(name, by_value):
    sides = []
    for shown, hosts in sorted(by_value.items(), key=lambda item: (-len(item[1]), item[0])):
        names = ", ".join(hosts[:_SHOWN]) + (", ..." if len(hosts) > _SHOWN else "")
        sides.append("%s on %d host%s (%s)" % (shown, len(hosts), "" if len(hosts) == 1 else "s", names))
    return (
        "cluster settings: %s is not the same on every host of the inventory: %s. The cluster layer runs once, with "
        "the variables of the run's first host, so the release would depend on which host --limit puts first; "
        "nothing was changed (expected each cluster setting on the group all, or the same on every host)"
        % (name, "; ".join(sides))
    )


def disagreements(hostvars, hosts):
    """One problem per cluster setting that is not the same on every host of ``hosts``."""
    hosts = [h for h in hosts or [] if h in hostvars]
    return [_describe(name, by_value) for name, by_value in _values(hostvars, hosts).items() if len(by_value) > 1]
