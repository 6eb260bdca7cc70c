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
import re

from collections.abc import Mapping

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import data as common_data
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import lifecycle, versions
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import fixes, floors, layers as report_layers, monitoring
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.driver import found_of

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
_RANK = {"skipped": 0, "ok": 1, "drift": 2, "failed": 3}


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
                        entry[key] = common_data.plain(fact, unknown=str)
                elif key in hv:
                    stored = _stored(hostvars, host, key) if key == VERDICT else None
                    if stored is not None and read.get(id(stored)) is stored:
                        continue
                    entry[key] = common_data.plain(hv[key], unknown=str)
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


#: The fixes of the causes a run most often stops at on a node, by what its message says.
STOP_FIXES = (
    (re.compile(r"sudo: (command )?not found"),
     "the node has no sudo: connect as root and set gpufleet_become: false for it, or install sudo on it"),
    (re.compile(r"Failed to connect to the host|unreachable|Connection (timed out|refused)", re.I),
     "check that the control host reaches the node as the inventory says (ansible NODE -m ansible.builtin.ping)"),
    (re.compile(r"Failed to fetch|Could not resolve|Temporary failure resolving|could not download|Unable to connect to", re.I),
     "the node cannot reach the package repository: check its network and proxy, or point the repository's URL "
     "(container_toolkit_repo_url, nvidia_driver_cuda_repo_baseurl, or the node's own apt sources) at a mirror it reaches"),
)


def _stopped(value):
    if not value:
        return None
    if isinstance(value, dict):
        stage = value.get("stage") or value.get("task") or "unknown stage"
        detail = " / ".join(str(value[k]) for k in ("task", "msg") if value.get(k) and value.get(k) != stage)
        return "the run stopped at %s%s%s" % (stage, ": " + detail if detail else "", _stop_fix(str(value.get("msg") or "")))
    return "the run stopped at %s" % value


def _stop_fix(msg):
    """`` (fix: ...)`` for a message of a known cause that does not give its fix itself, else ''."""
    if "(fix: " in msg:
        return ""
    return next((" (fix: %s)" % fix for pattern, fix in STOP_FIXES if pattern.search(msg)), "")


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
    stopped = _stopped(hv.get("gpufleet_stopped_at") or hv.get("report_stopped_at"))
    gpus = _row_gpus(facts, val)
    failed, drifted, not_checked = _row_messages(val, cnode, cluster, stopped)
    status, not_checked = _row_status(facts, val, cnode, stopped, gpus["count"], not_checked)
    driver, toolkit = _row_driver(facts, val, hv, today), _row_toolkit(facts, val, hv)
    done = report_layers.row_layers(hv)
    row = {
        "host": host,
        "node": expect.get("node") or (cnode or {}).get("node") or host,
        "status": status,
        "os": _os_text(facts),
        "kernel": _dig(facts, "kernel", "release"),
        "gpus": gpus,
        "driver": driver,
        "toolkit": toolkit,
        "security": floors.row_security(driver, toolkit, facts, hv, today),
        "runtime": _row_runtime(val, hv, facts),
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
        "layers": done,
        "changed": report_layers.changed_text(done),
    }
    _flavor_from_role(row["driver"], done.get("driver"))
    row["fix"] = fixes.row_fixes(row)
    return row


def _flavor_from_role(driver, layer):
    """The flavour the driver role installed, where the facts could not say (no module loaded yet)."""
    if layer and layer.get("flavor") and driver.get("flavor") in (None, "unknown"):
        driver["flavor"], driver["flavor_why"] = layer["flavor"], None


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
    if stopped:
        return "failed", not_checked if facts else []
    if not facts:
        return "not_validated", [_NO_FACTS]
    return "not_validated", [_NOT_VALIDATED]


def _row_driver(facts, val, hv, today):
    driver = val.get("driver") or {}
    smi = _dig(facts, "driver", "nvidia_smi") or {}
    installed = driver.get("installed")
    if installed is None and facts:
        installed = found_of(facts)["version"]
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


_PACKAGES_FLAVOR = "from its installed packages: no nvidia module is loaded or built to read it from"


def _row_flavor(facts, row):
    """``(flavor, why)``: the kernel modules' flavour (open, proprietary); ``unknown`` with why
    where a driver is there but nothing said which; None without a driver."""
    driver = (facts or {}).get("driver") or {}
    found = found_of(facts)
    if found["flavor"]:
        return found["flavor"], (_PACKAGES_FLAVOR if found["flavor_from"] == "packages" else None)
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


def _row_runtime(val, hv, facts):
    runtime = val.get("runtime") or {}
    present = runtime.get("present")
    name = runtime.get("name") or hv.get("container_toolkit_runtime")
    engines = _dig(facts, "container") or {}
    return {
        "name": name,
        "versions": dict((engine, (engines.get(engine) or {}).get("version")) for engine in ("containerd", "crio", "docker")
                         if (engines.get(engine) or {}).get("installed")),
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


#: A day-2 guard's status as its badge says it.
DAY2_STATUS = {"ok": "ok", "drift": "drift", "failed": "failed", "skipped": "not checked"}


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
