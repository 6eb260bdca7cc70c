# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report as text: :func:`render_text`, the whole report (the ``.txt`` file), and
:func:`render_summary`, what the report role prints at the end of a run - the counts, the run's
notes by their first sentences, and the nodes that are not ok with their reasons and fixes, capped, so that a run over 1,000 nodes does
not print a megabyte. Nothing from a node reaches a terminal as a control character.
"""

from __future__ import annotations

import re
import textwrap
import unicodedata

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import fleet, floors, monitoring

TEXT_WIDTH = 100


def _wrapped(label, text, width=TEXT_WIDTH):
    """``label`` and ``text`` as lines of at most ``width`` characters (a longer word, a path, stays
    whole), the text's continuation lines under its first: wrapped, never clipped."""
    head = "  %-11s " % label
    return textwrap.wrap(str(text), width=width, initial_indent=head, subsequent_indent=" " * len(head),
                         break_long_words=False, break_on_hyphens=False) or [head.rstrip()]


def _all_wrapped(label, texts):
    """Each of ``texts`` :func:`_wrapped` under ``label``."""
    return [line for text in texts for line in _wrapped(label, text)]


def summary_line(report):
    """The fleet in one sentence: its status, its nodes with and without GPU, the rows by status."""
    s = report["summary"]
    return ("%s: %d nodes, %d with GPUs (%d GPUs), %d without GPU%s: %d ok, %d drifted, %d failed, %d with nothing to "
            "validate (no GPU), %d not validated" % (
                fleet.STATUS_TITLES.get(report["status"], report["status"]).upper(), s["nodes"], s["gpu_nodes"], s["gpus"],
                s.get("without_gpu", s["no_gpu"]), ", %d never read" % s["gpu_unknown"] if s.get("gpu_unknown") else "",
                s["ok"], s["drifted"], s["failed"], s["no_gpu"], s["not_validated"]))


def _first_sentence(text):
    """The first sentence of ``text``, with `` [...]`` where more followed."""
    match = re.match(r"(.+?[.!?])\s+\S", text)
    return match.group(1) + " [...]" if match else text


def _notes_on_one_line(report):
    """``report`` with each of the run's notes on one line (its line breaks and runs of white space made
    one space), before :func:`_terminal_safe` would write a line break as ``\\n``."""
    run = report.get("run") or {}
    if not run.get("notes"):
        return report
    return dict(report, run=dict(run, notes=[" ".join(str(note).split()) for note in run["notes"]]))


def _notes_text(run, brief=False):
    """The run's notes (what a lab lacks, for instance: the HTML's "About this fleet"), each under
    ``note``; ``brief``: only each one's first sentence."""
    return _all_wrapped("note", (_first_sentence(note) if brief else note for note in run.get("notes") or []))


def _fleet_text(report, most=20, brief=False):
    """The lines about the fleet: title, summary, the run's notes, the cluster, the branches past their end of life."""
    run = report.get("run") or {}
    lines = ["%s - %s" % (report.get("title") or "GPU fleet report", " | ".join(fleet.meta_lines(report, run)) or "no run details")]
    lines += textwrap.wrap(summary_line(report), width=TEXT_WIDTH, break_long_words=False, break_on_hyphens=False)
    lines += _notes_text(run, brief)
    lines += _cluster_text(report.get("cluster") or {})
    for item in report.get("lifecycle") or []:
        if item["state"] in ("past", "unknown"):
            lines += _wrapped("branch", "%s (%s)" % (item["msg"], floors.hosts_text(item["hosts"], most)))
    return lines + _all_wrapped("security", floors.fleet_lines(report, most))


def _cluster_text(cluster):
    lines = _wrapped("cluster", "checked" if cluster.get("checked") else cluster.get("reason") or "not checked")
    for part in (cluster.get("stack"), cluster.get("cuda_pod")):
        if part and part.get("msg"):
            lines += _wrapped("", "%s: %s" % (part.get("status") or "skipped", part["msg"]))
    return lines + _all_wrapped("failed", cluster.get("failed") or [])


def _driver_text(d):
    """The driver's lines of a row: declared, installed, loaded with flavour and source; its branches."""
    if not (d.get("installed") or d.get("loaded") or d.get("declared")):
        return []
    driver = "declared %s, installed %s, loaded %s" % (d.get("declared") or "none", d.get("installed") or "none", d.get("loaded") or "none")
    note = ", ".join(x for x in (fleet.flavor_text(d), d.get("source")) if x)
    lines = _wrapped("driver", driver + (" (%s)" % note if note else ""))
    return lines + _all_wrapped("", ("%s %s - %s" % (entry["of"], entry["version"], entry["text"]) for entry in d.get("lifecycle") or []))


