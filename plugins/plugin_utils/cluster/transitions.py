# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node whose driver changes sides: from the GPU Operator's driver container to the host's.

The inventory declares how each node is prepared (``nvidia_driver_method``); the cluster and the
host show how it is prepared now. A node declared ``package`` or ``preinstalled`` on which the
operator's driver serves (the deployed release enables the operator's driver and the node lacks
``nvidia.com/gpu.deploy.driver=false``, or discovery found the driver container's root) moves:
before any host layer runs, it is labelled out of the operator's driver, drained of its GPU
pods, and the operator's driver pod must have left it. Only then does the driver layer install
the host's driver. (The other way, from the host's driver to the operator's, is refused by
preflight's ``driver_not_package_owned`` while a host driver is there.)
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import node_labels

__all__ = ["operator_moves"]


def _operator_drives(release):
    """Whether the deployed release deploys the operator's driver (driver.enabled, true by default)."""
    if not release:
        return False
    return ((release.get("values") or {}).get("driver") or {}).get("enabled", True) is not False


def operator_moves(driver_sides, cluster_nodes, release, component="gpu_operator"):
    """The nodes moving from the operator's driver to the host's, each ``{host, name, why, patch}``
    (``patch``: the node's label-out merge patch, None when it is labelled out already)."""
    drives = _operator_drives(release)
    metas = [(n or {}).get("metadata") or {} for n in cluster_nodes or []]
    live = dict((meta.get("name"), meta) for meta in metas)
    moves = []
    for side in driver_sides or []:
        if not side.get("host_driver") or side.get("name") not in live:
            continue
        meta = live[side["name"]]
        labelled_out = (meta.get("labels") or {}).get(node_labels.LABEL_DEPLOY_DRIVER) == "false"
        why = []
        if drives and not labelled_out:
            why.append("the deployed release (revision %s) runs the operator's driver there" % release.get("revision"))
        if side.get("operator_driver"):
            why.append("discovery found the operator's driver container on it")
        if why:
            moves.append({"host": side["host"], "name": side["name"], "why": " and ".join(why),
                          "patch": node_labels.label_out(side["name"], meta, node_labels.LABEL_DEPLOY_DRIVER, "false", component)})
    return moves
