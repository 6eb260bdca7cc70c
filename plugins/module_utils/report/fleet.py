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

import html
import json
import textwrap
import unicodedata

from collections.abc import Mapping

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import data as common_data
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import lifecycle, versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.report import floors, monitoring
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

SCHEMA = 1

# The per-host variables the report reads (all optional).
HOST_VARS = (
    "gpufleet_nvidia",  # facts: gpufleet.nvidia.gpu_facts / discover, refreshed by validate
    "gpufleet_nvidia_validation",  # gpufleet.nvidia.host_validate (+ cluster_expect from the role)
    "validate_cluster_verdict",  # the validate role's cluster checks (same on every host)
    "gpufleet_stopped_at",  # set by a playbook where the run stopped on the host
    "nvidia_driver_version",  # declared driver, for hosts that were not validated
    "container_toolkit_version",  # declared toolkit, idem
    "container_toolkit_runtime",  # declared runtime, idem
    "gpufleet_sharing_config",  # sharing config of the node, idem
    "dra_driver_node",  # the dra_driver role's validation of the node (GPUs published in ResourceSlices, its claim)
    "discover_kubernetes_version",  # the cluster's Kubernetes, for the security floors' Kubernetes / containerd pairing
)

STATUSES = ("failed", "not_validated", "drift", "ok", "no_gpu")
STATUS_TITLES = {
    "incomplete": "incomplete",
    "ok": "ok",
    "drift": "drift",
    "failed": "failed",
    "no_gpu": "no GPU",
    "not_validated": "not validated",
}
_RANK = {"skipped": 0, "ok": 1, "drift": 2, "failed": 3}


def plain(value):
    """``value`` rebuilt from builtin types; anything else as its text, so the report always serialises."""
    return common_data.plain(value, unknown=str)


# The validate role's cluster verdict: one object, set on every host of the play by a run_once
# task, holding one node verdict per host.
VERDICT = "validate_cluster_verdict"


def _stored(hostvars, host, key):
    """The mapping stored as ``key`` for ``host``, untemplated; None when it is not one or cannot be read."""
    try:
        raw_get = getattr(hostvars, "raw_get", None)  # Ansible's HostVars: the variables as stored
        stored = (raw_get(host) if raw_get is not None else hostvars[host])[key]
    except Exception:  # pylint: disable=broad-except
        return None
    return stored if isinstance(stored, Mapping) else None


def host_data(hosts, hostvars, keys=HOST_VARS):
    """``{host: {var: value}}`` with only ``keys``, as plain data, from ``hostvars``.

    The cluster verdict is read once per verdict, not once per host: every host of a play carries
    the same verdict (one object, whose node verdicts cover the whole play), and reading it on
    every host would copy the fleet once per host, a cost that grows with the square of the fleet
    (7 s of CPU at 256 nodes, 136 s at 1,024, 574 s at 2,048; now 0.2, 0.7 and 1.4 s). A host whose verdict is one already read is left without
    it here; :func:`_cluster_of` merges the node verdicts of the verdicts read, so the report is
    the same. Verdicts that differ (the batches of a play with ``serial``) are each read.
    """
    data = {}
    read = {}  # id -> the stored verdicts already read (kept, so that their ids stay theirs)
    for host in hosts or []:
        host = str(host)
        try:
            hv = hostvars[host]
        except KeyError:
            data[host] = {}
            continue
        entry = {}
        for key in keys:
            try:
                if key in common_data.FACT_NAMES:
                    fact = common_data.host_fact(hv, key)
                    if fact is not None:
                        entry[key] = plain(fact)
                elif key in hv:
                    stored = _stored(hostvars, host, key) if key == VERDICT else None
                    if stored is not None and read.get(id(stored)) is stored:
                        continue
                    entry[key] = plain(hv[key])
                    if stored is not None:
                        read[id(stored)] = stored
            # An undefined or broken variable is left out of the report.
            except Exception:  # pylint: disable=broad-except
                continue
        data[host] = entry
    return data


