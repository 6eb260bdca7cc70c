# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who keeps a node's CDI spec current, and whether it must be written again now.

Two ways, one per node:

* ``toolkit``: the NVIDIA Container Toolkit's own ``nvidia-cdi-refresh.path`` and
  ``nvidia-cdi-refresh.service`` (toolkit >= 1.18, package ``nvidia-container-toolkit-base``).
  The service runs ``nvidia-ctk cdi generate`` into ``/var/run/cdi/nvidia.yaml`` at boot, and
  the path unit starts it again when ``/lib/modules/<kernel>/modules.dep`` changes (a driver
  installed or removed) or ``/usr/bin/nvidia-ctk`` does (the toolkit upgraded);
* ``module``: the collection's ``cdi_spec`` runs ``nvidia-ctk cdi generate`` on every run and
  writes ``/etc/cdi/nvidia.yaml`` where it differs (a spec for another driver is rewritten: the
  library names carry the driver version).

``auto`` takes the toolkit's units where the installed toolkit ships them, the module
elsewhere. The spec is refreshed now when there is none, when it was written for another
driver than the loaded one, or when the driver layer changed the driver in this run, unless
the node waits for a reboot into the new driver: until then the kernel module and the
libraries differ and no spec can be right (the units run at boot; the module's next run
after the reboot writes it). Either way ``cdi_spec`` then guards the spec against the node
(``runtime/cdi.py``).
"""

from __future__ import annotations

import posixpath

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi

SOURCES = ("auto", "toolkit", "module")
REFRESH_SERVICE = "nvidia-cdi-refresh.service"
REFRESH_PATH = "nvidia-cdi-refresh.path"
UNIT_PROPERTIES = "Id,LoadState,ActiveState,SubState,Result,NRestarts"
#: Where the toolkit's packages put their units (Debian/Ubuntu and EL), and the admin's folder.
UNIT_DIRS = ("/usr/lib/systemd/system", "/lib/systemd/system", "/etc/systemd/system")
MODULE_SPEC = cdi.DEFAULT_OUTPUT


def refresh_unit(host):
    """The host path of the toolkit's ``nvidia-cdi-refresh.path`` unit, or None."""
    for folder in UNIT_DIRS:
        path = posixpath.join(folder, REFRESH_PATH)
        if host.isfile(path) and host.isfile(posixpath.join(folder, REFRESH_SERVICE)):
            return path
    return None


def read_state(host, output=MODULE_SPEC) -> dict:
    """What the decision reads from the node: the units, both specs, the loaded driver."""
    toolkit_text = host.read(cdi.TOOLKIT_SPEC)
    module_text = host.read(output)
    return {
        "unit": refresh_unit(host),
        "loaded": cdi.loaded_driver(host),
        "toolkit_spec": cdi.spec_driver_version(toolkit_text) if toolkit_text is not None else None,
        "toolkit_spec_exists": toolkit_text is not None,
        "module_spec_exists": module_text is not None,
        "module_spec_ours": module_text is not None and module_text.startswith("---\n" + cdi.HEADER),
    }


def choose(source: str, unit) -> str:
    """``toolkit`` or ``module`` for the requested ``source``; the toolkit's units asked for by
    name but not installed are refused."""
    if source not in SOURCES:
        raise GpuFleetError("toolkit_config: cdi_source %r is not one of %s" % (source, ", ".join(SOURCES)))
    if source == "toolkit" and unit is None:
        raise GpuFleetError(
            "toolkit_config: cdi_source toolkit asks for the toolkit's %s, but it is not installed in %s (NVIDIA Container "
            "Toolkit 1.18 or later ships it); use cdi_source auto or module" % (REFRESH_PATH, ", ".join(UNIT_DIRS)),
            cdi_source=source,
        )
    if source == "auto":
        return "toolkit" if unit is not None else "module"
    return source


def decide(enabled: bool, source: str, state: dict, driver_changed: bool = False, reboot_pending: bool = False,
           module_output: str = MODULE_SPEC) -> dict:
    """The CDI part of the toolkit layer's result: which way, whether to refresh now, and why
    (``module_output``: where cdi_spec writes)."""
    if not enabled:
        return {"enabled": False, "method": "none", "refresh": False, "output": None,
                "remove_module_spec": False, "reason": "CDI is not enabled"}
    method = choose(source, state.get("unit"))
    output = cdi.TOOLKIT_SPEC if method == "toolkit" else module_output
    refresh, reason = _refresh(method, state, driver_changed, reboot_pending)
    return {
        "enabled": True,
        "method": method,
        "refresh": refresh,
        "output": output,
        # the two would describe the same devices: the module's goes when the toolkit's takes over
        "remove_module_spec": method == "toolkit" and bool(state.get("module_spec_ours")),
        "reason": reason,
    }


