# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fix for every state of a row that is not ok: what to run, on which node.

:func:`row_fixes` reads a row of ``report/fleet.py`` and says, one line per cause, what a platform
engineer runs next: the day-2 guards' own fixes (their messages carry them), the security
findings' fixing versions, and for a drifted driver, a stopped run, a host never read or never
validated, the playbook and ``--limit`` that fix it.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions


def row_fixes(row):
    """The row's fixes, one line each, most pressing first; [] for a row with nothing to fix."""
    fixes = _state_fixes(row, row["host"])
    fixes += ["%s: %s" % (g["title"], g["msg"]) for g in row.get("day2") or []
              if g.get("status") in ("drift", "failed") and g.get("msg")]
    fixes += [f["text"] for f in (row.get("security") or {}).get("findings") or []]
    if row["status"] in ("drift", "failed") and not fixes:
        fixes.append("correct what failed or drifted (above), then run playbooks/site.yml --limit %s" % row["host"])
    return fixes


def _state_fixes(row, host):
    """The fixes of the row's own state: not validated, a stopped run, a driver not the declared one."""
    fixes = []
    if row["status"] == "not_validated":
        fixes.append(_unvalidated_fix(row, host))
    if row["status"] == "failed" and any(m.startswith("the run stopped at") for m in row["failed"]):
        fixes.append("fix what stopped the run (above), then run playbooks/site.yml --limit %s again" % host)
    driver_fix = _driver_fix(row["driver"], host)
    if driver_fix and row["status"] in ("drift", "failed"):
        fixes.append(driver_fix)
    return fixes


def _unvalidated_fix(row, host):
    if not row["gpus"].get("known", True):
        return ("the host was never read: check it answers (ansible %s -m ansible.builtin.ping), then run "
                "playbooks/site.yml --limit %s" % (host, host))
    return "run playbooks/site.yml --limit %s (or the gpufleet.nvidia.validate role) so that the node is validated" % host


def driver_drift_fix(declared, installed, host):
    """The fix of a driver whose branch is not the declared one: ``upgrade.yml`` moves it, node by node, drained."""
    return ("move the node to the declared driver %s (it has %s): ansible-playbook playbooks/upgrade.yml --limit %s "
            "(drains it, moves the driver, reboots where needed, validates)" % (declared, installed, host))


def preinstalled_drift_fix(declared, installed, host):
    """The fix of a pre-installed driver that is not the declared one: the collection does not install it."""
    return ("the node's image brings driver %s, not the declared %s: declare what it runs (nvidia_driver_version: %s) or "
            "bring the image to %s; to let the collection manage the driver instead, set nvidia_driver_method: package and "
            "run ansible-playbook playbooks/upgrade.yml --limit %s" % (installed, declared, installed, declared, host))


def _driver_fix(driver, host):
    """The driver's fix where its declared branch differs from the installed (else loaded) one; None otherwise."""
    declared = versions.try_parse_driver_version(driver.get("declared"))
    there = driver.get("installed") or driver.get("loaded")
    current = versions.try_parse_driver_version(there)
    if declared is None or current is None:
        return None
    if declared.branch != current.branch or (len(str(driver["declared"]).split(".")) > 1 and str(declared) != str(current)):
        fix = preinstalled_drift_fix if driver.get("source") == "preinstalled" else driver_drift_fix
        return fix(driver["declared"], there, host)
    if driver.get("installed") and driver.get("loaded") and driver["installed"] != driver["loaded"]:
        return ("the module loaded (%s) is not the driver installed (%s): reboot the node, or reload the modules when no "
                "process holds the GPU (the day-2 guard 'library / module versions' says which)" % (driver["loaded"], driver["installed"]))
    return None