def _worst(*statuses):
    ranked = [s for s in statuses if s in _RANK and s != "skipped"]
    return max(ranked, key=lambda s: _RANK[s]) if ranked else "skipped"


def gpu_text(facts):
    """``(count, names, '2 x NVIDIA L40S')``, names from nvidia-smi where it answered, else PCI."""
    smi = [g.get("name") for g in _dig(facts, "driver", "nvidia_smi", "gpus") or []]
    pci = [g.get("name") or "unknown NVIDIA GPU" for g in facts.get("gpus") or []]
    count = facts.get("gpu_count") or len(pci)
    groups = _name_groups(smi if smi and len(smi) >= len(pci) else pci)
    text = ", ".join("%d x %s" % (n, name) for name, n in groups) if groups else "none"
    return count, [g[0] for g in groups], text


def _name_groups(names):
    """``[[name, count]]`` in the order the names first come."""
    groups = []
    for name in names:
        name = name or "unknown NVIDIA GPU"
        group = next((g for g in groups if g[0] == name), None)
        if group is None:
            groups.append([name, 1])
        else:
            group[1] += 1
    return groups


def _os_text(facts):
    os_facts = facts.get("os") or {}
    return os_facts.get("pretty_name") or " ".join(x for x in (os_facts.get("id"), os_facts.get("version_id")) if x) or None


def _stopped(value):
    if not value:
        return None
    if isinstance(value, dict):
        stage = value.get("stage") or value.get("task") or "unknown stage"
        detail = " / ".join(str(value[k]) for k in ("task", "msg") if value.get(k) and value.get(k) != stage)
        return "the run stopped at %s%s" % (stage, ": " + detail if detail else "")
    return "the run stopped at %s" % value


def _allocatable(cluster, cnode, expect, gpu_count):
    """The node's allocatable GPUs against what it should advertise (GPUs x replicas of the resource).

    ``cnode`` is the node's cluster verdict, None when it has none, False when the host was neither
    discovered nor validated.
    """
    if not cluster or not cluster.get("checked"):
        return _alloc(None, None, None, "no cluster")
    if not gpu_count:
        return _alloc(None, None, None, "no GPU" if cnode is not False else "unknown")
    resource = (expect or {}).get("resource") or "nvidia.com/gpu"
    expected = gpu_count * ((expect or {}).get("replicas") or 1)
    if not cnode:
        return _alloc(None, expected, resource, "not checked")
    if not cnode.get("found"):
        return _alloc(None, expected, resource, "node not in cluster")
    value = _int_or_none((cnode.get("allocatable") or {}).get(resource))
    return _alloc(value, expected, resource, "%s of %s" % (value if value is not None else "none", expected))


def _alloc(value, expected, resource, text):
    return {"value": value, "expected": expected, "resource": resource, "text": text}


def _int_or_none(raw):
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


def _sharing(expect, hv):
    config = (expect or {}).get("sharing_config") if expect else hv.get("gpufleet_sharing_config")
    replicas = (expect or {}).get("replicas") or 1
    if not config and replicas == 1:
        return {"config": config or None, "replicas": replicas, "text": "none"}
    return {
        "config": config or None,
        "replicas": replicas,
        "text": "%s%s" % (config or "default", " (x%d)" % replicas if replicas != 1 else ""),
    }


_NO_FACTS = "no facts: the host was unreachable, or the run stopped before it was discovered"
_NOT_VALIDATED = "not validated: the run did not reach gpufleet.nvidia.validate on this host"


