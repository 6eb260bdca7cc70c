# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What validation publishes on each GPU node of the cluster, as labels of the collection's own
prefix, so that a scheduler, a dashboard or ``kubectl get nodes -L`` sees them:

- ``gpufleet.nvidia/driver-branch``: the loaded (else installed) driver's branch, ``580``;
  ``none`` without a driver;
- ``gpufleet.nvidia/driver-eol``: that branch's end of life as ``YYYY-MM`` (common.lifecycle),
  ``past`` where it passed before the table recorded a month, ``none`` where NVIDIA published
  none (and without a driver), ``unknown`` for a branch the table does not have;
- ``gpufleet.nvidia/driver-flavor``: ``open`` or ``proprietary`` kernel modules, ``unknown``
  where the facts could not tell, ``none`` without a driver;
- ``gpufleet.nvidia/security-floor``: the bulletins the node's driver, toolkit or containerd is
  below (common.security), NVIDIA's by their number: ``5861.containerd-eol``; ``ok`` where it is
  at or above every floor, ``none`` where no version could be judged;
- ``gpufleet.nvidia/validation``: the node's last validation, the worse of its host checks and
  its node's cluster checks: ``ok``, ``drift``, ``failed`` (``skipped`` where nothing was checked).

The patches come from the cluster layer's mechanism (``cluster.node_labels.label_changes``): the
annotation ``gpufleet.nvidia/validate.labels`` records the keys set, a key no longer wanted is
removed, and so is every recorded key of a node that is no longer a GPU node of the inventory.
Inventory hosts outside the play (``--limit``) keep what they carry. Nothing here talks to the
cluster.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import node_labels
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import lifecycle, security, versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import DRIFT, FAILED, OK, RANK, SKIPPED

PREFIX = "gpufleet.nvidia/"
BRANCH = PREFIX + "driver-branch"
EOL = PREFIX + "driver-eol"
FLAVOR = PREFIX + "driver-flavor"
VALIDATION = PREFIX + "validation"
SECURITY = PREFIX + "security-floor"
KEYS = (BRANCH, EOL, FLAVOR, SECURITY, VALIDATION)
COMPONENT = "validate"
ROLE = "validate"
FLAVORS = ("open", "proprietary")
#: A label value: 63 characters at most, alphanumerics at both ends, ``-_.`` between (or empty).
_VALUE_RE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def annotation_key():
    """The annotation that records the labels validation manages on a node."""
    return node_labels.annotation_key(COMPONENT)


def label_value(text):
    """``text`` as a valid Kubernetes label value: other characters become ``-``, the ends are
    trimmed to alphanumerics, 63 characters at most."""
    value = re.sub(r"[^-A-Za-z0-9_.]", "-", str(text))[:63]
    value = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)
    return value if _VALUE_RE.match(value) else ""


def _driver(facts, validation):
    """The node's driver version (loaded, else installed) as :class:`DriverVersion`, or None."""
    driver = validation.get("driver") or {}
    for value in (driver.get("loaded"), dig(facts, "driver", "version"), driver.get("installed")):
        version = versions.try_parse_driver_version(value)
        if version is not None:
            return version
    return None


def _end_of_life(branch, today):
    judged = lifecycle.judge(branch, today)
    if not judged["known"]:
        return "unknown"
    return judged["end_of_life"] or "none"


def _security(facts, validation, version, today):
    """The security-floor label: the node's driver, installed toolkit and containerd on ``today``."""
    containerd = dig(facts, "container", "containerd") or {}
    judged = security.judge(
        driver=str(version) if version else None,
        toolkit=dig(validation, "toolkit", "installed") or dig(facts, "container", "toolkit", "version"),
        containerd=containerd.get("version") if containerd.get("installed") else None,
        today=today)
    return security.label_value(judged)


def node_values(facts, validation, cluster_status, today):
    """``{key: value}`` of one GPU node's labels."""
    version = _driver(facts, validation)
    status = max((validation.get("status") or SKIPPED, cluster_status or SKIPPED), key=lambda s: RANK.get(s, 0))
    values = {VALIDATION: status if status in (OK, DRIFT, FAILED) else SKIPPED,
              SECURITY: _security(facts, validation, version, today)}
    if version is None:
        values.update({BRANCH: "none", EOL: "none", FLAVOR: "none"})
    else:
        flavor = dig(facts, "driver", "flavor")
        values.update({BRANCH: str(version.branch), EOL: _end_of_life(version.branch, today),
                       FLAVOR: flavor if flavor in FLAVORS else "unknown"})
    return dict((k, label_value(v)) for k, v in values.items())


def _kept(meta, key):
    """The labels an inventory node outside the play carries of those recorded in ``key``: kept as they are."""
    recorded = ((meta.get("annotations") or {}).get(key) or "").split(",")
    labels = meta.get("labels") or {}
    return dict((k, labels[k]) for k in recorded if k in labels)


def plan(targets, node_verdicts, cluster_nodes, kept_nodes, today):
    """``{annotation, nodes, patches}``: the labels of each validated GPU node (``targets`` as
    ``validate.cluster.gpu_hosts`` gives them, with ``node_verdicts`` by host) and the patches that
    bring ``cluster_nodes`` there. ``kept_nodes``: the node names of the inventory hosts outside
    the play, whose labels stay as they are; any other node loses the labels it carries."""
    key = annotation_key()
    by_name = dict((dig(n, "metadata", "name"), n.get("metadata") or {}) for n in cluster_nodes or [] if dig(n, "metadata", "name"))
    entries, nodes, planned = [], {}, set()
    for host, facts, validation in targets:
        verdict = node_verdicts.get(host) or {}
        name = verdict.get("node") or dig(validation, "cluster_expect", "node") or host
        planned.add(name)
        if name not in by_name:
            continue  # the node check says it is not in the cluster
        nodes[host] = node_values(facts, validation, verdict.get("status"), today)
        entries.append({"host": host, "name": name, "labels": nodes[host]})
    for name in sorted(set(kept_nodes or []) - planned):
        if name in by_name:
            entries.append({"host": name, "name": name, "labels": _kept(by_name[name], key)})
    changes = node_labels.label_changes(entries, cluster_nodes or [], ROLE, COMPONENT)
    return {"annotation": key, "nodes": nodes, "patches": changes["patches"]}
