# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One GPU node in the cluster, judged: Ready, its allocatable GPUs (or, on the DRA layer, the
dra_driver role's verdict), its labels, and the stack's pods on it.

Each check is added to the node's :class:`validate.host.Checks`; nothing here talks to the cluster.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import FAILED, OK, SKIPPED
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.node_labels import LABEL_PLUGIN_CONFIG as LABEL_CONFIG
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate.monitoring import COUNT as LABEL_COUNT
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate.pods import STACK_TITLES, first_line

LABEL_REPLICAS = "nvidia.com/gpu.replicas"


def _int(value):
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def mig_enabled(facts):
    return any(g.get("mig_mode_current") == "enabled" for g in _dig(facts, "driver", "nvidia_smi", "gpus") or [])


def _allocatable(node, resource):
    allocatable = _dig(node, "status", "allocatable") or {}
    value = _int(allocatable.get(resource))
    mig = sum(_int(v) or 0 for k, v in allocatable.items() if str(k).startswith("nvidia.com/mig-"))
    return value, mig


def _ready(node):
    for condition in _dig(node, "status", "conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True", condition.get("reason"), condition.get("message")
    return False, None, "no Ready condition"


def _check_labels(checks, node, expect, gpu_count, mig):
    labels = _dig(node, "metadata", "labels") or {}
    problems = _expected_label_problems(labels, expect.get("labels") or {}) + _stack_label_problems(labels, expect, gpu_count, mig)
    if problems:
        checks.add("labels", FAILED, "node %s: %s" % (_dig(node, "metadata", "name"), "; ".join(problems)))
    else:
        checks.add("labels", OK, "node labels as expected (%s)" % ", ".join(sorted(expect.get("labels") or {})))


def _expected_label_problems(labels, expected):
    """The labels that are missing or have another value than expected ('' or None: any value)."""
    problems = []
    for key, value in sorted(expected.items()):
        if key not in labels:
            problems.append("label %s is missing" % key)
        elif value not in (None, "") and str(labels[key]) != str(value):
            problems.append("label %s is %r, expected %r" % (key, labels[key], str(value)))
    return problems


def _stack_label_problems(labels, expect, gpu_count, mig):
    """The labels the stack writes that disagree with the node: GPU count (without MIG), replicas, sharing config."""
    problems = []
    if LABEL_COUNT in labels and not mig and _int(labels[LABEL_COUNT]) != gpu_count:
        problems.append("label %s is %r, the node has %d GPUs" % (LABEL_COUNT, labels[LABEL_COUNT], gpu_count))
    replicas = expect.get("replicas") or 1
    if LABEL_REPLICAS in labels and _int(labels[LABEL_REPLICAS]) != replicas:
        problems.append(
            "label %s is %r, expected %d: the sharing config has not taken effect"
            % (LABEL_REPLICAS, labels[LABEL_REPLICAS], replicas)
        )
    config = expect.get("sharing_config") or ""
    if config and labels.get(LABEL_CONFIG) != config:
        problems.append(
            "label %s is %r, expected %r: the node runs another sharing config"
            % (LABEL_CONFIG, labels.get(LABEL_CONFIG), config)
        )
    return problems


def _check_allocatable(checks, node, expect, gpu_count, mig):
    resource = expect.get("resource") or "nvidia.com/gpu"
    replicas = expect.get("replicas") or 1
    value, mig_total = _allocatable(node, resource)
    name = _dig(node, "metadata", "name")
    if mig:
        total = (value or 0) + (mig_total if resource == "nvidia.com/gpu" else 0)
        if total > 0:
            checks.add("allocatable", OK, "node %s: %d allocatable GPU devices (MIG enabled)" % (name, total))
        else:
            checks.add("allocatable", FAILED, "node %s: MIG is enabled but no %s or nvidia.com/mig-* is allocatable" % (name, resource))
        checks.add("allocatable_count", SKIPPED, "allocatable count: not compared with the GPU count on MIG nodes")
        return total
    expected = gpu_count * replicas
    if value is None:
        status, msg = FAILED, ("node %s advertises no %s (expected %d): the device plugin is not running there, or found no GPU"
                               % (name, resource, expected))
    elif value != expected:
        status, msg = FAILED, "node %s: %s allocatable is %d, expected %d (%d GPUs x %d replicas)" % (
            name, resource, value, expected, gpu_count, replicas)
    else:
        status, msg = OK, "node %s: %d %s allocatable (%d GPUs x %d replicas)" % (name, value, resource, gpu_count, replicas)
    checks.add("allocatable", status, msg)
    return value


def dra_of(hv):
    """The dra_driver role's entry of a host on the DRA layer (``{}`` where the role did not run on
    it), None for a host off it (the device plugin or the GPU Operator advertise its GPUs)."""
    hv = hv if hasattr(hv, "get") else {}
    entry = hv.get("dra_driver_node")
    if isinstance(entry, dict) and "published" in entry:
        return entry
    return {} if hv.get("gpufleet_cluster_layer") == "dra" else None


def check_node(checks, node, name, facts, validation, stack_info, pods, dra=None):
    """The checks of a node in the cluster: Ready, allocatable (``dra`` on a DRA node: the
    dra_driver role's entry, ``{}`` where it did not run), labels, the stack's pods on it;
    returns its allocatable GPUs (None on a DRA node: no vector-add pod asks for nvidia.com/gpu there)."""
    expect = validation.get("cluster_expect") or {}
    gpu_count = facts.get("gpu_count") or validation.get("gpu_count") or 0
    mig = mig_enabled(facts)
    ready, why, message = _ready(node)
    if ready:
        checks.add("node", OK, "node %s is Ready" % name)
    else:
        checks.add("node", FAILED, "node %s is not Ready (%s)" % (name, first_line(message) or why or "unknown"))
    if dra is not None:
        allocatable = None
        _check_dra(checks, name, dra)
    else:
        allocatable = _check_allocatable(checks, node, expect, gpu_count, mig)
    _check_labels(checks, node, expect, gpu_count, mig)
    if stack_info["name"] and pods:
        _check_stack_pods(checks, name, stack_info, pods)
    return allocatable


def _check_dra(checks, name, entry):
    """The dra check of a DRA node: what the dra_driver role found (``dra_driver_node``), in place of
    the allocatable nvidia.com/gpu that no DRA node advertises."""
    if not entry.get("status"):
        return checks.add("dra", SKIPPED, (
            "node %s is on the DRA layer (gpufleet_cluster_layer: dra), which advertises no nvidia.com/gpu: its GPUs in "
            "ResourceSlices are checked by the dra_driver role, which did not run on it in this play" % name))
    claim = entry.get("claim")
    said = "%s%s" % (entry.get("text") or "DRA: %s devices published" % entry.get("published"), ", claim %s" % claim if claim else "")
    if entry["status"] != "ok":
        return checks.add("dra", FAILED, "node %s: %s" % (name, entry.get("message") or said))
    if claim and claim != "allocated, pod running":
        return checks.add("dra", FAILED, "node %s: %s: the ResourceClaim for one GPU is %s" % (name, said, claim))
    return checks.add("dra", OK, "node %s: %s" % (name, said))


def _check_stack_pods(checks, name, stack_info, pods):
    """The pods check: every pod of the stack on the node ``name`` is ready or completed."""
    title = STACK_TITLES[stack_info["name"]]
    mine = [p for p in stack_info["not_ready"] if p["node"] == name]
    if mine:
        checks.add("pods", FAILED, "%s pods not ready on %s: %s" % (title, name, "; ".join("%s (%s)" % (p["name"], p["why"]) for p in mine)))
    else:
        on_node = len([p for p in pods if _dig(p, "spec", "nodeName") == name])
        checks.add("pods", OK, "%s: %d pods on %s, all ready or completed" % (title, on_node, name))