def build_row(host, hv, cluster, today=None):
    """One node's row, from its variables (``hv``) and the cluster verdict (None without one).

    ``today`` (a date) is what the driver branches' end of life is compared with.
    """
    facts = hv.get("gpufleet_nvidia") or {}
    val = hv.get("gpufleet_nvidia_validation") or {}
    cnode = _dig(cluster, "nodes", host) if cluster else None
    expect = val.get("cluster_expect") or {}
    stopped = _stopped(hv.get("gpufleet_stopped_at"))
    gpus = _row_gpus(facts, val)
    failed, drifted, not_checked = _row_messages(val, cnode, cluster, stopped)
    status, not_checked = _row_status(facts, val, cnode, stopped, gpus["count"], not_checked)
    driver, toolkit = _row_driver(facts, val, hv, today), _row_toolkit(facts, val, hv)
    return {
        "host": host,
        "node": expect.get("node") or (cnode or {}).get("node") or host,
        "status": status,
        "os": _os_text(facts),
        "kernel": _dig(facts, "kernel", "release"),
        "gpus": gpus,
        "driver": driver,
        "toolkit": toolkit,
        "security": floors.row_security(driver, toolkit, facts, hv, today),
        "runtime": _row_runtime(val, hv),
        "cdi": {"enabled": _dig(val, "cdi", "enabled"), "specs": [s.get("path") for s in _dig(val, "cdi", "specs") or []]},
        "cuda_host": _dig(val, "cuda", "passed"),
        "allocatable": _allocatable(cluster, cnode if (facts or val) else False, expect, gpus["count"]),
        "sharing": _sharing(expect, hv),
        "dra": _row_dra(hv.get("dra_driver_node")),
        "monitoring": monitoring.row_monitoring(cnode),
        "day2": _row_day2(val),
        "drifted": drifted,
        "failed": failed,
        "not_checked": not_checked,
    }


def _row_dra(entry):
    """What the dra_driver role found on the node: ``DRA: n devices published`` and its claim; None off DRA."""
    if not isinstance(entry, dict) or "published" not in entry:
        return None
    text = str(entry.get("text") or "DRA: %s devices published" % entry.get("published"))
    if entry.get("claim"):
        text += ", claim %s" % entry["claim"]
    return {"published": entry.get("published"), "expected": entry.get("expected"), "status": entry.get("status"),
            "claim": entry.get("claim"), "text": text}


#: The day-2 checks of host validation (validate/day2.py), in the order a row gives them, with their titles.
DAY2_CHECKS = (
    ("kernel_next_boot", "next boot kernel's module"),
    ("driver_libraries", "library / module versions"),
    ("nvml_reload", "NVML after daemon-reload"),
    ("isolation", "isolation of unprivileged containers"),
    ("runtime_drift", "runtime drift"),
)


def _row_day2(val):
    """The node's day-2 guards, ``[{name, title, status, msg}]`` from its validation ([] without one)."""
    by_name = dict((c.get("name"), c) for c in val.get("checks") or [] if isinstance(c, dict))
    return [{"name": name, "title": title, "status": by_name[name].get("status"), "msg": by_name[name].get("msg")}
            for name, title in DAY2_CHECKS if name in by_name]


def _row_gpus(facts, val):
    """The node's GPUs from its facts; without facts, the count its validation found; with
    neither, unknown (``known`` false): a host that was never read is not a host without GPU."""
    count, names, text = gpu_text(facts)
    if not facts and val:
        count = val.get("gpu_count") or 0
        text = "%d" % count
    elif not facts:
        return {"count": 0, "names": [], "text": "unknown (no facts)", "known": False}
    return {"count": count, "names": names, "text": text, "known": True}


def _row_messages(val, cnode, cluster, stopped):
    """``(failed, drifted, not_checked)`` of the host's validation and its node's cluster verdict;
    what the whole cluster was not checked for is said once, for the fleet."""
    failed = ([stopped] if stopped else []) + list(val.get("failed") or [])
    drifted = list(val.get("drifted") or [])
    not_checked = list(val.get("not_checked") or [])
    if cnode:
        failed += cnode.get("failed") or []
        drifted += cnode.get("drifted") or []
        not_checked += [m for m in cnode.get("not_checked") or [] if m != (cluster or {}).get("reason")]
    return failed, drifted, not_checked


def _row_status(facts, val, cnode, stopped, gpu_count, not_checked):
    """``(status, not_checked)``: the worst of the validation, the cluster verdict and a stopped run."""
    if not val:
        return _unvalidated(facts, stopped, not_checked)
    if not gpu_count and val.get("status") == "skipped" and not stopped:
        return "no_gpu", not_checked
    status = _worst(val.get("status"), (cnode or {}).get("status"), "failed" if stopped else "skipped")
    if status == "skipped":
        status = "no_gpu" if not gpu_count else "ok"
    return status, not_checked


