# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``method: preinstalled``: the driver a host already has (gpu_facts' ``driver.found``, else its
packages), reported with how it drifted from the declared one; nothing is planned or changed.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.driver import gather_driver, found_of
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.machine import gather_os
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.packages import gather_dpkg
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import Probes
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import apt_layouts
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import dnf as driver_dnf
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import fabric_manager
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_driver import (
    found_flavor,
    found_version,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.host_state import (
    _kernel_report,
    _os_summary,
    module_state,
    read_kernel_module,
)


def verify_preinstalled(system, params, os_facts, container):
    """Report the driver found on the host; change nothing. ``drift`` when it is not the declared one."""
    dpkg, driver = read_preinstalled(system)
    version, version_source, flavor = identify_preinstalled(system, driver)
    drift = declared_drift(params, version, flavor)
    need = fabric_manager.read_need(system, params.get("fabric_manager") or "auto")
    notes = []
    fm_report = fabric_manager.verify(system, need, dpkg, version, container, drift, notes)
    kmod = read_kernel_module(system)
    mstate, reboot, reason = preinstalled_module_state(kmod, version, container)
    result = {
        "changed": False,
        "msg": "pre-installed driver %s (%s, %s)%s" % (
            version or "of unknown version",
            flavor or "flavour unknown",
            driver["source"],
            ": drifted: %s" % "; ".join(drift) if drift else "",
        ),
        "method": "preinstalled",
        "state": "present",
        "os": _os_summary(os_facts),
        "backend": None,
        "version": str(version) if version else None,
        "version_source": version_source,
        "flavor": flavor,
        "source": driver["source"],
        "package": driver.get("package"),
        "drift": bool(drift),
        "drift_detail": drift,
    }
    result.update(_kernel_report(kmod, mstate, reboot, reason, container))
    result.update(plan=[], notes=notes, fabric_manager=fm_report)
    return result


def read_preinstalled(system):
    """``(dpkg, driver)``: the host's packages (where dpkg runs) and its driver, as gpu_facts reads them.

    Fails when there is no driver at all: method preinstalled installs nothing.
    """
    probes = Probes()
    family = gather_os(system, probes)["family"]
    dpkg = gather_dpkg(system, probes, family)
    driver = gather_driver(system, probes, dpkg, family)
    if driver["source"] == "operator":
        raise GpuFleetError(
            "method preinstalled: the driver on this host is the GPU Operator's (its container's root at %s), not the "
            "host's; nothing is installed with method preinstalled (expected the operator's driver moved off the node "
            "first: site.yml's gpu_operator layer does it, or driver_method operator)" % driver.get("operator_root"),
            method="preinstalled",
            driver=driver,
        )
    if driver["source"] == "absent":
        raise GpuFleetError(
            "method preinstalled: no NVIDIA driver on this host (no nvidia module loaded or installed, no "
            "nvidia-smi, no libcuda.so.1); nothing is installed with method preinstalled",
            method="preinstalled",
            driver=driver,
        )
    return dpkg, driver


def identify_preinstalled(system, driver):
    """``(version, version_source, flavor)`` of the driver: what discovery found (``driver.found``: on disk,
    else what runs), else what its packages say."""
    facts = {"driver": driver}
    version = found_version(facts)
    version_source = _version_source(driver) if version is not None else None
    flavor = found_flavor(facts)
    packaged = packaged_driver(system) if version is None or flavor is None else None
    if version is None and packaged and packaged["version"]:
        version = versions.try_parse_driver_version(versions.upstream_version(packaged["version"]))
        version_source = "package %s" % packaged["name"] if version else None
    if flavor is None and packaged:
        flavor = packaged["flavor"]
    return version, version_source, flavor


def _version_source(driver):
    """Where discovery read the driver's version (``driver.found.from``); a package by its name."""
    source = found_of({"driver": driver})["from"]
    return "package %s" % driver["package"]["name"] if source == "package" else source


def declared_drift(params, version, flavor):
    """How the driver found differs from the declared ``version`` and ``flavor`` (lines; none when it does not)."""
    drift = []
    declared = params.get("version")
    if declared:
        declared = versions.parse_driver_version(declared)
        if version is None:
            drift.append("the installed driver's version could not be read (no loaded module, nvidia-smi or modinfo)")
        elif not versions.matches(declared, version):
            drift.append("version %s, declared %s" % (version, declared))
    if params.get("flavor") in ("open", "proprietary") and flavor and flavor != params["flavor"]:
        drift.append("flavour %s, declared %s" % (flavor, params["flavor"]))
    return drift


def preinstalled_module_state(kmod, version, container):
    """:func:`module_state` of the pre-installed driver; outdated too when the loaded module is not the installed one."""
    if kmod["loaded"] and kmod["installed_version"] and kmod["loaded_version"] != kmod["installed_version"]:
        return "outdated", True, "the loaded nvidia module is %s, the installed one %s: reboot to load it" % (
            kmod["loaded_version"],
            kmod["installed_version"],
        )
    return module_state(kmod, str(version) if version else None, container)


def packaged_driver(system):
    """``{'name', 'version', 'flavor'}`` of the driver's packages (dpkg or rpm), or None.

    For a driver that is installed but neither loaded nor readable by modinfo (a container, a
    kernel whose module is not built yet): the kernel module package tells the flavour, the
    libraries' package the version.
    """
    if system.which("dpkg-query"):
        return apt_layouts.packaged_driver(system)
    if system.which("rpm"):
        return driver_dnf.packaged_driver(system)
    return None
