# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the host is, as the driver module reads it: its OS, whether it is a container, and the
nvidia kernel module loaded and on disk against the desired driver.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.driver import gather_modinfo, loaded_driver
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.machine import gather_os
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import Probes
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


def read_os(system):
    facts = gather_os(system, Probes())
    if not facts.get("id"):
        raise GpuFleetError("could not tell the OS: neither /etc/os-release nor /usr/lib/os-release is readable")
    return facts


def detect_container(system):
    """The kind of container this is ('podman', 'docker', ...), or None on a machine or VM."""
    text = system.read("/run/systemd/container")
    if text and text.strip():
        return text.strip()
    if system.exists("/run/.containerenv"):
        return "podman"
    if system.exists("/.dockerenv"):
        return "docker"
    try:
        environ = system.read_bytes("/proc/1/environ", kernel=True)
    except (IOError, OSError):
        environ = None
    for item in (environ or b"").split(b"\0"):
        if item.startswith(b"container="):
            return item.split(b"=", 1)[1].decode("utf-8", "replace") or "container"
    return None


def read_kernel_module(system):
    """What the kernel has loaded and what modinfo would load, for the running kernel (as gpu_facts reads them)."""
    probes = Probes()
    modules, loaded_version, loaded_flavor = loaded_driver(system, probes)
    installed = gather_modinfo(system, probes)
    return {
        "loaded": "nvidia" in modules or loaded_version is not None,
        "loaded_version": loaded_version,
        "loaded_flavor": loaded_flavor,
        "installed_version": installed.get("version"),
        "installed_flavor": installed.get("flavor"),
        "installed_filename": installed.get("filename"),
        "proc_modules": probes["proc_modules"]["state"] == "ok",
        "nouveau_loaded": "nouveau" in modules,
    }


def module_state(kmod, desired_version, container, state="present"):
    """``(state, reboot_required, reason)`` of the kernel module against the desired driver.

    ``state``: ``current`` (the desired version is loaded), ``outdated`` (another version is
    loaded), ``not_loaded`` (no nvidia module), ``loaded_removed`` (state absent, still loaded),
    ``absent`` (state absent, nothing loaded).
    """
    kernel = "the running kernel"
    if state == "absent":
        if kmod["loaded"]:
            return "loaded_removed", True, (
                "the nvidia module %s is still loaded; it goes away at the next reboot" % (kmod["loaded_version"] or "")
            ).replace("  ", " ")
        return "absent", False, "no nvidia module loaded"
    if kmod["loaded"]:
        if desired_version and kmod["loaded_version"] and not versions.matches(desired_version, kmod["loaded_version"]):
            return "outdated", True, (
                "the loaded nvidia module is %s, the installed driver %s: reboot to load it "
                "(until then nvidia-smi and CUDA fail with 'driver/library version mismatch')"
                % (kmod["loaded_version"], desired_version)
            )
        return "current", False, "the nvidia module %s is loaded" % (kmod["loaded_version"] or "")
    if container:
        reason = (
            "module not loaded: this is a %s container; it shares its host's kernel and cannot load kernel "
            "modules, so no nvidia module runs here whatever is installed" % container
        )
    elif not kmod["proc_modules"]:
        reason = "module not loaded: %s has no loadable modules (/proc/modules does not exist)" % kernel
    elif kmod["installed_version"]:
        reason = "module not loaded: the nvidia module %s is installed for %s but not loaded; reboot to load it" % (
            kmod["installed_version"],
            kernel,
        )
    else:
        reason = (
            "module not loaded: no nvidia module is built for %s yet (DKMS builds it when the kernel's "
            "headers are installed); reboot once it is" % kernel
        )
    return "not_loaded", True, reason


def _kernel_report(kmod, mstate, reboot, reason, container):
    """The kernel module's part of the result: its state, whether a reboot is due, the container."""
    return {
        "kernel_module": dict(kmod, state=mstate, detail=reason),
        "reboot_required": reboot,
        "reboot_reason": reason if reboot else None,
        "in_container": container is not None,
        "container": container,
    }


def _os_summary(os_facts):
    return {
        "id": os_facts.get("id"),
        "version_id": os_facts.get("version_id"),
        "codename": os_facts.get("codename"),
        "family": os_facts.get("family"),
    }