def _unvalidated(facts, stopped, not_checked):
    """A host the validate role did not reach: failed where the run stopped on it, else not validated."""
    if not facts:
        return "not_validated", [] if stopped else [_NO_FACTS]
    if stopped:
        return "failed", not_checked
    return "not_validated", [_NOT_VALIDATED]


def _row_driver(facts, val, hv, today):
    driver = val.get("driver") or {}
    smi = _dig(facts, "driver", "nvidia_smi") or {}
    installed = driver.get("installed")
    if installed is None and facts:
        installed = (_dig(facts, "driver", "installed", "version") or smi.get("driver_version"))
    row = {
        "declared": (val.get("declared") or {}).get("driver_version") or hv.get("nvidia_driver_version") or None,
        "installed": installed,
        "loaded": driver.get("loaded") or _dig(facts, "driver", "version"),
        "source": _dig(facts, "driver", "source"),
        "cuda": driver.get("cuda") or smi.get("cuda_version"),
    }
    row["flavor"], row["flavor_why"] = _row_flavor(facts, row)
    row["lifecycle"] = _row_lifecycle(row, today)
    return row


def _row_flavor(facts, row):
    """``(flavor, why)``: the kernel modules' flavour (open, proprietary); ``unknown`` with why
    where a driver is there but nothing said which; None without a driver."""
    driver = (facts or {}).get("driver") or {}
    for flavor in (driver.get("flavor"), _dig(driver, "installed", "flavor")):
        if flavor:
            return flavor, None
    if row["loaded"]:
        return "unknown", "the loaded module's /proc/driver/nvidia/version names neither open nor proprietary modules"
    there = row["installed"] or driver.get("packages") or driver.get("package") or driver.get("libcuda")
    if there or driver.get("source") not in (None, "absent"):
        if not facts:
            return "unknown", "no facts of the node: only its validation was read"
        return "unknown", "no nvidia module is loaded and modinfo found no installed one to read it from"
    return None, None


def _row_lifecycle(driver, today):
    """The type and end of life of the node's declared and installed (else loaded) driver branches, one entry a branch."""
    entries = []
    for of, value in (("declared", driver["declared"]), ("installed", driver["installed"] or driver["loaded"])):
        version = versions.try_parse_driver_version(value)
        if version is None:
            continue
        same = next((e for e in entries if e["branch"] == version.branch), None)
        if same is not None:
            same["of"] += " and " + of
            same["version"] = str(version)
            continue
        entries.append(dict(lifecycle.judge(version.branch, today), of=of, version=str(version)))
    return entries


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


def _row_toolkit(facts, val, hv):
    return {
        "declared": (val.get("declared") or {}).get("toolkit_version") or hv.get("container_toolkit_version") or None,
        "installed": _dig(val, "toolkit", "installed") or _dig(facts, "container", "toolkit", "version"),
    }


def _row_runtime(val, hv):
    runtime = val.get("runtime") or {}
    present = runtime.get("present")
    name = runtime.get("name") or hv.get("container_toolkit_runtime")
    return {
        "name": name,
        "handler": runtime.get("handler") or "nvidia",
        "present": present,
        "text": "not checked" if present is None else ("%s: %s" % (name, "yes" if present else "no")),
    }


def _cluster_of(data):
    """The cluster verdict: the first one found, with the node verdicts of all of them."""
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
    data = data if data is not None else host_data(hosts, hostvars)
    cluster = _cluster_of(data)
    day = report_date(today, generated_at)
    rows = [build_row(str(h), data.get(str(h)) or {}, cluster, day) for h in hosts or []]
    rows.sort(key=lambda r: (STATUSES.index(r["status"]), r["host"]))
    counts = dict((s, len([r for r in rows if r["status"] == s])) for s in STATUSES)
    run = plain(run or {})
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


