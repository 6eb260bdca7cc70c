# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling driver upgrade's decisions, as plain functions: no Ansible, no cluster, no host.

``playbooks/upgrade.yml`` (through the ``gpufleet.nvidia.upgrade`` role and the filters
``upgrade_batches``, ``upgrade_node_plan`` and ``upgrade_progress``) asks three questions:

- :func:`batches`: which GPU nodes go together. The batch size is Ansible's ``serial`` (a number,
  a percentage of the play's hosts, or a list of them whose last entry repeats), cut exactly as
  ``PlaybookExecutor._get_serialized_batches`` cuts it, so the plan shows the batches the play runs.
- :func:`node_plan`: what to do with one node. It is *up to date* - left alone, not even cordoned -
  when the loaded driver is the declared one (a branch matches its releases), the driver on disk
  is the loaded one, its validation did not fail, and (for a Kubernetes node) the node is Ready,
  advertises its GPUs and is not still cordoned by an earlier upgrade. Nodes whose driver this
  collection does not install (``nvidia_driver_method`` preinstalled or operator) are not
  applicable. Every other node is to be upgraded, and the plan says why.
- :func:`progress`: given each node's outcome so far (the ``upgrade_result`` the role keeps per
  host), which nodes go on and where the run stopped. A batch starts only when no node of an
  earlier batch failed or was left unfinished (unreachable, interrupted); the nodes of the later
  batches are *not started* and say where the upgrade stopped.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig, plural as _plural
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.upgrade.drain import allocatable_problem

SERIAL_HINT = "expected a number of nodes (2), a percentage of the GPU nodes ('25%'), or a list of them ([1, '25%'])"

# upgrade_result.state
PLANNED = "planned"  # to upgrade, not reached yet
UP_TO_DATE = "up_to_date"  # nothing to do: left alone, not cordoned
NOT_APPLICABLE = "not_applicable"  # its driver is not this collection's to install
RUNNING = "running"  # in a stage (still there at the end: unreachable, or interrupted)
UPGRADED = "upgraded"
WOULD_UPGRADE = "would_upgrade"  # went through in check mode
FAILED = "failed"  # stopped in a stage: left there (cordoned), the run stops before the next batch
NOT_STARTED = "not_started"  # in a batch after the one that stopped
UNPLANNED = "unplanned"  # no plan: unreachable, or failed before the plan
STATES = (PLANNED, UP_TO_DATE, NOT_APPLICABLE, RUNNING, UPGRADED, WOULD_UPGRADE, FAILED, NOT_STARTED, UNPLANNED)
_COUNT_TITLES = (
    (UPGRADED, "upgraded"),
    (WOULD_UPGRADE, "would be upgraded"),
    (PLANNED, "to upgrade"),
    (UP_TO_DATE, "up to date"),
    (NOT_APPLICABLE, "not applicable"),
    (FAILED, "failed"),
    (RUNNING, "did not finish"),
    (NOT_STARTED, "not started"),
    (UNPLANNED, "not planned"),
)


# --- batches ------------------------------------------------------------------------------------


def _serial_item(value):
    """One entry of the spec, checked the way Ansible's pct_to_int will read it."""
    if isinstance(value, bool) or value is None:
        raise GpuFleetError("upgrade_batch: %r is not a batch size (%s)" % (value, SERIAL_HINT), value=value, expected=SERIAL_HINT)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value
        try:
            int(text.replace("%", "") if text.endswith("%") else text)
        except ValueError:
            raise GpuFleetError(
                "upgrade_batch: '%s' is not a batch size (%s)" % (value, SERIAL_HINT), value=value, expected=SERIAL_HINT
            ) from None
        return text
    raise GpuFleetError("upgrade_batch: %r is not a batch size (%s)" % (value, SERIAL_HINT), value=str(value), expected=SERIAL_HINT)


def parse_serial(spec):
    """The spec as the play keyword ``serial`` keeps it: a list of ints and percentages."""
    items = list(spec) if isinstance(spec, (list, tuple)) else [spec]
    return [_serial_item(item) for item in items]


def _size(value, total):
    # ansible.utils.helpers.pct_to_int, float arithmetic included (30% of 10 hosts is 3, 29% of 100 is 28).
    if isinstance(value, str) and value.endswith("%"):
        return int((int(value.replace("%", "")) / 100.0) * total) or 1
    return int(value)


