# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who keeps a node's CDI spec current, and whether it must be written again now.

Two ways, one per node:

* ``toolkit``: the NVIDIA Container Toolkit's own ``nvidia-cdi-refresh.path`` and
  ``nvidia-cdi-refresh.service`` (toolkit >= 1.18, package ``nvidia-container-toolkit-base``).
  The service runs ``nvidia-ctk cdi generate`` into ``/var/run/cdi/nvidia.yaml`` at boot, and
  the path unit starts it again when ``/lib/modules/<kernel>/modules.dep`` changes (a driver
  installed or removed) or ``/usr/bin/nvidia-ctk`` does (the toolkit upgraded);
* ``module``: the collection's ``cdi_spec`` writes ``/etc/cdi/nvidia.yaml`` on every run, from
  the node as it is (a spec for another driver is rewritten: the library names carry the
  driver version).

``auto`` takes the toolkit's units where the installed toolkit ships them, the module
elsewhere. The spec is refreshed now when there is none, when it was written for another
driver than the loaded one, or when the driver layer changed the driver in this run, unless
the node waits for a reboot into the new driver: until then the kernel module and the
libraries differ and no spec can be right (the units run at boot; the module's next run
after the reboot writes it).
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi

SOURCES = ("auto", "toolkit", "module")
REFRESH_UNIT = "nvidia-cdi-refresh.service"
REFRESH_PATH_UNIT = "nvidia-cdi-refresh.path"
#: Where the toolkit's packages put their units (Debian/Ubuntu and EL), and the admin's folder.
UNIT_DIRS = ("/usr/lib/systemd/system", "/lib/systemd/system", "/etc/systemd/system")
#: Where the toolkit's service writes the spec (``NVIDIA_CTK_CDI_OUTPUT_FILE_PATH``'s default).
TOOLKIT_SPEC = "/var/run/cdi/nvidia.yaml"
MODULE_SPEC = cdi.DEFAULT_OUTPUT
#: The first line of a spec the cdi_spec module wrote.
MODULE_HEADER = "# Managed by gpufleet.nvidia.cdi_spec"

_LIBCUDA_RE = re.compile(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)?)\b")


def refresh_unit(host):
    """The host path of the toolkit's ``nvidia-cdi-refresh.path`` unit, or None."""
    for folder in UNIT_DIRS:
        path = posixpath.join(folder, REFRESH_PATH_UNIT)
        if host.isfile(path) and host.isfile(posixpath.join(folder, REFRESH_UNIT)):
            return path
    return None


def spec_driver_version(text):
    """The driver version a CDI spec was written for (its ``libcuda.so.<version>`` mount), or None."""
    match = _LIBCUDA_RE.search(text or "")
    return match.group(1) if match else None


def loaded_driver_version(host):
    """The loaded kernel module's version (``/proc/driver/nvidia/version``), or None."""
    try:
        return cdi.parse_nvrm_version(host.read_text(cdi.PROC_VERSION, kernel=True))
    except OSError:
        return None


def read_state(host, output=MODULE_SPEC) -> dict:
    """What the decision reads from the node: the units, both specs, the loaded driver."""
    toolkit_text = host.read(TOOLKIT_SPEC)
    module_text = host.read(output)
    return {
        "unit": refresh_unit(host),
        "loaded": loaded_driver_version(host),
        "toolkit_spec": spec_driver_version(toolkit_text) if toolkit_text is not None else None,
        "toolkit_spec_exists": toolkit_text is not None,
        "module_spec_exists": module_text is not None,
        "module_spec_ours": module_text is not None and module_text.startswith("---\n" + MODULE_HEADER),
    }


def choose(source: str, unit) -> str:
    """``toolkit`` or ``module`` for the requested ``source``; the toolkit's units asked for by
    name but not installed are refused."""
    if source not in SOURCES:
        raise GpuFleetError("toolkit_config: cdi_source %r is not one of %s" % (source, ", ".join(SOURCES)))
    if source == "toolkit" and unit is None:
        raise GpuFleetError(
            "toolkit_config: cdi_source toolkit asks for the toolkit's %s, but it is not installed in %s (NVIDIA Container "
            "Toolkit 1.18 or later ships it); use cdi_source auto or module" % (REFRESH_PATH_UNIT, ", ".join(UNIT_DIRS)),
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
    output = TOOLKIT_SPEC if method == "toolkit" else module_output
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
    how = ("the toolkit's %s" % REFRESH_UNIT) if method == "toolkit" else "gpufleet.nvidia.cdi_spec"
    if reboot_pending:
        return False, ("the node waits for a reboot into its new driver; %s writes the spec then"
                       % ("the toolkit's units run at boot and" if method == "toolkit" else "the next run after it"))
    if not state.get("loaded"):
        return False, ("no NVIDIA driver is loaded (no %s): there is no spec to write yet; %s writes it once one is loaded"
                       % (cdi.PROC_VERSION, REFRESH_PATH_UNIT if method == "toolkit" else "the next run's gpufleet.nvidia.cdi_spec"))
    if method == "module":
        return True, "%s builds the spec on every run and rewrites it only when it differs" % how
    if driver_changed:
        return True, "the driver changed in this run: %s writes %s again" % (how, TOOLKIT_SPEC)
    if not state.get("toolkit_spec_exists"):
        return True, "%s does not exist: %s writes it" % (TOOLKIT_SPEC, how)
    written, loaded = state.get("toolkit_spec"), state.get("loaded")
    if loaded and written != loaded:
        return True, "%s was written for driver %s, the loaded driver is %s: %s writes it again" % (
            TOOLKIT_SPEC, written or "(unknown)", loaded, how)
    return False, "%s is current (driver %s); %s keeps it so" % (TOOLKIT_SPEC, written or loaded or "unknown", REFRESH_PATH_UNIT)
