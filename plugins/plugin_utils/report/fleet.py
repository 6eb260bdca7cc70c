# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report: one row per node from what a run gathered, as data, JSON and HTML.

:func:`build_report` reads, per inventory host, the variables listed in :data:`HOST_VARS` (facts,
the validation results, the declared versions, where a run stopped) and returns the report: run
details, a summary (nodes, GPU nodes, GPUs, how many are ok, drifted, failed, without GPU, not
validated), the cluster's state, one row per node with its driver branches' type and end of life
(common/lifecycle.py, on the report's date), the fleet's branches with their hosts, each node's
security floors and the fleet's bulletins with their hosts (report/floors.py), and plain
statements of what was not checked and why. :func:`render_html` turns it into one self-contained
page (no script, no external asset) that is also well-formed XML. Nothing here touches a host.
"""

from __future__ import annotations

import json

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import data as common_data
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import lifecycle
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.common import hostvars as hostvars_reader
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import floors, layers as report_layers
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report.rows import build_row

SCHEMA = 1
# The per-host variables the report reads (all optional).
HOST_VARS = (
    "gpufleet_nvidia",  # facts: gpufleet.nvidia.gpu_facts / discover, refreshed by validate
    "gpufleet_nvidia_validation",  # gpufleet.nvidia.host_validate (+ cluster_expect from the role)
    "validate_cluster_verdict",  # the validate role's cluster checks (same on every host)
    "gpufleet_stopped_at",  # set by a playbook where the run stopped on the host
    "report_stopped_at",  # the same, kept by the report role's `stopped` (site.yml's rescues)
    "nvidia_driver_version",  # declared driver, for hosts that were not validated
    "container_toolkit_version",  # declared toolkit, idem
    "container_toolkit_runtime",  # declared runtime, idem
    "gpufleet_sharing_config",  # sharing config of the node, idem
    "dra_driver_node",  # the dra_driver role's validation of the node (GPUs published in ResourceSlices, its claim)
    "discover_kubernetes_version",  # the cluster's Kubernetes, for the security floors' Kubernetes / containerd pairing
) + report_layers.RESULT_VARS  # what the driver and toolkit roles did on the node (report/layers.py)
STATUSES = ("failed", "not_validated", "drift", "ok", "no_gpu")
STATUS_TITLES = {
    "incomplete": "incomplete",
    "ok": "ok",
    "drift": "drift",
    "failed": "failed",
    "no_gpu": "no GPU",
    "not_validated": "not validated",
}


def report_date(today, generated_at):
    """The date the report judges driver branches on: ``today``, else the day ``generated_at`` starts with.

    None when neither gives one (``generated_at`` is free text); a ``today`` that is not a date is an error.
    """
    if today not in (None, ""):
        return lifecycle.parse_today(today)
    try:
        return lifecycle.parse_today(generated_at) if generated_at else None
    except GpuFleetError:
        return None


def _fleet_lifecycle(rows):
    """The fleet's driver branches, each said once with its state and its hosts, branches in order."""
    grouped = {}
    for row in rows:
        for entry in row["driver"]["lifecycle"]:
            item = grouped.setdefault(entry["branch"], {"branch": entry["branch"], "state": entry["state"],
                                                        "msg": entry["text"], "hosts": []})
            item["hosts"].append(row["host"])
    return [grouped[branch] for branch in sorted(grouped)]


def _cluster_of(data):
    """The cluster verdict: the first one found, with the node verdicts of all of them (hostvars.host_data
    reads each verdict once, not once per host)."""
    found = None
    nodes = {}
    for entry in data.values():
        cluster = entry.get("validate_cluster_verdict")
        if not isinstance(cluster, dict):
            continue
        if found is None:
            found = dict(cluster)
        nodes.update(cluster.get("nodes") or {})
    if found is not None:
        found["nodes"] = nodes
    return found


def _cluster_change_failures(change):
    """The cluster layer's refusal or failure in this run, as fleet failures."""
    if not isinstance(change, dict) or change.get("state") not in ("refused", "failed"):
        return []
    if change["state"] == "refused":
        return ["cluster change refused before any layer ran, nothing changed: %s" % change.get("msg")]
    return ["cluster layer %s failed: %s" % (change.get("layer"), change.get("msg"))]


def build_report(hosts, hostvars, generated_at=None, run=None, title=None, data=None, today=None):
    """The report of ``hosts`` from ``hostvars`` (or from ``data``, already plain).

    Driver branches are judged on ``today`` (a date or ``YYYY-MM-DD``), else on the day of
    ``generated_at``; ``lifecycle`` lists the fleet's branches with their hosts.
    """
    data = data if data is not None else hostvars_reader.host_data(hosts, hostvars, HOST_VARS)
    cluster = _cluster_of(data)
    day = report_date(today, generated_at)
    run = common_data.plain(run or {}, unknown=str)
    rows = [_declared_gpu_node(build_row(str(h), data.get(str(h)) or {}, cluster, day), run) for h in hosts or []]
    rows.sort(key=lambda r: (STATUSES.index(r["status"]), r["host"]))
    counts = dict((s, len([r for r in rows if r["status"] == s])) for s in STATUSES)
    fleet_failed = list((cluster or {}).get("failed") or []) + _cluster_change_failures(run.get("cluster_change"))
    overall = _overall(run, counts, fleet_failed)
    if run.get("limit"):
        run["partial"] = True
        run["covers"] = [r["host"] for r in rows]
    return {
        "schema": SCHEMA,
        "title": title or "GPU fleet report",
        "generated_at": generated_at,
        "run": run,
        "status": overall,
        "summary": _summary(rows, counts),
        "cluster": _cluster_summary(cluster, fleet_failed),
        "not_checked": _fleet_not_checked(cluster) + _grouped_not_checked(rows),
        "lifecycle": _fleet_lifecycle(rows),
        "security": floors.fleet_security(rows),
        "nodes": rows,
    }


DECLARED_WITHOUT_GPU = (
    "declared a GPU node (inventory group gpu_nodes), but no NVIDIA GPU was found on it, so no GPU layer prepared it "
    "(fix: check that the node sees its GPU on the PCI bus, lspci -nn -d 10de:, and its instance type or BIOS; or take "
    "the host out of gpu_nodes; or set gpufleet_prepare_without_gpu: true to prepare it without one, as for an image build)"
)


def _declared_gpu_node(row, run):
    """``row``, failed where the inventory declares the host a GPU node (``run['gpu_nodes']``, the
    report role's) and it was found without one: a GPU lost from the bus, or a wrong inventory."""
    if row["status"] == "no_gpu" and row["host"] in (run.get("gpu_nodes") or ()):
        row["status"] = "failed"
        row["failed"] = [DECLARED_WITHOUT_GPU] + row["failed"]
    return row


def _summary(rows, counts):
    """Counts over the rows: ``without_gpu`` are the nodes known to have none (a node with GPUs and
    no driver has GPUs), ``gpu_unknown`` those never read; the rest counts the rows' statuses."""
    return {
        "nodes": len(rows),
        "gpu_nodes": len([r for r in rows if r["gpus"]["count"]]),
        "without_gpu": len([r for r in rows if not r["gpus"]["count"] and r["gpus"].get("known", True)]),
        "gpu_unknown": len([r for r in rows if not r["gpus"].get("known", True)]),
        "gpus": sum(r["gpus"]["count"] or 0 for r in rows),
        "ok": counts["ok"],
        "drifted": counts["drift"],
        "failed": counts["failed"],
        "no_gpu": counts["no_gpu"],
        "not_validated": counts["not_validated"],
    }


def _overall(run, counts, fleet_failed):
    """The fleet's status: incomplete while the run runs, else its worst row or a fleet failure."""
    if run.get("state") == "running":
        return "incomplete"
    if counts["failed"] or fleet_failed:
        return "failed"
    if counts["drift"]:
        return "drift"
    return "not_validated" if counts["not_validated"] else "ok"


def _cluster_summary(cluster, fleet_failed):
    found = cluster or {}
    return {
        "checked": bool(cluster and cluster.get("checked")),
        "reason": found.get("reason") or ("" if cluster else "no cluster checks ran"),
        "stack": found.get("stack"),
        "cuda_pod": found.get("cuda_pod"),
        "failed": fleet_failed,
    }


def _fleet_not_checked(cluster):
    """What the cluster was not checked for (the whole cluster, when no host carries its checks)."""
    if cluster is None:
        return [{"msg": "cluster: not checked: no host carries the validate role's cluster checks", "hosts": []}]
    return [{"msg": msg, "hosts": []} for msg in cluster.get("not_checked") or []]


def _grouped_not_checked(rows):
    """What the rows were not checked for, each said once with its hosts, in the order first said."""
    grouped = {}
    for row in rows:
        for msg in row["not_checked"]:
            grouped.setdefault(msg, []).append(row["host"])
    return [{"msg": msg, "hosts": hosts} for msg, hosts in grouped.items()]


def to_json(report):
    return json.dumps(report, indent=2, sort_keys=False) + "\n"


def flavor_text(driver):
    """The flavour as the row says it: ``open``, ``proprietary``, ``flavour unknown: why``; '' without a driver."""
    if driver.get("flavor") == "unknown":
        return "flavour unknown (%s)" % driver["flavor_why"] if driver.get("flavor_why") else "flavour unknown"
    return driver.get("flavor") or ""


def meta_lines(report, run):
    """The line under the title: when, what ran it and how long, how (check mode, a partial run, a run still going)."""
    meta = ["generated %s" % report.get("generated_at")] if report.get("generated_at") else []
    if run.get("state") == "running":
        meta.append("this run started and has not written its report: it is still running, or it stopped "
                    "before the end; the report of an earlier run is gone so that it is not taken for this one's")
    if run.get("collection_version"):
        meta.append("gpufleet.nvidia %s" % run["collection_version"])
    if run.get("duration_s") not in (None, ""):
        meta.append("run took %s" % duration_text(run["duration_s"]))
    if run.get("check_mode"):
        meta.append("check mode: nothing was changed")
    if run.get("partial"):
        meta.append("partial run (--limit %s): it covers %s" % (run.get("limit"), _covers(run.get("covers"))))
    for key in ("playbook", "ansible_version"):
        if run.get(key):
            meta.append("%s %s" % (key.replace("_", " "), run[key]))
    return meta


def _covers(hosts):
    hosts = list(hosts or [])
    if not hosts:
        return "no node"
    return ", ".join(hosts) + " only" if len(hosts) <= 10 else "%d nodes only" % len(hosts)


def duration_text(seconds):
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    try:
        seconds = int(round(float(seconds)))
    except (TypeError, ValueError):
        return str(seconds)
    if seconds < 60:
        return "%d s" % seconds
    if seconds < 3600:
        return "%d min %02d s" % divmod(seconds, 60)
    return "%d h %02d min" % (seconds // 3600, seconds % 3600 // 60)
