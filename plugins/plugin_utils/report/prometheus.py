# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report in Prometheus' text exposition format, for node_exporter's textfile collector.

Written here, a few lines, rather than with ``prometheus_client``: the report is one file of
gauges, and the collection would otherwise ship a dependency for what the format's rules
(``# HELP`` / ``# TYPE`` once per metric, label values with ``\\``, ``"`` and newlines escaped)
say in a paragraph. The unit test parses the output with ``prometheus_client``'s parser where
that is installed.
"""

from __future__ import annotations

import calendar
import time

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import fleet

#: (name, help) of each metric, in the order the file gives them.
METRICS = (
    ("gpufleet_node_status", "The node's status in the fleet report: 1 for its status, 0 for the others."),
    ("gpufleet_node_info", "The node's versions as labels (driver, toolkit, container runtimes), value 1."),
    ("gpufleet_node_gpus", "The node's GPUs as the report counted them."),
    ("gpufleet_node_guard", "A day-2 guard of the node: 1 for its status, 0 for the others."),
    ("gpufleet_node_packages_held", "1 where the layer's packages are held or version-locked, 0 where not."),
    ("gpufleet_node_changed", "1 where this run changed the node's layer, 0 where it did not."),
    ("gpufleet_fleet_nodes", "The fleet's nodes by status."),
    ("gpufleet_report_generated_timestamp_seconds", "When the report was generated, in seconds since the epoch."),
    ("gpufleet_run_duration_seconds", "How long the run that wrote the report took."),
    ("gpufleet_run_in_progress", "1 while a run that started has not written its report (the nodes are then not reported), else 0."),
)
GUARD_STATES = ("ok", "drift", "failed", "skipped")


def escape_label(value):
    """A label value as the text format writes it: ``\\``, ``"`` and newlines escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _sample(name, labels, value):
    body = ",".join('%s="%s"' % (k, escape_label(v)) for k, v in labels if v is not None)
    return "%s{%s} %s" % (name, body, value) if body else "%s %s" % (name, value)


def _node_samples(row, add):
    """The node's samples, each given to ``add(name, labels, value)``."""
    node = row["host"]
    for status in fleet.STATUSES:
        add("gpufleet_node_status", [("node", node), ("status", status)], int(row["status"] == status))
    add("gpufleet_node_info", _info_labels(row), 1)
    add("gpufleet_node_gpus", [("node", node)], int(row["gpus"]["count"] or 0))
    for g in row.get("day2") or []:
        for state in GUARD_STATES:
            add("gpufleet_node_guard", [("node", node), ("guard", g["name"]), ("status", state)], int((g.get("status") or "skipped") == state))
    for name, layer in (row.get("layers") or {}).items():
        if layer.get("held"):
            add("gpufleet_node_packages_held", [("node", node), ("layer", name)], int(layer["held"] in ("held", "locked")))
        add("gpufleet_node_changed", [("node", node), ("layer", name)], int(layer["changed"]))


def _info_labels(row):
    d, engines = row["driver"], row["runtime"].get("versions") or {}
    labels = [("node", row["host"]), ("os", row["os"] or ""), ("kernel", row["kernel"] or ""),
              ("driver", d.get("installed") or d.get("loaded") or ""), ("driver_declared", d.get("declared") or ""),
              ("flavor", d.get("flavor") or ""), ("toolkit", row["toolkit"].get("installed") or "")]
    return labels + [(engine, version or "") for engine, version in sorted(engines.items())]


def _epoch(generated_at):
    try:
        return calendar.timegm(time.strptime(str(generated_at), "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return None


def _number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def render_prometheus(report):
    """The report as a textfile collector file: every metric once with its HELP and TYPE, then its samples."""
    samples = {name: [] for name, dummy in METRICS}

    def add(name, labels, value):
        samples[name].append(_sample(name, labels, value))

    counts = dict((s, 0) for s in fleet.STATUSES)
    for row in report["nodes"]:
        _node_samples(row, add)
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    for status, count in counts.items():
        add("gpufleet_fleet_nodes", [("status", status)], count)
    epoch = _epoch(report.get("generated_at"))
    if epoch is not None:
        add("gpufleet_report_generated_timestamp_seconds", [], epoch)
    duration = _number((report.get("run") or {}).get("duration_s"))
    if duration is not None:
        add("gpufleet_run_duration_seconds", [], duration)
    add("gpufleet_run_in_progress", [], int((report.get("run") or {}).get("state") == "running"))
    lines = []
    for name, help_text in METRICS:
        if samples[name]:
            lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s gauge" % name] + samples[name]
    return "\n".join(lines) + "\n"