# --- HTML ---------------------------------------------------------------------------------------

CSS = """
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328;
  margin: 0; padding: 24px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; }
.meta { color: #57606a; margin: 0 0 16px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { border: 1px solid #d0d7de; border-radius: 8px; padding: 10px 14px; min-width: 110px; background: #f6f8fa; }
.card .n { display: block; font-size: 24px; font-weight: 600; }
.card .l { color: #57606a; }
.card.ok { background: #dafbe1; border-color: #1a7f37; }
.card.drift { background: #fff8c5; border-color: #9a6700; }
.card.failed { background: #ffebe9; border-color: #cf222e; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid #d0d7de; padding: 6px 8px; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
th { background: #f6f8fa; position: sticky; top: 0; font-weight: 600; }
tr.failed td:first-child { border-left: 4px solid #cf222e; }
tr.drift td:first-child { border-left: 4px solid #9a6700; }
tr.ok td:first-child { border-left: 4px solid #1a7f37; }
tr.no_gpu td:first-child, tr.not_validated td:first-child { border-left: 4px solid #d0d7de; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; white-space: nowrap; }
.badge.ok { color: #1a7f37; background: #dafbe1; }
.badge.drift { color: #9a6700; background: #fff8c5; }
.badge.failed { color: #cf222e; background: #ffebe9; }
.badge.no_gpu, .badge.not_validated, .badge.skipped, .badge.incomplete { color: #57606a; background: #f6f8fa; }
.small { color: #57606a; font-size: 12px; }
ul.msgs { margin: 0; padding-left: 16px; }
ul.msgs li { margin: 0 0 2px; white-space: normal; overflow-wrap: anywhere; }
ul.day2 { margin: 0; padding: 0; list-style: none; font-size: 12px; }
td.failedmsg { color: #cf222e; }
td.driftmsg { color: #9a6700; }
.none { color: #57606a; }
td.host { white-space: nowrap; font-weight: 600; }
.branch { display: block; font-size: 12px; color: #57606a; }
.branch.past { color: #9a6700; font-weight: 600; }
.branch.unknown { color: #cf222e; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
footer { margin-top: 32px; color: #57606a; font-size: 12px; }
"""


def _e(value):
    return html.escape("" if value is None else str(value), quote=True)


def _badge(status):
    return '<span class="badge %s">%s</span>' % (_e(status), _e(STATUS_TITLES.get(status, status)))


def _msgs(items):
    if not items:
        return '<span class="none">-</span>'
    return '<ul class="msgs">%s</ul>' % "".join("<li>%s</li>" % _e(m) for m in items)


def _or_none(value, none="-"):
    if value in (None, ""):
        return '<span class="none">%s</span>' % _e(none)
    return _e(value)


def _card(number, label, css=""):
    return '<div class="card %s"><span class="n">%s</span><span class="l">%s</span></div>' % (_e(css), _e(number), _e(label))


