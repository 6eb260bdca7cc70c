# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA's fabric manager, which hosts whose GPUs are joined by NVSwitches need at exactly the driver's version.

:class:`Need` says whether this host does (from the NVSwitches in sysfs, and the module's
``fabric_manager`` option); :func:`packages` names its packages as each repository names them,
and the backends add them to the driver's set, pinned and held with it; :func:`plan_service`
enables and starts its service where systemd runs; :func:`report` and :func:`verify` (method
preinstalled) say what there is.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.pci import gather_pci
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import Probes
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.topology import gather_fabric_manager
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.packages import sort_versions

UNIT = "nvidia-fabricmanager"
# Every package of NVIDIA's fabric manager and of its NVSwitch library, whatever the repository
# and branch names them: nvidia-fabricmanager[-dev][-<branch>] (apt), nvidia-fabric-manager[-devel]
# and nvidia-fabricmanager[-devel] (rpm), libnvidia-nscq[-<branch>], and NVIDIA's
# cuda-drivers-fabricmanager[-<branch>] metapackages (which pull NVIDIA's whole driver in).
FAMILY = re.compile(
    r"^(nvidia-fabricmanager|nvidia-fabric-manager|libnvidia-nscq|cuda-drivers-fabricmanager)(-dev|-devel)?(-\d+)?$"
)
# NVIDIA renamed the fabric manager's packages in its CUDA repositories at R580 (no branch in the
# name from there on).
UNBRANCHED_FROM = 580
# `systemctl is-enabled` answers that start the unit at boot.
SERVICE_ENABLED = ("enabled", "static", "generated")


def packages(repository, branch):
    """The packages of the fabric manager of driver ``branch`` as ``repository`` names them.

    The fabric manager (``nv-fabricmanager``) and the NVSwitch Configuration and Query library
    (NSCQ) go together, both at exactly the driver's version: NVIDIA's RHEL module streams install
    the two with their ``fm`` profile (NVIDIA/yum-packaging-fabric-manager and
    NVIDIA/yum-packaging-libnvidia-nscq, README: "the version of ... must match the NVIDIA driver
    installed"; DCGM reads the NVSwitches through NSCQ), and NVIDIA's driver container installs
    both on NVSwitch hosts (NVIDIA/gpu-driver-container, ``fabricmanager_install`` and
    ``nscq_install``).

    - ``ubuntu``: Canonical's archive (``multiverse``, source packages ``fabric-manager-<branch>``
      and ``libnvidia-nscq-<branch>``, packages.ubuntu.com for jammy and noble): always
      ``nvidia-fabricmanager-<branch>`` and ``libnvidia-nscq-<branch>``, 580 and 590 included.
    - ``cuda-apt``: NVIDIA's CUDA repository for Debian and Ubuntu:
      ``nvidia-fabricmanager-<branch>`` and ``libnvidia-nscq-<branch>`` (version
      ``<driver>-1``) before R580, plain ``nvidia-fabricmanager`` and ``libnvidia-nscq`` from R580
      (NVIDIA/gpu-driver-container ``ubuntu22.04/install.sh``; its pull request #451 quotes apt:
      "Package nvidia-fabricmanager-580 is a virtual package provided by: nvidia-fabricmanager
      580.65.06-1").
    - ``cuda-rpm``: NVIDIA's CUDA repository for RHEL: ``nvidia-fabric-manager`` and
      ``libnvidia-nscq-<branch>`` before R580, ``nvidia-fabricmanager`` and ``libnvidia-nscq``
      from R580 (NVIDIA/gpu-driver-container ``rhel9/install.sh`` and ``rhel8/install.sh``).
    """
    if repository == "ubuntu":
        return ["libnvidia-nscq-%d" % branch, "nvidia-fabricmanager-%d" % branch]
    if branch >= UNBRANCHED_FROM:
        return ["libnvidia-nscq", "nvidia-fabricmanager"]
    if repository == "cuda-rpm":
        return ["libnvidia-nscq-%d" % branch, "nvidia-fabric-manager"]
    return ["libnvidia-nscq-%d" % branch, "nvidia-fabricmanager-%d" % branch]


def nvswitches(count):
    """``4 NVSwitches``: a count of them, for messages."""
    return "%d NVSwitch%s" % (count, "" if count == 1 else "es")


