# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report as JUnit XML, for a CI system: one test suite per node, one test case per check.

Each node's cases: its status (``status``), then each day-2 guard. A case that failed carries a
``<failure>`` with the reasons and the fix, one that drifted a ``<failure type="drift">``, one not
checked or not validated a ``<skipped>``. Written with ``xml.etree`` (every value escaped by it).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET


def _case(suite, name, classname, status, message, detail):
    case = ET.SubElement(suite, "testcase", name=name, classname=classname, time="0")
    if status in ("failed", "drift"):
        failure = ET.SubElement(case, "failure", type=status, message=_clean(message or status))
        failure.text = _clean(detail)
    elif status in ("skipped", "not_validated", None):
        ET.SubElement(case, "skipped", message=_clean(message or "not checked"))
    return case


def _clean(text):
    """``text`` without the characters XML 1.0 cannot carry (control characters but tab and newlines)."""
    return "".join(ch for ch in str(text or "") if ch in "\t\n\r" or ord(ch) >= 0x20)


def _node_suite(root, row):
    suite = ET.SubElement(root, "testsuite", name=_clean(row["host"]))
    classname = "gpufleet.%s" % _clean(row["host"])
    reasons = row["failed"] + row["drifted"] + [("fix: " + f) for f in row.get("fix") or []]
    first = (row["failed"] + row["drifted"] + row["not_checked"] + [""])[0]
    status = row["status"] if row["status"] != "no_gpu" else "ok"
    _case(suite, "status", classname, status, first, "\n".join(reasons))
    for guard in row.get("day2") or []:
        _case(suite, guard["name"], classname, guard.get("status") or "skipped", guard.get("msg"), guard.get("msg"))
    counts = {"tests": len(suite), "failures": len(suite.findall("testcase/failure")), "skipped": len(suite.findall("testcase/skipped"))}
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("errors", "0")
    return counts


def render_junit(report):
    """The report as a JUnit XML document (``<testsuites>``), as text."""
    root = ET.Element("testsuites", name=_clean(report.get("title") or "GPU fleet report"))
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for row in report["nodes"]:
        for key, value in _node_suite(root, row).items():
            totals[key] += value
    if (report.get("cluster") or {}).get("failed"):
        suite = ET.SubElement(root, "testsuite", name="cluster", tests="1", failures="1", errors="0", skipped="0")
        _case(suite, "cluster", "gpufleet.cluster", "failed", report["cluster"]["failed"][0], "\n".join(report["cluster"]["failed"]))
        totals["tests"] += 1
        totals["failures"] += 1
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


__all__ = ["render_junit"]