def _row_html(row):
    d = row["driver"]
    driver = "%s / %s / %s" % (
        _or_none(d["declared"], "none"),
        _or_none(d["installed"], "none"),
        _or_none(d["loaded"], "none"),
    )
    driver_note = ", ".join(x for x in (_flavor_text(d), d.get("source")) if x)
    if d.get("cuda"):
        driver_note += (", " if driver_note else "") + "CUDA " + str(d["cuda"])
    branches = "".join(_branch_html(entry) for entry in d.get("lifecycle") or [])
    branches += "".join('<span class="branch past">below a security floor: %s</span>' % _e(line)
                        for line in floors.row_lines(row.get("security")))
    t = row["toolkit"]
    toolkit = _or_none(t["installed"], "none")
    if t.get("declared"):
        toolkit += '<br/><span class="small">declared %s</span>' % _e(t["declared"])
    node = _e(row["host"])
    if row["node"] != row["host"]:
        node += '<br/><span class="small">node %s</span>' % _e(row["node"])
    return (
        '<tr class="{status}"><td>{badge}</td><td class="host">{node}</td><td>{os}<br/><span class="small">{kernel}</span></td>'
        "<td>{gpus}</td><td>{driver}<br/><span class=\"small\">{note}</span>{branches}</td><td>{toolkit}</td>"
        "<td>{runtime}</td><td>{alloc}</td><td>{sharing}</td><td>{day2}</td>"
        '<td class="driftmsg">{drifted}</td><td class="failedmsg">{failed}</td></tr>'
    ).format(
        status=_e(row["status"]),
        badge=_badge(row["status"]),
        node=node,
        os=_or_none(row["os"], "unknown"),
        kernel=_e(row["kernel"] or ""),
        gpus=_e(row["gpus"]["text"]),
        driver=driver,
        note=_e(driver_note),
        branches=branches,
        toolkit=toolkit,
        runtime=_e(row["runtime"]["text"]),
        alloc=_e("; ".join([row["allocatable"]["text"]] + [row[k]["text"] for k in ("dra", "monitoring") if row.get(k)])),
        sharing=_e(row["sharing"]["text"]),
        day2=_day2_html(row.get("day2")),
        drifted=_msgs(row["drifted"]),
        failed=_msgs(row["failed"]),
    )


def _flavor_text(driver):
    """The flavour as the row says it: ``open``, ``proprietary``, ``flavour unknown: why``; '' without a driver."""
    if driver.get("flavor") == "unknown":
        return "flavour unknown (%s)" % driver["flavor_why"] if driver.get("flavor_why") else "flavour unknown"
    return driver.get("flavor") or ""


def _day2_html(guards):
    """The day-2 guards of a row, one line each with its status (what drifted or failed is in those columns)."""
    if not guards:
        return '<span class="none">-</span>'
    return '<ul class="day2">%s</ul>' % "".join(
        "<li>%s %s</li>" % (_badge_text(g["status"] or "skipped", DAY2_STATUS.get(g["status"], "not checked")), _e(g["title"]))
        for g in guards)


#: A day-2 guard's status as its badge says it.
DAY2_STATUS = {"ok": "ok", "drift": "drift", "failed": "failed", "skipped": "not checked"}


def _branch_html(entry):
    """One driver branch of a row: who has it, its type and end of life; past and unknown ones stand out."""
    css = entry["state"] if entry["state"] in ("past", "unknown") else ""
    return '<span class="%s">%s %s - %s</span>' % (_e(("branch " + css).strip()), _e(entry["of"]), _e(entry["version"]), _e(entry["text"]))


_BRANCH_BADGES = {"past": "drift", "unknown": "failed", "supported": "ok"}


def _lifecycle_html(report):
    """The fleet's driver branches, each with its state and hosts."""
    return "".join(
        "<li>%s %s <span class=\"small\">(%s)</span></li>"
        % (_badge_text(_BRANCH_BADGES.get(item["state"], "skipped"), item["state"].replace("_", " ")), _e(item["msg"]),
           _e(", ".join(item["hosts"])))
        for item in report.get("lifecycle") or []
    ) or "<li>no driver version known</li>"


def _badge_text(css, text):
    return '<span class="badge %s">%s</span>' % (_e(css), _e(text))


_TABLE_HEADER = (
    "<tr><th>status</th><th>node</th><th>OS</th><th>GPUs</th>"
    '<th>driver<br/><span class="small">declared / installed / loaded</span></th><th>toolkit</th>'
    "<th>runtime handler</th><th>allocatable GPUs</th><th>sharing</th><th>day-2 guards</th><th>drifted</th><th>failed, and why</th></tr>"
)