class Need(object):
    """Whether this run manages NVIDIA's fabric manager (``required``), and why (``reason``).

    ``mode`` is the module's ``fabric_manager`` option: ``auto`` wherever the host has NVSwitches,
    ``always``, or ``never``. ``nvswitches`` are the bus ids of the NVSwitches in sysfs.
    """

    def __init__(self, mode, nvswitches):
        self.mode = mode or "auto"
        self.nvswitches = list(nvswitches or ())
        self.required = self.mode == "always" or (self.mode == "auto" and bool(self.nvswitches))

    @property
    def reason(self):
        count = len(self.nvswitches)
        if self.mode in ("always", "never"):
            return "fabric_manager is %s%s" % (self.mode, " (the host has %s)" % nvswitches(count) if count else "")
        if count:
            return "this host has %s" % nvswitches(count)
        return "no NVSwitch on this host"


def read_need(system, mode):
    """The need of this host, its NVSwitches read from sysfs as gpu_facts reads them."""
    dummy, nvswitches = gather_pci(system, Probes())
    return Need(mode, nvswitches)


def choice(need, declared, available, fm_available, names, where, notes):
    """The driver versions to choose from when the fabric manager is needed: those it exists at.

    ``available`` are the driver's versions, ``fm_available`` the fabric manager's (upstream
    versions). Without a driver version that ``declared`` names, ``available`` is returned as it
    is (the usual "not available" error follows); with some, but none with a fabric manager at
    the same version, this fails before any change.
    """
    matching = [v for v in available if versions.try_parse_driver_version(v) and versions.matches(declared, v)]
    if not matching:
        return available
    with_fm = [v for v in matching if v in fm_available]
    if not with_fm:
        raise GpuFleetError(
            "nvidia_driver: fabric_manager: %s, and NVIDIA's fabric manager must run at exactly the driver's "
            "version, but %s has no %s at %s (%s); choose a driver version that has one, or set fabric_manager to "
            "never to install the driver alone"
            % (
                need.reason,
                where,
                " / ".join(names),
                ", ".join(sort_versions(matching)),
                "fabric manager versions there: %s" % ", ".join(sort_versions(fm_available))
                if fm_available
                else "no version of it at all",
            ),
            fabric_manager_packages=list(names),
            fabric_manager_versions=sort_versions(fm_available),
            available_versions=sort_versions(matching),
        )
    newest, newest_with_fm = sort_versions(matching)[-1], sort_versions(with_fm)[-1]
    if newest != newest_with_fm:
        notes.append(
            "fabric manager: %s has no %s at %s; %s is the newest release of %s with one"
            % (where, " / ".join(names), newest, newest_with_fm, declared)
        )
    return [v for v in available if v in fm_available]


def installed_version(installed):
    """The upstream version of the fabric manager among ``{package: version}``, or None."""
    for name in sorted(installed):
        if FAMILY.match(name) and "fabric" in name and "-dev" not in name and "cuda-drivers" not in name:
            return versions.upstream_version(installed[name])
    return None


def plan_report(installed, want, install, removals, required):
    """The fabric manager's part of a backend's plan (``installed`` ``{name: version}``): what it wants, installs and
    removes of the fabric manager where the host needs one, and what is installed of it."""
    family = FAMILY.match
    return {
        "packages": dict((n, v) for n, v in want.items() if family(n)) if required else {},
        "installed": dict((n, v) for n, v in installed.items() if family(n)),
        "install": sorted(n for n in install if family(n)) if required else [],
        "remove": sorted(n for n in removals if family(n)) if required else [],
    }


def read_service(system, container):
    """``{'name', 'managed', 'enabled', 'active', 'detail'}`` of the nvidia-fabricmanager unit.

    ``managed`` is False, with the reason in ``detail``, where no systemd runs the host's
    services: a container, a host booted without systemd, no systemctl.
    """
    service = {"name": UNIT, "managed": False, "enabled": None, "active": None, "detail": None}
    if container:
        service["detail"] = (
            "this is a %s container, where no systemd runs the host's services: enable and start %s on the host"
            % (container, UNIT)
        )
        return service
    if not system.isdir("/run/systemd/system"):
        service["detail"] = (
            "systemd is not running on this host (no /run/systemd/system): start %s with the host's init system"
            % UNIT
        )
        return service
    if system.which("systemctl") is None:
        service["detail"] = "systemctl is not installed: start %s with the host's init system" % UNIT
        return service
    enabled = _systemctl(system, "is-enabled")
    active = _systemctl(system, "is-active")
    service.update(managed=True, enabled=enabled, active=active, detail="%s, %s" % (enabled, active))
    return service