def batches(hosts, spec):
    """``hosts`` cut into batches exactly as Ansible cuts a play's hosts for ``serial: spec``."""
    serial = parse_serial(spec) or [-1]
    remaining = [str(h) for h in hosts or []]
    total = len(remaining)
    out = []
    index = 0
    while remaining:
        size = _size(serial[index], total)
        if size <= 0:
            out.append(remaining)
            break
        out.append(remaining[:size])
        remaining = remaining[size:]
        index = min(index + 1, len(serial) - 1)
    return out


def describe_serial(spec):
    items = parse_serial(spec)
    if not items:
        return "all at once"
    return ", then ".join(str(i) for i in items) + (" at a time" if len(items) == 1 else "")


# --- one node's plan ----------------------------------------------------------------------------


def expected_allocatable(facts, resource, replicas):
    """What the node must advertise: GPUs x replicas of ``resource``; any number above none with MIG."""
    gpus = _dig(facts, "driver", "nvidia_smi", "gpus") or []
    mig = any(g.get("mig_mode_current") == "enabled" for g in gpus)
    count = int((facts or {}).get("gpu_count") or 0) * max(int(replicas or 1), 1)
    return {"resource": resource or "nvidia.com/gpu", "count": 0 if mig else count, "mig": mig}


def _checks(validation):
    return dict((c.get("name"), c) for c in (validation or {}).get("checks") or [])


# Why a node whose driver this collection does not install is not applicable.
_NOT_OURS = {
    "preinstalled": (
        "nvidia_driver_method is preinstalled: the driver comes with the node's image and this collection installs none; "
        "move the node to a new image instead"
    ),
    "operator": "nvidia_driver_method is operator: the GPU Operator's driver container is upgraded through the operator's driver.version",
}


def node_plan(data):
    """What to do with one GPU node, from what the plan read (see the module's docstring).

    ``data``: ``host``, ``node`` (its name in the cluster), ``method`` and ``version`` (the
    declared driver), ``cluster`` (the hosts are Kubernetes nodes), ``facts`` (gpufleet_nvidia),
    ``validation`` (gpufleet_nvidia_validation), ``drain`` (gpu_drain's check-mode result),
    ``resource`` and ``replicas``.
    """
    host = str(data.get("host") or "")
    node = str(data.get("node") or host)
    method = data.get("method") or "package"
    version = str(data.get("version") or "").strip()
    cluster = bool(data.get("cluster", True))
    validation = data.get("validation") or {}
    plan = _new_plan(data, node, version, cluster, validation)
    if isinstance(method, str) and method in _NOT_OURS:
        plan["reason"] = _NOT_OURS[method]
        return plan
    _check_declared(host, method, version)
    why = _validation_reasons(validation)
    if cluster:
        why += _node_reasons(node, (data.get("drain") or {}).get("node") or {}, plan["expect"])
    if why:
        plan.update({"state": PLANNED, "action": "upgrade", "reason": "; ".join(why)})
    else:
        plan.update({
            "state": UP_TO_DATE,
            "reason": "driver %s loaded (declared %s), validation %s%s" % (
                plan["loaded"], version, validation.get("status"),
                ", node Ready and advertising its GPUs" if cluster else ""),
        })
    return plan


def _new_plan(data, node, version, cluster, validation):
    """The plan before the decision: not applicable, with what the node has and must advertise."""
    facts = data.get("facts") or {}
    drain = data.get("drain") or {}
    return {
        "state": NOT_APPLICABLE,
        "action": "skip",
        "reason": "",
        "node": node,
        "declared": version or None,
        "loaded": _dig(validation, "driver", "loaded") or _dig(facts, "driver", "version"),
        "cluster": cluster,
        "expect": expected_allocatable(facts, data.get("resource"), data.get("replicas")),
        "pods": list(drain.get("evicted") or []),
        "blocked": list(drain.get("blocked") or []),
        "left": list(drain.get("left") or []),
    }


def _check_declared(host, method, version):
    """Refuse a driver method or a declared version this collection cannot upgrade to."""
    if method != "package":
        raise GpuFleetError(
            "upgrade: %s: nvidia_driver_method '%s' is not a driver method (expected package, preinstalled or operator)" % (host, method),
            host=host,
        )
    if not version:
        raise GpuFleetError(
            "upgrade: %s: nvidia_driver_version is not set: declare the driver to upgrade to, a branch (580) or a release (580.95.05)" % host,
            host=host,
        )
    try:
        versions.parse_driver_version(version)
    except GpuFleetError as exc:
        raise GpuFleetError("upgrade: %s: nvidia_driver_version: %s" % (host, exc.msg), host=host) from exc