_PAGE = (
    "<!DOCTYPE html>\n"
    '<html lang="en">\n<head>\n<meta charset="utf-8"/>\n'
    '<meta name="viewport" content="width=device-width, initial-scale=1"/>\n'
    "<title>{title}</title>\n<style>{css}</style>\n</head>\n<body>\n"
    "<header><h1>{title}</h1><p class=\"meta\">{meta}</p></header>\n"
    '<section><div class="cards">{cards}</div></section>\n'
    "{notes}"
    "<section><h2>Cluster</h2><ul class=\"msgs\">{cluster}</ul></section>\n"
    "<section><h2>Nodes</h2>\n<table>\n<thead>{header}</thead>\n<tbody>\n{rows}\n</tbody>\n</table></section>\n"
    '<section><h2>Driver branches</h2><ul class="msgs">{lifecycle}</ul></section>\n'
    '<section><h2>Security floors</h2><ul class="msgs">{security}</ul></section>\n'
    '<section><h2>Not checked, and why</h2><ul class="msgs">{not_checked}</ul></section>\n'
    "<footer>gpufleet.nvidia fleet report, schema {schema}; the same data is in the JSON file beside this page.</footer>\n"
    "</body>\n</html>\n"
)


def render_html(report):
    """The report as one self-contained HTML page (also well-formed XML)."""
    run = report.get("run") or {}
    rows = "\n".join(_row_html(r) for r in report["nodes"]) or '<tr><td colspan="12">no hosts</td></tr>'
    return _PAGE.format(
        title=_e(report.get("title")),
        css=CSS,
        meta=_e(" | ".join(_meta(report, run))),
        cards="".join(_cards(report)),
        notes=_notes_html(run),
        cluster="".join("<li>%s</li>" % line for line in _cluster_lines(report.get("cluster") or {})),
        header=_TABLE_HEADER,
        rows=rows,
        lifecycle=_lifecycle_html(report),
        security="".join("<li>%s %s</li>" % (_badge_text("drift", "below"), _e(line)) for line in floors.fleet_lines(report))
        or "<li>no node below a security floor</li>",
        not_checked=_not_checked_html(report),
        schema=_e(report.get("schema")),
    )


def _meta(report, run):
    """The line under the title: when, how (check mode, a partial run, a run still going) and with what."""
    meta = ["generated %s" % report.get("generated_at")] if report.get("generated_at") else []
    if run.get("state") == "running":
        meta.append("this run started and has not written its report: it is still running, or it stopped "
                    "before the end; the report of an earlier run is gone so that it is not taken for this one's")
    if run.get("check_mode"):
        meta.append("check mode: nothing was changed")
    if run.get("partial"):
        meta.append("partial run (--limit %s): it covers %s only" % (run.get("limit"), ", ".join(run.get("covers") or []) or "no node"))
    for key in ("playbook", "ansible_version"):
        if run.get(key):
            meta.append("%s %s" % (key.replace("_", " "), run[key]))
    return meta


def _cards(report):
    s = report["summary"]
    # nodes with a declared or installed driver branch past its end of life
    past = len(set(h for item in report.get("lifecycle") or [] if item["state"] == "past" for h in item["hosts"]))
    below = len(set(h for item in report.get("security") or [] for h in item["hosts"]))
    return [
        _card(STATUS_TITLES.get(report["status"], report["status"]).upper(), "fleet", report["status"]),
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
        "<li>%s%s</li>"
        % (_e(item["msg"]), ' <span class="small">(%s)</span>' % _e(", ".join(item["hosts"])) if item["hosts"] else "")
        for item in report.get("not_checked") or []
    ) or "<li>everything was checked</li>"


def _notes_html(run):
    """The run's notes about the fleet, as their own section ('' without notes)."""
    notes = "".join("<li>%s</li>" % _e(note) for note in run.get("notes") or [])
    if not notes:
        return ""
    return '<section class="notes"><h2>About this fleet</h2><ul class="msgs">%s</ul></section>\n' % notes


# --- text -----------------------------------------------------------------------------------------

TEXT_WIDTH = 100


def _wrapped(label, text, width=TEXT_WIDTH):
    """``label`` and ``text`` as lines of at most ``width`` characters (a longer word, a path, stays
    whole), the text's continuation lines under its first: wrapped, never clipped."""
    head = "  %-11s " % label
    return textwrap.wrap(str(text), width=width, initial_indent=head, subsequent_indent=" " * len(head),
                         break_long_words=False, break_on_hyphens=False) or [head.rstrip()]