def _systemctl(system, verb):
    rc, out, err = system.run(["systemctl", verb, UNIT])
    first = next((line.strip() for line in (out or "").splitlines() if line.strip()), "")
    if first:
        return first
    if "No such file" in (err or "") or "not found" in (err or "").lower():
        return "not-found"
    if rc:
        return "unknown"
    return "enabled" if verb == "is-enabled" else "active"


def plan_service(plan, service, moved, kmod_state, kmod_reason, version):
    """Enable (and, with the driver of its version loaded, start) nvidia-fabricmanager. Returns the verbs."""
    if not service["managed"]:
        plan.note("%s is not enabled or started by this module: %s" % (UNIT, service["detail"]))
        return []
    verbs = []
    if service["enabled"] not in SERVICE_ENABLED:
        plan.run("fabric-manager", ["systemctl", "enable", UNIT], "start the fabric manager at every boot")
        verbs.append("enable")
    if kmod_state == "current":
        if service["active"] != "active":
            plan.run("fabric-manager", ["systemctl", "start", UNIT],
                     "start the fabric manager: the driver %s is loaded" % version)
            verbs.append("start")
        elif moved:
            plan.run("fabric-manager", ["systemctl", "restart", UNIT],
                     "run the fabric manager at its new version")
            verbs.append("restart")
    elif service["active"] != "active" or moved:
        # The fabric manager compares its version with the loaded driver's when it starts and
        # exits when they differ: started now, it would fail.
        plan.note(
            "%s starts at the next boot, with the driver %s loaded (it refuses to run with a driver of another "
            "version; now: %s)" % (UNIT, version, kmod_reason)
        )
    return verbs


def package_report(need, fm, service, verbs, version, check_mode, state):
    """The ``fabric_manager`` return value of the package method."""
    fm = fm or {}
    installed = fm.get("installed") or {}
    actions = []
    if fm.get("remove"):
        actions.append("remove")
    if fm.get("install"):
        moved = [n for n in fm["install"] if n in installed]
        actions.append("update" if moved and len(moved) == len(fm["install"]) else "install")
    actions += verbs
    report = _report(
        need,
        packages=dict(sorted((fm.get("packages") or {}).items())),
        installed_version=installed_version(installed),
        wanted_version=version if need.required and state == "present" else None,
        service=service,
        action=", ".join(actions) or "none",
    )
    report["detail"] = _detail(report, check_mode, state)
    return report


def _detail(report, check_mode, state):
    if not report["required"]:
        if report["mode"] == "never" and report["nvswitch_count"]:
            return (
                "fabric_manager is never: not managed, although the host has %s (CUDA fails on its GPUs until a "
                "fabric manager of the driver's version runs)" % nvswitches(report["nvswitch_count"])
            )
        return "%s: not managed%s" % (
            report["reason"],
            " (fabric manager %s installed)" % report["installed_version"]
            if report["installed_version"]
            else "",
        )
    would = "would be " if check_mode else ""
    if state == "absent":
        if report["action"] == "none":
            return "%s: no fabric manager installed" % report["reason"]
        return "%s: the fabric manager's packages %sremoved with the driver" % (report["reason"], would)
    done = {"install": "installed and pinned", "update": "moved and pinned", "enable": "enabled",
            "start": "started", "restart": "restarted"}
    steps = [done[a] for a in report["action"].split(", ") if a in done]
    service = report["service"] or {}
    if steps:
        text = "fabric manager %s %s%s" % (report["wanted_version"], would, ", ".join(steps))
    else:
        text = "fabric manager %s installed and pinned, nothing to change" % report["wanted_version"]
    if service.get("managed"):
        text += " (%s now %s)" % (service["name"], service["detail"])
        if service.get("active") != "active" and not set(report["action"].split(", ")) & {"start", "restart"}:
            text += "; it starts at the next boot, with the driver of its version loaded"
    else:
        text += "; %s not managed: %s" % (service.get("name", UNIT), service.get("detail"))
    return "%s: %s" % (report["reason"], text)


