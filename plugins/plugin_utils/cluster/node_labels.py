# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node labels of the cluster layer, as two sets of merge patches around the chart.

Each node the collection labels records, in the annotation ``gpufleet.nvidia/<component>.labels``,
the label keys it manages there; a key that the plan no longer asks for is removed, whatever
its value, and so is every recorded key of a node that is no longer in the plan at all (the
node left the inventory's declaration). Nodes labelled before the annotation existed are
recognised by the label values the role owns (``nvidia.com/gpu.deploy.driver=false``, ...).

The order never widens the GPU Operator's reach by accident: everything that is added or changed
is patched *before* the chart (so a label that keeps the operator's driver off a prepared node
is there before a chart that enables the driver), and everything that is removed only *after*
the chart was upgraded (so such a label goes only once the chart no longer deploys the driver).
The annotation is widened with the labels in the first patch and narrowed with the removals in
the second, so a run interrupted between the two still knows what it added.
"""

from __future__ import annotations

ANNOTATION_PREFIX = "gpufleet.nvidia/"
# The labels of the NVIDIA stack that the cluster roles set.
LABEL_DEPLOY_DRIVER = "nvidia.com/gpu.deploy.driver"
LABEL_DEPLOY_TOOLKIT = "nvidia.com/gpu.deploy.container-toolkit"
LABEL_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
LABEL_MIG_CONFIG = "nvidia.com/mig.config"
LABEL_GPU_PRESENT = "nvidia.com/gpu.present"


def label_plan(nodes, wanted, removable):
    """A plan's ``node_labels``: per node, the labels to set (``wanted(node)``) and the label values the
    role owns (``removable``) and removes when not wanted; a node whose host layer failed is held."""
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


def annotation_key(component):
    return "%s%s.labels" % (ANNOTATION_PREFIX, component.replace("_", "-"))


def _recorded(meta, key):
    text = (meta.get("annotations") or {}).get(key) or ""
    return set(k for k in text.split(",") if k)


def _record(keys):
    return ",".join(sorted(keys)) or None


def _patch(name, labels, annotations):
    meta = {"name": name}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta}


def _node_changes(name, wanted, legacy, labels, recorded, key):
    """The two patches of one node: ``(before_chart, after_chart)``, either may be None."""
    adds = dict((k, v) for k, v in sorted(wanted.items()) if labels.get(k) != v)
    owned = set(recorded)
    owned |= set(k for k, values in legacy.items() if labels.get(k) in values)
    removes = dict((k, None) for k in sorted(owned) if k not in wanted and k in labels)
    widened = recorded | set(wanted)
    before = _patch(name, adds, {key: _record(widened)} if widened != recorded else None) if adds or widened != recorded else None
    final = set(wanted)
    after = _patch(name, removes, {key: _record(final)} if final != widened else None) if removes or final != widened else None
    return before, after


def label_changes(node_labels, cluster_nodes, role, component):
    """The label patches that bring the cluster's nodes to the plan, split around the chart.

    ``node_labels`` is a plan's list of ``{host, name, labels, remove}``; ``cluster_nodes`` what
    ``kubernetes.core.k8s_info`` returned for kind Node, or None to render the patches against
    unlabelled nodes (no cluster). A planned node that the cluster does not have is a problem.
    """
    key = annotation_key(component)
    current = _cluster_metadata(cluster_nodes)
    problems, before, after = [], [], []
    planned = set()
    for entry in node_labels or []:
        planned.add(entry["name"])
        meta = _planned_node(entry, current, role, problems)
        if meta is None or entry.get("hold"):
            continue
        first, second = _node_changes(entry["name"], entry.get("labels") or {}, entry.get("remove") or {},
                                      meta.get("labels") or {}, _recorded(meta, key), key)
        before += [first] if first else []
        after += [second] if second else []
    after += _left_nodes(current, planned, key)
    return {"before_chart": before, "after_chart": after, "patches": before + after, "problems": problems,
            "annotation": key}


def _cluster_metadata(cluster_nodes):
    """``{name: metadata}`` of the cluster's nodes; None without a cluster."""
    if cluster_nodes is None:
        return None
    metas = [(item or {}).get("metadata") or {} for item in cluster_nodes]
    return dict((meta["name"], meta) for meta in metas if meta.get("name"))


def _planned_node(entry, current, role, problems):
    """The metadata of a planned node in the cluster ({} without a cluster); None, and a problem, when it is not there."""
    if current is None:
        return {}
    if entry["name"] not in current:
        known = sorted(current)
        problems.append(
            "%s: host '%s': no node named '%s' in the cluster (expected gpufleet_node_name set to the node's "
            "name; nodes found: %s)" % (role, entry["host"], entry["name"], ", ".join(known[:20]) or "none")
        )
        return None
    return current[entry["name"]]


def label_out(name, meta, label, value, component):
    """The patch that sets ``label`` to ``value`` on node ``name`` (its live ``meta``) and records
    it in the component's annotation; None when both are there already."""
    key = annotation_key(component)
    recorded = _recorded(meta, key)
    labels = meta.get("labels") or {}
    if labels.get(label) == value and label in recorded:
        return None
    return _patch(name, {label: value}, {key: _record(recorded | {label})})


def _left_nodes(current, planned, key):
    """Patches that remove every recorded label of the nodes no longer in the plan."""
    patches = []
    for name in sorted(current or {}):
        meta = current[name]
        recorded = _recorded(meta, key)
        if name in planned or not recorded:
            continue
        labels = meta.get("labels") or {}
        removes = dict((k, None) for k in sorted(recorded) if k in labels)
        patches.append(_patch(name, removes, {key: None}))
    return patches
