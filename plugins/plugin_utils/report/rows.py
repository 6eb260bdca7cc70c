# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One row of the fleet report: a node's status, GPUs, OS, driver (declared, installed, loaded,
flavour, branches' end of life), toolkit, runtime, sharing, DRA and day-2 state, and what was not
checked on it and why, from its facts, its validation and the cluster's verdict.
"""

from __future__ import annotations

import collections
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import lifecycle, versions
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import (
    fixes,
    floors,
    layers as report_layers,
    monitoring,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.driver import found_of
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import worst


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
    return [list(group) for group in collections.Counter(name or "unknown NVIDIA GPU" for name in names).items()]


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
    text = "none" if not config and replicas == 1 else "%s%s" % (config or "default", " (x%d)" % replicas if replicas != 1 else "")
    return {"config": config or None, "replicas": replicas, "text": text}


_NO_FACTS = "no facts: the host was unreachable, or the run stopped before it was discovered"
_NOT_VALIDATED = "not validated: the run did not reach gpufleet.nvidia.validate on this host"


def build_row(host, hv, cluster, today=None):
    """One node's row, from its variables (``hv``) and the cluster verdict (None without one).

    ``today`` (a date) is what the driver branches' end of life is compared with.
    """
    facts = hv.get("gpufleet_nvidia") or {}
    stopped_at = hv.get("gpufleet_stopped_at") or hv.get("report_stopped_at")
    # a validation made before the task that stopped (the report role's stopped entry point says so) is left out
    outdated = isinstance(stopped_at, dict) and stopped_at.get("validation_outdated")
    val = {} if outdated else hv.get("gpufleet_nvidia_validation") or {}
    cnode = _dig(cluster, "nodes", host) if cluster else None
    expect = val.get("cluster_expect") or {}
    stopped = _stopped(stopped_at)
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
    status = worst([val.get("status"), (cnode or {}).get("status"), "failed" if stopped else "skipped"])
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