def _report(need, **fields):
    """The ``fabric_manager`` return value: the need and its reason, then ``fields``."""
    return dict({"mode": need.mode, "required": need.required, "reason": need.reason, "nvswitch_count": len(need.nvswitches)},
                **fields)


def verify(system, need, dpkg, version, container, drift, notes):
    """The pre-installed fabric manager against the driver; what differs goes to ``drift``.

    Needed (NVSwitches, or fabric_manager always): installed, at exactly the driver's version
    (the loaded module's, else the installed one's), its service enabled and running where
    systemd runs. Never changes anything.
    """
    report = _report(
        need,
        packages={},
        installed_version=None,
        wanted_version=str(version) if version and need.required else None,
        service=None,
        action="none",
    )
    if not need.required:
        if need.nvswitches and need.mode == "never":
            notes.append("fabric_manager is never: the fabric manager was not checked, although the host has %s"
                         % nvswitches(len(need.nvswitches)))
        report["detail"] = "%s: not checked" % need.reason
        return report
    report["action"] = "verify"
    facts = gather_fabric_manager(system, Probes(), dpkg, len(need.nvswitches))
    report["installed_version"] = facts["version"]
    if facts["package"]:
        report["packages"] = {facts["package"]: (dpkg or {}).get(facts["package"])}
    found = _installed_drift(need, facts, version)
    if facts["installed"]:
        report["service"] = read_service(system, container)
        found += _service_drift(report["service"], notes)
    drift.extend(found)
    report["detail"] = "%s: %s" % (need.reason, "; ".join(found) or _verified(facts["version"], report["service"]))
    return report


def _installed_drift(need, facts, version):
    """What is wrong with the fabric manager installed (``facts`` of gpu_facts) against the driver ``version``."""
    if not facts["installed"]:
        return ["fabric manager not installed (%s; CUDA fails on its GPUs until one of the driver's version runs)"
                % need.reason]
    if facts["version"] is None:
        return ["fabric manager installed (%s) but its version could not be read" % (facts["path"] or facts["package"])]
    if version is not None and versions.try_parse_driver_version(facts["version"]) != version:
        return ["fabric manager %s, the driver %s (they must be the same version)" % (facts["version"], version)]
    return []


def _service_drift(service, notes):
    """What is wrong with the service: not running, or not started at boot (a note where systemd does not run it)."""
    if not service["managed"]:
        notes.append("%s not checked: %s" % (UNIT, service["detail"]))
        return []
    found = []
    if service["active"] != "active":
        found.append("fabric manager service %s is %s" % (UNIT, service["active"]))
    if service["enabled"] not in SERVICE_ENABLED:
        found.append("fabric manager service %s is %s (it does not start at boot)" % (UNIT, service["enabled"]))
    return found


def _verified(version, service):
    return "fabric manager %s at the driver's version%s" % (
        version,
        ", %s %s" % (UNIT, service["detail"]) if service["managed"] else "",
    )


def check_not_masked(need, service):
    """Fail before any change when the service is masked: it could never start."""
    if service["enabled"] == "masked":
        raise GpuFleetError(
            "nvidia_driver: fabric_manager: %s, and %s is masked, so it could never start; unmask it "
            "(systemctl unmask %s) or set fabric_manager to never" % (need.reason, UNIT, UNIT),
            service=service,
        )


def check_started(system, container, verbs, done):
    """The service after the run; fail when a start or restart did not leave it running."""
    service = read_service(system, container)
    if ("start" in verbs or "restart" in verbs) and service["active"] != "active":
        raise GpuFleetError(
            "nvidia_driver: %s is %s after `systemctl %s %s` (the fabric manager exits when the loaded driver is "
            "not its version, or when it cannot configure the NVSwitches): see `journalctl -u %s`; done: %s"
            % (UNIT, service["active"], "restart" if "restart" in verbs else "start",
               UNIT, UNIT, "; ".join(done)),
            service=service,
            done=done,
        )
    return service
