# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report as one self-contained HTML page, for 8 nodes as for 10,000.

The page: the run (collection version, duration, scope), the summary cards, the cluster, then the
nodes grouped by status, the bad ones first, one compact line per node (status, host, OS, GPUs,
driver, toolkit, runtime, what this run changed, the first reason) whose details fold out (every
version, the held state of the packages, the day-2 guards, the security floors, the fix of each
state that is not ok), with a search box and filters (status, OS, driver branch, GPU model, guard)
run by a few lines of inline script; then the driver branches, the security floors and what was
not checked. No external asset; every value from a node is HTML-escaped, and the page is also
well-formed XML (the script sits in a CDATA section).
"""

from __future__ import annotations

import html

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import fleet, floors, monitoring

CSS = """
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328; margin: 0; padding: 20px 24px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 24px 0 8px; }
.meta { color: #57606a; margin: 0 0 14px; }
.cards { display: flex; flex-wrap: wrap; gap: 8px; }
.card { border: 1px solid #d0d7de; border-radius: 8px; padding: 8px 12px; min-width: 96px; background: #f6f8fa; }
.card .n { display: block; font-size: 22px; font-weight: 600; } .card .l { display: block; color: #57606a; white-space: nowrap; }
.card.ok { background: #dafbe1; border-color: #1a7f37; } .card.drift { background: #fff8c5; border-color: #9a6700; }
.card.failed { background: #ffebe9; border-color: #cf222e; }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; font-weight: 600; white-space: nowrap; }
.badge.ok { color: #1a7f37; background: #dafbe1; } .badge.drift { color: #9a6700; background: #fff8c5; }
.badge.failed { color: #cf222e; background: #ffebe9; }
.badge.no_gpu, .badge.not_validated, .badge.skipped, .badge.incomplete { color: #57606a; background: #eaeef2; }
.small, .none { color: #57606a; font-size: 12px; }
ul.msgs { margin: 0; padding-left: 18px; } ul.msgs li { margin: 0 0 2px; overflow-wrap: anywhere; }
.tools { position: sticky; top: 0; background: #fff; padding: 8px 0; display: flex; flex-wrap: wrap; gap: 8px;
  align-items: center; border-bottom: 1px solid #d0d7de; z-index: 2; }
.tools input { width: 260px; padding: 4px 8px; } .tools select { padding: 3px; max-width: 220px; }
details.group { margin: 10px 0; } details.group > summary { font-weight: 600; font-size: 15px; cursor: pointer; padding: 4px 0; }
.head, details.node > summary { display: grid; gap: 10px; align-items: baseline; padding: 3px 6px 3px 10px;
  grid-template-columns: 126px minmax(150px, 1.3fr) minmax(130px, 1fr) minmax(120px, 1fr) 120px 90px 110px minmax(160px, 2fr); }
.head { font-weight: 600; color: #57606a; font-size: 12px; border-bottom: 1px solid #d0d7de; }
.head span, details.node > summary > span { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
details.node > summary { cursor: pointer; list-style: none; border-bottom: 1px solid #eaeef2; }
details.node > summary::-webkit-details-marker { display: none; }
details.node > summary:hover { background: #f6f8fa; }
details.node.failed > summary { border-left: 4px solid #cf222e; } details.node.drift > summary { border-left: 4px solid #9a6700; }
details.node.ok > summary { border-left: 4px solid #1a7f37; }
details.node.no_gpu > summary, details.node.not_validated > summary { border-left: 4px solid #d0d7de; }
details.node[open] > summary { background: #f6f8fa; }
span.host { font-weight: 600; } span.why.failed { color: #cf222e; } span.why.drift { color: #9a6700; }
table.facts { border-collapse: collapse; margin: 6px 0 12px 14px; max-width: 1100px; }
table.facts th { text-align: left; vertical-align: top; padding: 3px 12px 3px 0; white-space: nowrap; color: #57606a; font-weight: 600;
  width: 120px; }
table.facts td { vertical-align: top; padding: 3px 0; overflow-wrap: break-word; }
.fix { color: #0550ae; } .branch { display: block; font-size: 12px; color: #57606a; }
.branch.past { color: #9a6700; font-weight: 600; } .branch.unknown { color: #cf222e; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
footer { margin-top: 28px; color: #57606a; font-size: 12px; }
"""

# The search and the filters: each node line carries its filter values in data attributes
# (``|``-separated), the search reads the node's text. Nothing of a node is ever in the script.
SCRIPT = """
(function () {
  var q = document.getElementById('q'), shown = document.getElementById('shown');
  var selects = Array.prototype.slice.call(document.querySelectorAll('select[data-f]'));
  var nodes = Array.prototype.slice.call(document.querySelectorAll('details.node'));
  var groups = Array.prototype.slice.call(document.querySelectorAll('details.group'));
  var texts = null;  // each node's text, read at the first search (not at load: 10,000 nodes)
  function keep(d, i, t, f) {
    if (t && !texts) { texts = nodes.map(function (n) { return n.textContent.toLowerCase(); }); }
    if (t && texts[i].indexOf(t) < 0) { return false; }
    return f.every(function (x) { return ('|' + (d.getAttribute('data-' + x[0]) || '') + '|').indexOf('|' + x[1] + '|') >= 0; });
  }
  function apply() {
    var t = q.value.toLowerCase().trim(), f = [], n = 0;
    selects.forEach(function (s) { if (s.value) { f.push([s.getAttribute('data-f'), s.value]); } });
    nodes.forEach(function (d, i) { var k = keep(d, i, t, f); d.hidden = !k; if (k) { n += 1; } });
    groups.forEach(function (g) {
      var c = g.querySelectorAll('details.node:not([hidden])').length;
      g.hidden = c === 0; g.querySelector('.count').textContent = c; if (t || f.length) { g.open = true; }
    });
    shown.textContent = n;
  }
  q.addEventListener('input', apply);
  selects.forEach(function (s) { s.addEventListener('change', apply); });
}());
"""

#: The filters of the node list: (data attribute, label, the row's values).
FILTERS = (
    ("status", "status", lambda r: [fleet.STATUS_TITLES.get(r["status"], r["status"])]),
    ("os", "OS", lambda r: [r["os"] or "unknown"]),
    ("branch", "driver branch", lambda r: sorted(set(str(e["branch"]) for e in r["driver"].get("lifecycle") or [])) or ["none"]),
    ("gpu", "GPU model", lambda r: r["gpus"].get("names") or ["none"]),
    ("guard", "guard not ok", lambda r: [g["title"] for g in r.get("day2") or [] if g.get("status") in ("drift", "failed")]),
)

#: A group of ok nodes (or of nodes without GPU) over this many starts folded; the others start open.
OPEN_UP_TO = 50

_HEAD = ('<div class="head"><span>status</span><span>node</span><span>OS</span><span>GPUs</span><span>driver</span>'
         "<span>toolkit</span><span>this run</span><span>why</span></div>")


def _e(value):
    return html.escape("" if value is None else str(value), quote=True)


def _badge(status, text=None):
    return '<span class="badge %s">%s</span>' % (_e(status), _e(text or fleet.STATUS_TITLES.get(status, status)))


def _list(items, css="msgs"):
    """The items as a list; '' without any (the line is left out)."""
    return '<ul class="%s">%s</ul>' % (css, "".join("<li>%s</li>" % _e(m) for m in items)) if items else ""


def _card(number, label, css=""):
    return '<div class="card %s"><span class="n">%s</span><span class="l">%s</span></div>' % (_e(css), _e(number), _e(label))


def _why(row):
    """The first reason of a row that is not ok, for its one line."""
    for key in ("failed", "drifted", "not_checked"):
        if row[key] and row["status"] not in ("ok", "no_gpu"):
            return row[key][0]
    return ""


def _node_line(row):
    """The one line of a node: what a reader scans at 1,000 nodes."""
    d = row["driver"]
    driver = d.get("installed") or d.get("loaded") or (("declared " + str(d["declared"])) if d.get("declared") else "none")
    cells = (_badge(row["status"]), _e(row["host"]), _e(row["os"] or "unknown"), _e(row["gpus"]["text"]), _e(driver),
             _e(row["toolkit"].get("installed") or "none"), _e(row.get("changed") or "-"), _e(_why(row)))
    css = ("", "host", "", "", "", "", "", "why " + row["status"])
    return "".join('<span%s>%s</span>' % (' class="%s"' % c if c else "", v) for c, v in zip(css, cells))


def _node_html(row):
    attrs = "".join(' data-%s="%s"' % (name, _e("|".join(str(v) for v in values(row)))) for name, dummy, values in FILTERS)
    return '<details class="node %s"%s><summary>%s</summary>%s</details>' % (
        _e(row["status"]), attrs, _node_line(row), _facts_table(row))


def _facts_table(row):
    rows = [(k, v) for k, v in _facts(row) if v]
    return '<table class="facts">%s</table>' % "".join("<tr><th>%s</th><td>%s</td></tr>" % (_e(k), v) for k, v in rows)


def _facts(row):
    """The folded details of a node: (label, HTML) pairs, empty ones left out."""
    d, t, layers = row["driver"], row["toolkit"], row.get("layers") or {}
    return [
        ("failed", _list(row["failed"])),
        ("drifted", _list(row["drifted"])),
        ("fix", _list([f for f in row.get("fix") or [] if f not in floors.row_lines(row.get("security"))], "msgs fix")),
        ("node", _e(row["node"]) if row["node"] != row["host"] else ""),
        ("OS, kernel", _e(", ".join(x for x in (row["os"], row["kernel"]) if x))),
        ("GPUs", _e(row["gpus"]["text"])),
        ("driver", _driver_html(d, layers.get("driver"))),
        ("toolkit", _toolkit_html(t, layers.get("toolkit"))),
        ("runtime", _runtime_html(row["runtime"], layers.get("runtime"))),
        ("allocatable", _allocatable_html(row)),
        ("sharing", _e({"none": ""}.get(row["sharing"]["text"], row["sharing"]["text"]))),
        ("CDI", _e("enabled: " + ", ".join(p for p in row["cdi"]["specs"] if p)) if row["cdi"].get("enabled") else ""),
        ("day-2 guards", _guards_html(row.get("day2"))),
        ("security floors", _list(floors.row_short_lines(row.get("security")))),
        ("this run", _changes_html(layers)),
        ("not checked", _list(row["not_checked"]) if row["status"] not in ("ok", "no_gpu") else _e(_count(row["not_checked"]))),
    ]


def _driver_html(d, layer):
    if not (d.get("declared") or d.get("installed") or d.get("loaded")):
        return ""
    text = "declared %s, installed %s, loaded %s" % (d.get("declared") or "none", d.get("installed") or "none", d.get("loaded") or "none")
    note = ", ".join(x for x in (fleet.flavor_text(d), d.get("source"), "CUDA %s" % d["cuda"] if d.get("cuda") else "") if x)
    held = "; packages %s" % layer["held"] if layer and layer.get("held") else ""
    branches = "".join(_branch_html(e) for e in d.get("lifecycle") or [])
    return "%s%s%s%s" % (_e(text), _e(" (%s)" % note if note else ""), _e(held), branches)


def _allocatable_html(row):
    """The node's allocatable GPUs and DRA devices; '' without a cluster (the Cluster section says why, once)."""
    parts = [row["allocatable"]["text"]] if row["allocatable"]["text"] != "no cluster" else []
    return _e("; ".join(parts + [row[k]["text"] for k in ("dra", "monitoring") if row.get(k)]))


def _branch_html(entry):
    """A driver branch of a node: in full where it is past its end of life or unknown, else in a
    few words (the fleet's section "Driver branches" says each branch in full, once)."""
    if entry["state"] in ("past", "unknown"):
        return '<span class="branch %s">%s %s - %s</span>' % (_e(entry["state"]), _e(entry["of"]), _e(entry["version"]), _e(entry["text"]))
    return '<span class="branch">%s %s - R%s %s</span>' % (_e(entry["of"]), _e(entry["version"]), _e(entry["branch"]),
                                                           _e(entry["state"].replace("_", " ")))


def _toolkit_html(t, layer):
    if not (t.get("installed") or t.get("declared") or layer):
        return ""
    held = "; packages %s" % layer["held"] if layer and layer.get("held") else ""
    return _e("installed %s%s%s" % (t.get("installed") or "none", ", declared %s" % t["declared"] if t.get("declared") else "", held))


def _runtime_html(runtime, layer):
    engines = ", ".join("%s %s" % (k, v or "version unknown") for k, v in (runtime.get("versions") or {}).items())
    text = "; ".join(x for x in (runtime["text"] if runtime.get("present") is not None else "", engines) if x)
    if layer and layer.get("files"):
        text += "; changed " + ", ".join(layer["files"])
    return _e(text)


def _count(not_checked):
    """For a node that is ok: how many things were not checked (the section "Not checked, and why" says which)."""
    return "%d, listed under Not checked, and why" % len(not_checked) if not_checked else ""


def _guards_html(guards):
    """The guards that drifted or failed, each with its badge and message; the others in one line each by status."""
    bad = ["%s %s <span class=\"small\">%s</span>" % (_badge(g["status"]), _e(g["title"]), _e(g.get("msg") or ""))
           for g in guards or [] if g["status"] in ("drift", "failed")]
    rest = []
    for status in ("ok", "skipped"):
        titles = [g["title"] for g in guards or [] if (g["status"] or "skipped") == status]
        if titles:
            rest.append("%s %s" % (_badge(status, monitoring.STATUS_WORDS[status]), _e(", ".join(titles))))
    return "<br/>".join(bad + rest)


def _changes_html(layers):
    return "<br/>".join("%s: %s%s" % (_e(name), "changed" if layer["changed"] else "unchanged",
                                      ' <span class="small">%s</span>' % _e(layer["msg"]) if layer.get("msg") else "")
                        for name, layer in layers.items())


def _groups_html(rows):
    out = []
    for status in fleet.STATUSES:  # the bad ones first, as the rows are sorted
        members = [r for r in rows if r["status"] == status]
        if not members:
            continue
        is_open = ' open="open"' if status not in ("ok", "no_gpu") or len(members) <= OPEN_UP_TO else ""
        out.append('<details class="group %s"%s><summary>%s <span class="count">%d</span> nodes</summary>\n%s\n</details>' % (
            _e(status), is_open, _badge(status), len(members), "\n".join(_node_html(r) for r in members)))
    return "\n".join(out) or '<p class="none">no hosts</p>'


def _tools_html(rows):
    selects = []
    for name, label, values in FILTERS:
        options = sorted(set(str(v) for r in rows for v in values(r)))
        selects.append('<select data-f="%s" aria-label="%s"><option value="">%s: all</option>%s</select>' % (
            _e(name), _e(label), _e(label), "".join('<option value="%s">%s</option>' % (_e(o), _e(o)) for o in options)))
    return ('<div class="tools"><input id="q" type="search" placeholder="search nodes, versions, reasons" aria-label="search"/>'
            '%s<span class="small"><span id="shown">%d</span> of %d nodes shown</span></div>' % ("".join(selects), len(rows), len(rows)))


_PAGE = (
    "<!DOCTYPE html>\n"
    '<html lang="en">\n<head>\n<meta charset="utf-8"/>\n'
    '<meta name="viewport" content="width=device-width, initial-scale=1"/>\n'
    "<title>{title}</title>\n<style>{css}</style>\n</head>\n<body>\n"
    "<header><h1>{title}</h1><p class=\"meta\">{meta}</p></header>\n"
    '<section><div class="cards">{cards}</div></section>\n'
    "{notes}"
    "<section><h2>Cluster</h2><ul class=\"msgs\">{cluster}</ul></section>\n"
    "<section><h2>Nodes</h2>\n{tools}\n{head}\n{groups}\n</section>\n"
    '<section><h2>Driver branches</h2><ul class="msgs">{lifecycle}</ul></section>\n'
    '<section><h2>Security floors</h2><ul class="msgs">{security}</ul></section>\n'
    '<section><h2>Not checked, and why</h2><ul class="msgs">{not_checked}</ul></section>\n'
    "<footer>gpufleet.nvidia fleet report, schema {schema}; the same data is in the JSON file beside this page.</footer>\n"
    "<script>//<![CDATA[{script}//]]></script>\n"
    "</body>\n</html>\n"
)


def render_html(report):
    """The report as one self-contained HTML page (also well-formed XML)."""
    run = report.get("run") or {}
    return _PAGE.format(
        title=_e(report.get("title")),
        css=CSS,
        meta=_e(" | ".join(fleet.meta_lines(report, run))),
        cards="".join(_cards(report)),
        notes=_notes_html(run),
        cluster="".join("<li>%s</li>" % line for line in _cluster_lines(report.get("cluster") or {})),
        tools=_tools_html(report["nodes"]),
        head=_HEAD,
        groups=_groups_html(report["nodes"]),
        lifecycle=_lifecycle_html(report),
        security="".join("<li>%s %s</li>" % (_badge("drift", "below"), _e(line)) for line in floors.fleet_lines(report))
        or "<li>no node below a security floor</li>",
        not_checked=_not_checked_html(report),
        schema=_e(report.get("schema")),
        script=SCRIPT,
    )


def _cards(report):
    s = report["summary"]
    past = len(set(h for item in report.get("lifecycle") or [] if item["state"] == "past" for h in item["hosts"]))
    below = len(set(h for item in report.get("security") or [] for h in item["hosts"]))
    return [
        _card(fleet.STATUS_TITLES.get(report["status"], report["status"]).upper(), "fleet", report["status"]),
        _card(s["nodes"], "nodes"),
        _card(s["gpu_nodes"], "GPU nodes"),
        _card(s["gpus"], "GPUs"),
        _card(s["ok"], "ok", "ok" if s["ok"] else ""),
        _card(s["drifted"], "drifted", "drift" if s["drifted"] else ""),
        _card(s["failed"], "failed", "failed" if s["failed"] else ""),
        _card(s.get("without_gpu", s["no_gpu"]), "without GPU"),
        _card(s["not_validated"], "not validated"),
        _card(past, "past end of life", "drift" if past else ""),
        _card(below, "below a security floor", "drift" if below else ""),
    ]


_BRANCH_BADGES = {"past": "drift", "unknown": "failed", "supported": "ok"}


def _lifecycle_html(report):
    return "".join(
        "<li>%s %s <span class=\"small\">(%s)</span></li>"
        % (_badge(_BRANCH_BADGES.get(item["state"], "skipped"), item["state"].replace("_", " ")), _e(item["msg"]), _e(floors.hosts_text(item["hosts"])))
        for item in report.get("lifecycle") or []
    ) or "<li>no driver version known</li>"


def _cluster_lines(cluster):
    """The cluster section's lines (HTML): the stack and the CUDA pod with their pods not ready, the fleet's failures."""
    if not cluster.get("checked"):
        return ["%s %s" % (_badge("skipped"), _e(cluster.get("reason") or "not checked"))]
    lines = []
    for part in (cluster.get("stack"), cluster.get("cuda_pod")):
        if part and part.get("msg"):
            lines.append("%s %s" % (_badge(part.get("status") or "skipped"), _e(part["msg"])))
            lines += [_pod_line(pod) for pod in part.get("not_ready") or []]
    for msg in cluster.get("failed") or []:
        lines.append("%s %s" % (_badge("failed"), _e(msg)))
    return lines or ["read"]


def _pod_line(pod):
    return '<span class="small">%s%s: %s</span>' % (
        _e(pod.get("name")), " on " + _e(pod["node"]) if pod.get("node") else "", _e(pod.get("why")))


def _not_checked_html(report):
    return "".join(
        "<li>%s%s</li>" % (_e(item["msg"]), ' <span class="small">(%s)</span>' % _e(floors.hosts_text(item["hosts"])) if item["hosts"] else "")
        for item in report.get("not_checked") or []
    ) or "<li>everything was checked</li>"


def _notes_html(run):
    notes = "".join("<li>%s</li>" % _e(note) for note in run.get("notes") or [])
    if not notes:
        return ""
    return '<section class="notes"><h2>About this fleet</h2><ul class="msgs">%s</ul></section>\n' % notes