def _validation_reasons(validation):
    """Why the node's validation says it needs the upgrade: its driver checks, and a failed validation."""
    if not validation:
        return ["not validated"]
    why = []
    checks = _checks(validation)
    for name in ("driver", "driver_version", "driver_installed"):
        check = checks.get(name) or {}
        status = check.get("status")
        acceptable = ("ok", "skipped") if name == "driver_installed" else ("ok",)
        if status not in acceptable:
            why.append(check.get("msg") or "%s: %s" % (name, status or "not checked"))
    if validation.get("status") == "failed":
        failed = [m for m in validation.get("failed") or [] if m not in why]
        if failed:
            why.append("validation failed: %s" % "; ".join(failed))
    return why


def _node_reasons(node, status, expect):
    """Why the Kubernetes node needs the upgrade: not read, not Ready, not advertising its GPUs, still cordoned."""
    if not status:
        return ["node %s was not read in the cluster" % node]
    why = []
    if not status.get("ready"):
        why.append("node %s is not Ready (%s)" % (node, status.get("ready_reason") or "unknown"))
    problem = allocatable_problem(status, expect)
    if problem:
        why.append("node %s %s" % (node, problem))
    if status.get("cordoned_by") is not None:
        why.append("node %s is still cordoned by an earlier upgrade (%s)" % (node, status.get("cordoned_by")))
    return why


def actions(plan):
    """What the upgrade will do to a planned node, in order, as words."""
    steps = []
    cluster = plan.get("cluster", True)
    if cluster:
        pods = plan.get("pods") or []
        steps.append("cordon")
        text = "evict %s" % _plural(len(pods), "GPU pod")
        if pods:
            text += " (%s)" % ", ".join(pods)
        blocked = plan.get("blocked") or []
        if blocked:
            text += " - blocked now: %s" % ", ".join("%s by PodDisruptionBudget %s" % (b.get("pod"), b.get("pdb")) for b in blocked)
        steps.append(text)
    steps.append("install driver %s and reboot if the driver needs it" % plan.get("declared"))
    if cluster:
        expect = plan.get("expect") or {}
        if expect.get("mig"):
            steps.append("wait until it is Ready and advertises GPUs (MIG)")
        else:
            steps.append("wait until it is Ready and advertises %s %s" % (expect.get("count"), expect.get("resource")))
    steps.append("validate")
    if cluster:
        steps.append("uncordon")
    return ", ".join(steps)


# --- the run so far -----------------------------------------------------------------------------


def _stop_text(stop):
    return "%s: %s" % (stop["host"], stop.get("stage") or "unknown stage")


def _node_line(host, entry):
    state = entry["state"]
    result = entry.get("result") or {}
    if state == PLANNED and entry["msg"] == "to upgrade":
        return "%s: to upgrade (%s): %s" % (host, result.get("reason"), actions(result))
    if state == UP_TO_DATE:
        return "%s: up to date, left alone and not cordoned: %s" % (host, result.get("reason"))
    if state == NOT_APPLICABLE:
        return "%s: not upgraded: %s" % (host, result.get("reason"))
    if state == UPGRADED:
        return "%s: upgraded%s" % (host, ": " + result["msg"] if result.get("msg") else "")
    if state == WOULD_UPGRADE:
        return "%s: would be upgraded (check mode): %s" % (host, actions(result))
    return "%s: %s" % (host, entry["msg"])


def progress(hosts, spec, results, reached=None):
    """Each node's state, batch and message, and where the upgrade stopped.

    ``results`` maps a host to its ``upgrade_result`` (``state``, and for a failure ``stage``,
    ``task``, ``msg``); a host without one was never planned. ``reached`` is the batch the run is
    starting (a number, or a host of that batch): the batches before it ran, so a node of theirs
    still ``planned`` did not run. ``None``: every batch had its turn (the end of the run); ``1``:
    none did (the plan). The nodes of a batch that comes after a node that failed, or did not
    finish, are ``not_started`` unless they had nothing to do.
    """
    cut = batches(hosts, spec)
    if isinstance(reached, str):
        reached = next((n for n, batch in enumerate(cut, 1) if reached in batch), None)
    nodes, unfinished, stop = _node_states(cut, results or {}, reached)
    counts = dict((state, len([e for e in nodes.values() if e["state"] == state])) for state in STATES)
    lines = [_summary_line(nodes, cut, spec, counts)]
    if stop is not None:
        lines.append(_stop_line(stop, nodes, len(cut)))
    for number, batch in enumerate(cut, 1):
        for host in batch:
            lines.append("batch %d of %d: %s" % (number, len(cut), _node_line(host, nodes[host])))
    for entry in nodes.values():
        del entry["result"]
    return {"batches": cut, "stopped": stop, "unfinished": unfinished, "nodes": nodes, "counts": counts, "lines": lines}