def summary_line(report):
    """The fleet in one sentence: its status, its nodes with and without GPU, the rows by status."""
    s = report["summary"]
    return ("%s: %d nodes, %d with GPUs (%d GPUs), %d without GPU%s: %d ok, %d drifted, %d failed, %d with nothing to "
            "validate (no GPU), %d not validated" % (
                STATUS_TITLES.get(report["status"], report["status"]).upper(), s["nodes"], s["gpu_nodes"], s["gpus"],
                s.get("without_gpu", s["no_gpu"]), ", %d never read" % s["gpu_unknown"] if s.get("gpu_unknown") else "",
                s["ok"], s["drifted"], s["failed"], s["no_gpu"], s["not_validated"]))


def _fleet_text(report):
    """The lines about the fleet: title, summary, the cluster, the branches past their end of life."""
    run = report.get("run") or {}
    lines = ["%s - %s" % (report.get("title") or "GPU fleet report", " | ".join(_meta(report, run)) or "no run details")]
    lines += textwrap.wrap(summary_line(report), width=TEXT_WIDTH, break_long_words=False, break_on_hyphens=False)
    lines += _cluster_text(report.get("cluster") or {})
    for item in report.get("lifecycle") or []:
        if item["state"] in ("past", "unknown"):
            lines += _wrapped("branch", "%s (%s)" % (item["msg"], ", ".join(item["hosts"])))
    for line in floors.fleet_lines(report):
        lines += _wrapped("security", line)
    return lines


def _cluster_text(cluster):
    lines = _wrapped("cluster", "checked" if cluster.get("checked") else cluster.get("reason") or "not checked")
    for part in (cluster.get("stack"), cluster.get("cuda_pod")):
        if part and part.get("msg"):
            lines += _wrapped("", "%s: %s" % (part.get("status") or "skipped", part["msg"]))
    for msg in cluster.get("failed") or []:
        lines += _wrapped("failed", msg)
    return lines


def _driver_text(d):
    """The driver's lines of a row: declared, installed, loaded with flavour and source; its branches."""
    if not (d.get("installed") or d.get("loaded") or d.get("declared")):
        return []
    driver = "declared %s, installed %s, loaded %s" % (d.get("declared") or "none", d.get("installed") or "none", d.get("loaded") or "none")
    note = ", ".join(x for x in (_flavor_text(d), d.get("source")) if x)
    lines = _wrapped("driver", driver + (" (%s)" % note if note else ""))
    for entry in d.get("lifecycle") or []:
        lines += _wrapped("", "%s %s - %s" % (entry["of"], entry["version"], entry["text"]))
    return lines


def _row_text(row):
    """One node's lines: status, GPUs, driver and flavour, the day-2 guards, what drifted and failed."""
    title = STATUS_TITLES.get(row["status"], row["status"]).upper()
    lines = ["", "%s  %s%s" % (row["host"], title, "  (node %s)" % row["node"] if row["node"] != row["host"] else "")]
    lines += _wrapped("GPUs", row["gpus"]["text"]) + _driver_text(row["driver"])
    for line in floors.row_lines(row.get("security")):
        lines += _wrapped("security", "below a floor: " + line)
    guards = "; ".join("%s: %s" % (g["title"], DAY2_STATUS.get(g["status"], "not checked")) for g in row.get("day2") or [])
    if guards:
        lines += _wrapped("day-2", guards)
    for line in monitoring.row_lines(row.get("monitoring")):
        lines += _wrapped("monitoring", line)
    for key in ("failed", "drifted"):
        for msg in row[key]:
            lines += _wrapped(key, msg)
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
    report = _terminal_safe(report)
    lines = _fleet_text(report)
    for row in report["nodes"]:
        lines += _row_text(row)
    if report.get("not_checked"):
        lines.append("")
    for item in report.get("not_checked") or []:
        lines += _wrapped("not checked", item["msg"] + (" (%s)" % ", ".join(item["hosts"]) if item["hosts"] else ""))
    return "\n".join(lines) + "\n"
