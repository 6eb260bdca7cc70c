# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the DRA driver publishes, once applied: the GPUs in its ResourceSlices, and the claim checks.

The code of the ``dra_validation`` filter: per planned node, the GPUs the driver publishes against
what discovery counted, and whether the node's ResourceClaim for one GPU was allocated to a pod
that runs (the claims :func:`cluster.dra.claim_checks` planned).
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import plain
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.dra import DRIVER_NAME, ROLE


def published_devices(slices, nodes):
    """Per planned node, the GPUs the driver publishes in ResourceSlices, against what discovery counted.

    Only each pool's newest generation counts (older slices are on their way out), and only devices of
    type ``gpu`` (a MIG-enabled GPU publishes its MIG devices besides). Returns ``{nodes, failed}``:
    ``nodes`` one ``{name, host, published, expected, status}`` per node (status ``ok``, ``missing``
    or ``mismatch``), ``failed`` one message per node that is not ok.
    """
    counts = {}
    for (node_name, dummy), (dummy_generation, devices) in _newest_pools(slices).items():
        counts[node_name] = counts.get(node_name, 0) + sum(1 for d in devices if _device_type(d) == "gpu")
    result = {"nodes": [], "failed": []}
    for node in nodes or []:
        entry = _published_entry(node, counts.get(node["name"], 0))
        result["nodes"].append(entry)
        if entry["status"] != "ok":
            result["failed"].append(entry["message"])
    return result


def _newest_pools(slices):
    """``{(node, pool): (generation, devices)}`` of the driver's slices, the newest generation of each pool."""
    newest = {}
    for item in plain(slices or []):
        spec = item.get("spec") or {}
        if spec.get("driver") != DRIVER_NAME or not spec.get("nodeName"):
            continue
        pool = spec.get("pool") or {}
        key = (spec["nodeName"], pool.get("name"))
        generation = pool.get("generation") or 0
        if key not in newest or generation > newest[key][0]:
            newest[key] = (generation, [])
        if generation == newest[key][0]:
            newest[key][1].extend(spec.get("devices") or [])
    return newest


def _device_type(device):
    attributes = (device or {}).get("attributes") or {}
    value = attributes.get("type") or attributes.get(DRIVER_NAME + "/type") or {}
    return value.get("string") if isinstance(value, dict) and value else "gpu"


def _published_entry(node, published):
    expected = node.get("gpus")
    if not published:
        status, message = "missing", "no GPU published in a ResourceSlice of driver %s" % DRIVER_NAME
    elif expected is not None and published != expected:
        status, message = "mismatch", "%d GPUs published, discovery found %d" % (published, expected)
    else:
        status, message = "ok", "%d devices published" % published
    return {"name": node["name"], "host": node["host"], "published": published, "expected": expected, "status": status,
            "text": "DRA: " + message, "message": "%s: node %s: %s" % (ROLE, node["name"], message) if status != "ok" else "DRA: " + message}


def validation_result(slices, nodes, checks=None, claims=None, pods=None):
    """What validation found: the GPUs published per node (:func:`published_devices`) and, when the claim
    check ran (``claims`` and ``pods`` read back, not None), per node whether its claim was allocated to
    a pod that runs. Returns ``{nodes, claims, failed}``."""
    result = published_devices(slices, nodes)
    result["claims"] = {}
    if claims is None or pods is None:
        return result
    allocated = set(c["metadata"]["name"] for c in plain(claims) if (c.get("status") or {}).get("allocation"))
    running = set(p["metadata"]["name"] for p in plain(pods) if (p.get("status") or {}).get("phase") == "Running")
    for check in checks or []:
        name = check["claim"]["metadata"]["name"]
        state = "allocated, pod running" if name in allocated and name in running else (
            "allocated, pod not running" if name in allocated else "not allocated")
        result["claims"][check["node"]] = state
        if state != "allocated, pod running":
            result["failed"].append("%s: node %s: the ResourceClaim %s for one GPU: %s" % (ROLE, check["node"], name, state))
    return result