def _node_states(cut, results, reached):
    """``(nodes, unfinished, stop)``: each host's entry, the hosts that failed or did not finish,
    and where the upgrade stopped (the first of them), batch by batch."""
    nodes, unfinished, stop = {}, [], None
    for number, batch in enumerate(cut, 1):
        stop_before = stop
        for host in batch:
            result = dict(results.get(host) or {})
            entry = _node_entry(number, result, stop_before)
            if _did_not_finish(entry, reached is None or number < reached):
                unfinished.append(host)
                if stop is None:
                    stop = _stop_at(host, number, result, entry)
            nodes[host] = entry
    return nodes, unfinished, stop


def _node_entry(number, result, stop_before):
    """A node's entry from its ``upgrade_result``: not started when an earlier batch stopped."""
    state = result.get("state") or UNPLANNED
    if state not in STATES:
        state = UNPLANNED
    entry = {"batch": number, "state": state, "stage": result.get("stage"), "task": result.get("task") or "", "msg": "",
             "error": "", "result": result}
    if stop_before is not None and state in (PLANNED, NOT_STARTED):
        entry["state"] = NOT_STARTED
        entry["msg"] = "not started: the upgrade stopped at %s" % _stop_text(stop_before)
    else:
        entry["msg"] = _state_msg(state, result)
    return entry


def _state_msg(state, result):
    if state == FAILED:
        cordoned = result.get("cluster", True) and result.get("stage") not in (None, "cordon")
        return "failed at %s%s: %s; %s" % (
            result.get("stage") or "unknown stage",
            " (%s)" % result["task"] if result.get("task") else "",
            result.get("msg") or "no message",
            "left cordoned" if cordoned else "left as it is",
        )
    if state == RUNNING:
        return "did not finish the %s stage (unreachable, or the run was interrupted)" % (result.get("stage") or "first")
    if state == UNPLANNED:
        return "not upgraded: it was not planned (unreachable, or it failed before the plan)"
    if state == PLANNED:
        return "to upgrade"
    return ""


def _did_not_finish(entry, ran):
    """Whether the node failed, is still in a stage, or was planned in a batch that ran; its
    entry then says so (``msg``, ``error``)."""
    if entry["state"] not in (FAILED, RUNNING) and not (entry["state"] == PLANNED and ran):
        return False
    if entry["state"] == PLANNED:
        entry["msg"] = "did not run (unreachable, or it failed outside the upgrade's stages)"
    entry["error"] = (entry["result"].get("msg") or "no message") if entry["state"] == FAILED else entry["msg"]
    return True


def _stop_at(host, number, result, entry):
    return {
        "host": host,
        "batch": number,
        "stage": result.get("stage") or ("not started" if entry["state"] == PLANNED else "unknown stage"),
        "task": result.get("task") or "",
        "msg": result.get("msg") or entry["msg"],
    }


def _summary_line(nodes, cut, spec, counts):
    summary = ", ".join("%d %s" % (counts[state], title) for state, title in _COUNT_TITLES if counts[state])
    declared = sorted(set(str(_dig(e, "result", "declared")) for e in nodes.values() if _dig(e, "result", "declared")))
    return "Driver upgrade%s: %s in %s (%s)%s" % (
        " to " + ", ".join(declared) if declared else "",
        _plural(len(nodes), "GPU node"),
        "%d batch%s" % (len(cut), "" if len(cut) == 1 else "es"),
        describe_serial(spec),
        ": " + summary if summary else "",
    )


def _stop_line(stop, nodes, batch_count):
    later = [h for h, e in nodes.items() if e["state"] == NOT_STARTED]
    return "The upgrade stopped at %s (batch %d of %d), stage %s%s: %s%s" % (
        stop["host"], stop["batch"], batch_count, stop["stage"], " (%s)" % stop["task"] if stop["task"] else "", stop["msg"],
        "; not started: %s" % ", ".join(later) if later else "")
