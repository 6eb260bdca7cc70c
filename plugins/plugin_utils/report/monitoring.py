# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's feature labels and GPU metrics in the report, as the validate role checked them
(``gfd_labels`` and ``metrics`` of the node's cluster checks, :mod:`validate.monitoring`)."""

from __future__ import annotations

#: The checks shown, with their titles.
CHECKS = (("gfd_labels", "GFD labels"), ("metrics", "DCGM metrics"))
#: A check's status in words, for these checks and the day-2 guards.
STATUS_WORDS = {"ok": "ok", "drift": "drift", "failed": "failed", "skipped": "not checked"}


def row_monitoring(cnode):
    """``{labels, metrics, text}`` of a node (each ``{status, msg}`` or None where not checked at
    all); None where the cluster verdict has neither check for the node."""
    by_name = dict((c.get("name"), c) for c in (cnode or {}).get("checks") or [] if isinstance(c, dict))
    found = dict((key, by_name.get(name)) for name, key in (("gfd_labels", "labels"), ("metrics", "metrics")))
    if not any(found.values()):
        return None
    entry = dict((key, {"status": c.get("status"), "msg": c.get("msg")} if c else None) for key, c in found.items())
    entry["text"] = "; ".join("%s: %s" % (title, STATUS_WORDS.get(by_name[name].get("status"), by_name[name].get("status")))
                              for name, title in CHECKS if by_name.get(name))
    return entry


def row_lines(entry):
    """The report's text lines of a node's entry: each check with its message."""
    if not entry:
        return []
    return ["%s: %s" % (STATUS_WORDS.get(c["status"], c["status"]), c["msg"]) for c in (entry["labels"], entry["metrics"]) if c]