def _row_text(row):
    """One node's lines: status, GPUs, driver and flavour, the day-2 guards, what drifted and failed."""
    title = fleet.STATUS_TITLES.get(row["status"], row["status"]).upper()
    lines = ["", "%s  %s%s" % (row["host"], title, "  (node %s)" % row["node"] if row["node"] != row["host"] else "")]
    lines += _wrapped("GPUs", row["gpus"]["text"]) + _driver_text(row["driver"])
    lines += _all_wrapped("security", ("below a floor: " + line for line in floors.row_lines(row.get("security"))))
    guards = "; ".join("%s: %s" % (g["title"], monitoring.STATUS_WORDS.get(g["status"], "not checked")) for g in row.get("day2") or [])
    if guards:
        lines += _wrapped("day-2", guards)
    lines += _all_wrapped("monitoring", monitoring.row_lines(row.get("monitoring"))) + _layers_text(row)
    lines += _all_wrapped("failed", row["failed"]) + _all_wrapped("drifted", row["drifted"])
    return lines + _all_wrapped("fix", row.get("fix") or [])


def _layers_text(row):
    """The toolkit and runtime versions, the packages' held state and what this run changed."""
    lines = []
    toolkit = row["toolkit"].get("installed") or row["toolkit"].get("declared")
    engines = ", ".join("%s %s" % (k, v or "?") for k, v in (row["runtime"].get("versions") or {}).items())
    if toolkit or engines:
        lines += _wrapped("toolkit", "%s%s" % (toolkit or "none", "; " + engines if engines else ""))
    layers = row.get("layers") or {}
    held = "; ".join("%s %s" % (name, layer["held"]) for name, layer in layers.items() if layer.get("held"))
    if held:
        lines += _wrapped("packages", held)
    if row.get("changed"):
        lines += _wrapped("changed", row["changed"])
    return lines


def _terminal_safe(value):
    """``value`` (a report, or any part of one) with every control and format character of its strings
    written as its Python escape (``\\x1b``, ``\\x9b``, ``\\u202e``): the text goes to a terminal, where
    an ESC or a C1 CSI read from a node would move the cursor, retitle the window or hide lines."""
    if isinstance(value, str):
        return "".join(ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) in ("Cc", "Cf") else ch
                       for ch in value)
    if isinstance(value, dict):
        return {_terminal_safe(k): _terminal_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_terminal_safe(v) for v in value]
    return value


def render_text(report):
    """The report as plain text: the fleet, then one block per node, long reasons wrapped at
    :data:`TEXT_WIDTH` columns (never cut); no control character of the report reaches it (:func:`_terminal_safe`)."""
    report = _terminal_safe(_notes_on_one_line(report))
    lines = _fleet_text(report)
    for row in report["nodes"]:
        lines += _row_text(row)
    if report.get("not_checked"):
        lines.append("")
    lines += _all_wrapped("not checked", (item["msg"] + (" (%s)" % ", ".join(item["hosts"]) if item["hosts"] else "")
                                          for item in report.get("not_checked") or []))
    return "\n".join(lines) + "\n"


def _summary_row(row):
    """A node of the summary: its status and first reason, and its first fix (the file has the rest)."""
    title = fleet.STATUS_TITLES.get(row["status"], row["status"]).upper()
    reasons = row["failed"] + row["drifted"] + row["not_checked"]
    more = " (and %d more)" % (len(reasons) - 1) if len(reasons) > 1 else ""
    lines = _wrapped(title, "%s: %s%s" % (row["host"], reasons[0] if reasons else "see the report", more))
    return lines + (_wrapped("fix", row["fix"][0]) if row.get("fix") else [])


#: How many nodes that are not ok the terminal summary names, with their reasons.
SUMMARY_NODES = 20


def render_summary(report, limit=SUMMARY_NODES, path=None):
    """What the report role prints: the fleet's lines, then the first ``limit`` nodes that are not ok
    (failed first), each with its first reason and fix, then how many more and where the whole report is."""
    report = _terminal_safe(_notes_on_one_line(report))
    lines = _fleet_text(report, most=5, brief=True)
    bad = [r for r in report["nodes"] if r["status"] in ("failed", "drift", "not_validated")]
    if bad:
        lines.append("")
    for row in bad[:limit]:
        lines += _summary_row(row)
    if len(bad) > limit:
        more = "... and %d more nodes not ok (%s)" % (len(bad) - limit, floors.hosts_text([r["host"] for r in bad[limit:]], 10))
        lines += [""] + textwrap.wrap(more, width=TEXT_WIDTH, break_long_words=False, break_on_hyphens=False)
    if path:
        lines += ["", "The whole report: %s" % path]
    return "\n".join(lines) + "\n"