def _refresh(method, state, driver_changed, reboot_pending) -> tuple:
    """``(refresh now, why)``."""
    how = ("the toolkit's %s" % REFRESH_SERVICE) if method == "toolkit" else "gpufleet.nvidia.cdi_spec"
    if reboot_pending:
        return False, ("the node waits for a reboot into its new driver; %s writes the spec then"
                       % ("the toolkit's units run at boot and" if method == "toolkit" else "the next run after it"))
    if not state.get("loaded"):
        return False, ("no NVIDIA driver is loaded (no %s): there is no spec to write yet; %s writes it once one is loaded"
                       % (cdi.PROC_VERSION, REFRESH_PATH if method == "toolkit" else "the next run's gpufleet.nvidia.cdi_spec"))
    if method == "module":
        return True, "%s runs nvidia-ctk cdi generate on every run and rewrites the spec only when it differs" % how
    if driver_changed:
        return True, "the driver changed in this run: %s writes %s again" % (how, cdi.TOOLKIT_SPEC)
    if not state.get("toolkit_spec_exists"):
        return True, "%s does not exist: %s writes it" % (cdi.TOOLKIT_SPEC, how)
    written, loaded = state.get("toolkit_spec"), state.get("loaded")
    if loaded and written != loaded:
        return True, "%s was written for driver %s, the loaded driver is %s: %s writes it again" % (
            cdi.TOOLKIT_SPEC, written or "(unknown)", loaded, how)
    return False, "%s is current (driver %s); %s keeps it so" % (cdi.TOOLKIT_SPEC, written or loaded or "unknown", REFRESH_PATH)


def parse_units(text) -> dict:
    """``systemctl show`` of several units: ``{Id: {property: value}}``."""
    units = {}
    for block in text.strip().split("\n\n"):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if props.get("Id"):
            units[props["Id"]] = props
    return units


def read_units(host) -> dict:
    """The state of the toolkit's two refresh units (``systemctl show``, read only)."""
    argv = ["systemctl", "show", "-p", UNIT_PROPERTIES, REFRESH_SERVICE, REFRESH_PATH]
    rc, out, err = host.run(argv)
    units = parse_units(out) if rc == 0 else {}
    if set(units) != {REFRESH_SERVICE, REFRESH_PATH}:
        raise GpuFleetError("cdi_spec: cannot read the state of %s and %s: `%s` (rc %s): %s" % (
            REFRESH_SERVICE, REFRESH_PATH, " ".join(argv), rc, (err or out).strip()[-2000:]))
    missing = [u for u, p in sorted(units.items()) if p.get("LoadState") != "loaded"]
    if missing:
        raise GpuFleetError(
            "cdi_spec: method toolkit needs the toolkit's %s and %s, but systemd has no %s (LoadState %s): install "
            "NVIDIA Container Toolkit 1.18 or later (nvidia-container-toolkit-base), or use method module" % (
                REFRESH_SERVICE, REFRESH_PATH, " and no ".join(missing), ", ".join(units[u].get("LoadState", "") for u in missing)))
    return units


def check_units(units) -> list:
    """The refresh units that failed, hit their start limit, keep restarting, or (the path unit) do not watch."""
    problems = []
    for unit, props in sorted(units.items()):
        state, sub = props.get("ActiveState"), props.get("SubState")
        why = "Result=%s, NRestarts=%s" % (props.get("Result"), props.get("NRestarts", "0"))
        if state == "failed":
            problems.append("%s failed (%s)%s" % (unit, why, "" if unit == REFRESH_SERVICE else
                                                  ": it no longer starts the refresh when the driver or the toolkit changes"))
        elif sub == "auto-restart":
            problems.append("%s keeps failing and restarting (%s)" % (unit, why))
        elif unit == REFRESH_PATH and state != "active":
            problems.append("%s is %s: the spec is not refreshed when the driver or the toolkit changes" % (unit, state))
    return problems


def repair_units(host, units) -> list:
    """``systemctl reset-failed`` the failed refresh units, restart the service (it writes the spec), start the path unit."""
    failed = [u for u, props in sorted(units.items()) if props.get("ActiveState") == "failed"]
    steps = [["systemctl", "reset-failed"] + failed] if failed else []  # a unit that is not failed makes it fail
    steps.append(["systemctl", "restart", REFRESH_SERVICE])
    if units[REFRESH_PATH].get("ActiveState") != "active" or REFRESH_PATH in failed:
        steps.append(["systemctl", "start", REFRESH_PATH])
    for argv in steps:
        rc, out, err = host.run(argv)
        if rc != 0:
            raise GpuFleetError("cdi_spec: `%s` failed (rc %s): %s (journalctl -u %s says why)" % (
                " ".join(argv), rc, (err or out).strip()[-2000:], REFRESH_SERVICE), rc=rc)
    return [" ".join(argv) for argv in steps]
