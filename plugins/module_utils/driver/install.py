# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver on a host: read its state, compute a plan, then carry the plan out.

:func:`run` is the whole of ``gpufleet.nvidia.nvidia_driver``: it reads the host through a
:class:`~ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host.Host` (files under a
root, commands through an injected runner), lets the backend of the OS family
(:mod:`ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt` for Debian and Ubuntu,
:mod:`ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.dnf` for RHEL and its
rebuilds) compute a :class:`~.plan.Plan` -- the concrete files to write and commands to run -- and, only
when the plan is not empty and check mode is off, executes it in order (:mod:`.plan`).

Nothing is changed before every check that can fail has passed: a malformed version, or one that
the repositories do not carry, fails while reading, listing the versions that are there.
``method: preinstalled`` (:mod:`.preinstalled`) never plans anything: it reports the driver it
finds and whether it drifted from the declared one.

Hosts whose GPUs are joined by NVSwitches also need NVIDIA's fabric manager at exactly the
driver's version (:mod:`ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.fabric_manager`
says whether this host does, from the NVSwitches in sysfs); the backends add its packages to the
driver's set, pinned and held with it, and its service is enabled and started where systemd runs.
"""

from __future__ import annotations

import functools

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.pci import gather_pci
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import Probes
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs, systems, versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import apt as driver_apt
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import dnf as driver_dnf
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import fabric_manager
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.packages import MANAGED_BY, command_line
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_gpus import _needs_open, _pre_turing
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.host_state import (
    _kernel_report,
    _os_summary,
    detect_container,
    module_state,
    read_kernel_module,
    read_os,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.plan import Executor, Plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.preinstalled import verify_preinstalled

# The module's options (plugins/modules/nvidia_driver.py documents them).
ARGUMENT_SPEC = dict(
    method=dict(type="str", choices=["package", "preinstalled"], default="package"),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    version=dict(type="str"),
    flavor=dict(type="str", choices=["auto", "open", "proprietary"], default="auto"),
    kernel_modules=dict(type="str", choices=["auto", "precompiled", "dkms"], default="auto"),
    kernel_headers=dict(type="bool", default=True),
    manage_sources=dict(type="bool", default=True),
    update_cache=dict(type="bool", default=True),
    cache_valid_time=dict(type="int", default=3600),
    unattended_upgrades_blacklist=dict(type="bool", default=True),
    blacklist_nouveau=dict(type="bool", default=True),
    cuda_repo_baseurl=dict(type="str"),
    fabric_manager=dict(type="str", choices=["auto", "always", "never"], default="auto"),
)


def default_params(**params):
    """The module's parameters with their defaults, updated with ``params``."""
    out = dict((name, spec.get("default")) for name, spec in ARGUMENT_SPEC.items())
    out.update(params)
    return out


# What each option's value must be, checked before anything is read (in check mode too): the
# argument spec's choices and booleans, for callers that are not AnsibleModule, and what the spec
# cannot say -- the version is ASCII (check_params then parses it), the repository's URL has
# nothing a .repo file or dnf's --repofrompath reads as a new line, option or second URL.
_OWN_RULES = {
    "version": inputs.optional(inputs.expecting(
        inputs.version, "a driver version (ASCII digits and dots, %s)" % versions.DRIVER_VERSION_HINT)),
    "cache_valid_time": inputs.integer(0),
    "cuda_repo_baseurl": inputs.optional(driver_dnf.BASEURL),
}
PARAM_RULES = dict(
    (name, _OWN_RULES.get(name) or (inputs.one_of(*spec["choices"]) if "choices" in spec else {"bool": inputs.boolean}[spec["type"]]))
    for name, spec in ARGUMENT_SPEC.items()
)
# The running kernel's release goes into package names and the initramfs tools' argv.
KERNEL_RELEASE = functools.partial(inputs.name, what="a kernel release")
# NVIDIA made the open kernel modules its default in the R560 release.
OPEN_DEFAULT_BRANCH = 560
# The timeout of each command, in seconds: apt-get or dnf fetching the driver from a slow mirror
# and DKMS building its modules for every installed kernel take many minutes; a command that
# hangs (a lock never released, a mirror that stops answering) must still end.
COMMAND_TIMEOUT = 3600
NOUVEAU_FILE = "/etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf"
NOUVEAU_CONTENT = (
    "# %s: keep nouveau off the NVIDIA GPUs so that the nvidia module can bind them.\n"
    "# Takes effect at the next boot (the initramfs is regenerated when the host has one).\n"
    "blacklist nouveau\n"
    "options nouveau modeset=0\n" % MANAGED_BY
)


def resolve_flavor(system, requested, declared):
    """``(flavor, reason)``: ``requested`` unless auto, else what the host's GPUs and the branch want."""
    if requested in ("open", "proprietary"):
        return requested, "asked for"
    gpus, dummy = gather_pci(system, Probes())
    needs_open = [g for g in gpus if _needs_open(g)]
    needs_prop = [g for g in gpus if _pre_turing(g)]
    if needs_open and needs_prop:
        raise GpuFleetError(
            "flavor auto: no driver flavour drives every GPU of this host: %s needs the open kernel modules, "
            "%s the proprietary ones" % (needs_open[0].get("name") or needs_open[0].get("bus_id"),
                                         needs_prop[0].get("name") or needs_prop[0].get("bus_id")),
        )
    if needs_open:
        return "open", "flavor auto: %s GPUs need the open kernel modules" % _needs_open(needs_open[0])
    if needs_prop:
        return "proprietary", "flavor auto: %s GPUs need the proprietary kernel modules" % (
            needs_prop[0].get("architecture") or "pre-Turing"
        )
    if declared.branch >= OPEN_DEFAULT_BRANCH:
        return "open", "flavor auto: NVIDIA's default since R%d" % OPEN_DEFAULT_BRANCH
    return "proprietary", "flavor auto: branch %d predates NVIDIA's open default (R%d)" % (
        declared.branch,
        OPEN_DEFAULT_BRANCH,
    )


def plan_nouveau(system, plan, state, enabled, family, kernel):
    """The blacklist file and, when it changes, the initramfs regeneration. Returns a report dict."""
    before = system.read(NOUVEAU_FILE)
    want = enabled and state == "present"
    report = {"blacklist_file": NOUVEAU_FILE, "blacklisted": want, "initramfs": "unchanged"}
    if want:
        plan.write("nouveau", NOUVEAU_FILE, NOUVEAU_CONTENT, before, "blacklist nouveau")
        changed = before != NOUVEAU_CONTENT
    else:
        plan.remove("nouveau", NOUVEAU_FILE, before, "nouveau no longer blacklisted by this module")
        changed = before is not None
    if not changed:
        return report
    tool, initrd, argv = _initramfs_tool(family, kernel)
    if system.which(tool) is None:
        report["initramfs"] = "not regenerated: %s is not installed (no initramfs tooling)" % tool
    elif not system.exists(initrd):
        report["initramfs"] = "not regenerated: %s does not exist (no initramfs for the running kernel %s)" % (
            initrd,
            kernel,
        )
    else:
        plan.run("initramfs", argv, "regenerate the initramfs so that the nouveau blacklist applies at boot")
        report["initramfs"] = "regenerated: %s" % command_line(argv)
    if report["initramfs"].startswith("not regenerated"):
        plan.note("initramfs %s" % report["initramfs"])
    return report


def _initramfs_tool(family, kernel):
    if family == "redhat":
        return "dracut", "/boot/initramfs-%s.img" % kernel, ["dracut", "-f", "--kver", kernel]
    return "update-initramfs", "/boot/initrd.img-%s" % kernel, ["update-initramfs", "-u", "-k", kernel]


def build_diff(plan, package_diff):
    """Ansible's diff list: the packages and holds as lines, then each file before and after."""
    diff = []
    if package_diff is not None:
        diff.append(package_diff)
    for action in plan.files():
        diff.append(
            {
                "before_header": action["path"] if action["before"] is not None else "%s (absent)" % action["path"],
                "after_header": action["path"] if action["kind"] == "write" else "%s (absent)" % action["path"],
                "before": action["before"] or "",
                "after": action.get("content", "") if action["kind"] == "write" else "",
            }
        )
    return diff


def backend_for(os_facts):
    """The backend of the OS family: apt for Debian and Ubuntu, dnf for the RHEL family."""
    if os_facts.get("family") == "debian":
        return driver_apt.AptBackend
    return driver_dnf.DnfBackend


def check_params(params):
    """Cross-field checks the argument spec cannot express; returns the parsed version or None."""
    declared = None
    if params.get("version") not in (None, ""):
        try:
            declared = versions.parse_driver_version(params["version"])
        except GpuFleetError as exc:
            raise GpuFleetError("nvidia_driver: %s" % exc.msg, **exc.details)
    if params["method"] == "package" and params["state"] == "present" and declared is None:
        raise GpuFleetError(
            "nvidia_driver: version is required with method package and state present (%s)"
            % versions.DRIVER_VERSION_HINT
        )
    if params["method"] == "preinstalled" and params["state"] == "absent":
        raise GpuFleetError(
            "nvidia_driver: state absent with method preinstalled would remove a driver this module does not "
            "manage; method preinstalled only verifies (use state present)"
        )
    return declared


def run(system, params, check_mode=False, diff_mode=False):
    """Everything the module does; returns its result dict (raises GpuFleetError on failure).

    ``params`` are the module's, or some of them (the others take their defaults).
    """
    params = default_params(**params)
    inputs.check("nvidia_driver", PARAM_RULES, params)
    declared = check_params(params)
    os_facts = read_os(system)
    container = detect_container(system)
    if params["method"] == "preinstalled":
        return verify_preinstalled(system, params, os_facts, container)
    check_package_os(os_facts)
    state = params["state"]
    kernel = inputs.checked("nvidia_driver: the running kernel's release", KERNEL_RELEASE, system.kernel_release())
    flavor, flavor_reason = None, None
    if state == "present":
        flavor, flavor_reason = resolve_flavor(system, params.get("flavor") or "auto", declared)
    need = fabric_manager.read_need(system, params.get("fabric_manager") or "auto")
    backend = backend_for(os_facts)(system, params, os_facts, kernel, check_mode, need)
    plan = Plan()
    desired = backend.plan(plan, backend.read(), declared, flavor)
    nouveau = plan_nouveau(system, plan, state, params.get("blacklist_nouveau", True), os_facts.get("family"), kernel)
    service, verbs = plan_fabric_manager(system, plan, need, state, desired, container)
    done = []
    if plan and not check_mode:
        done = Executor(system).execute(plan)
        if verbs:
            service = fabric_manager.check_started(system, container, verbs, done)
    result = {"changed": bool(plan), "method": "package", "state": state, "os": _os_summary(os_facts),
              "backend": backend.name}
    result.update(_desired_report(desired, declared, flavor))
    result["nouveau"] = nouveau
    # against the desired version: in check mode, what the host would need once the plan ran
    kmod = read_kernel_module(system)
    mstate, reboot, reason = module_state(kmod, desired.get("version"), container, state)
    result.update(_kernel_report(kmod, mstate, reboot, reason, container))
    result.update(plan=plan.steps(), executed=done, notes=_notes(plan, desired, flavor_reason), drift=False,
                  drift_detail=[])
    result["fabric_manager"] = fabric_manager.package_report(
        need, desired.get("fabric_manager") or {}, service, verbs, desired.get("version"), check_mode, state
    )
    result["msg"] = _message(result, check_mode)
    if diff_mode:
        result["diff"] = build_diff(plan, desired.get("package_diff"))
    return result


def check_package_os(os_facts):
    """Fail unless method package supports this OS (common.systems says which)."""
    if not systems.package_supported(os_facts):
        raise GpuFleetError(
            "nvidia_driver: method package does not support %s %s (supported: %s); use method preinstalled "
            "to verify a driver installed by other means"
            % (os_facts.get("id"), os_facts.get("version_id"), systems.package_supported_list()),
            os=_os_summary(os_facts),
        )


def plan_fabric_manager(system, plan, need, state, desired, container):
    """``(service, verbs)``: the fabric manager's service enabled and started in ``plan`` where the host needs it.

    Fails before any change when its service is masked; notes it where the host has NVSwitches
    and fabric_manager is never.
    """
    if need.required and state == "present":
        service = fabric_manager.read_service(system, container)
        fabric_manager.check_not_masked(need, service)
        loaded_state, dummy, loaded_reason = module_state(read_kernel_module(system), desired.get("version"), container)
        moved = bool((desired.get("fabric_manager") or {}).get("install"))
        return service, fabric_manager.plan_service(plan, service, moved, loaded_state, loaded_reason, desired.get("version"))
    if need.nvswitches and need.mode == "never":
        plan.note(
            "fabric_manager is never: the fabric manager is not installed or checked, although the host has %s "
            "(CUDA fails on its GPUs until a fabric manager of the driver's version runs)"
            % fabric_manager.nvswitches(len(need.nvswitches))
        )
    return None, []


def _desired_report(desired, declared, flavor):
    """What the backend chose: the version, its packages and their changes."""
    return {
        "version": desired.get("version"),
        "version_requested": str(declared) if declared else None,
        "flavor": flavor,
        "available_versions": desired.get("available_versions", []),
        "packages": desired.get("packages", {}),
        "package_changes": desired.get("changes", {}),
        "pin_file": desired.get("pin_file"),
        "kernel_modules": desired.get("kernel_modules"),
    }


def _notes(plan, desired, flavor_reason):
    """The plan's notes and the backend's, after why the flavour is what it is (unless it was asked for)."""
    notes = list(plan.notes) + list(desired.get("notes", []))
    if flavor_reason and flavor_reason != "asked for":
        notes.insert(0, flavor_reason)
    return notes


def _message(result, check_mode):
    if result["state"] == "absent":
        head = "NVIDIA driver packages %s" % (
            ("would be removed" if check_mode else "removed") if result["changed"] else "absent"
        )
    else:
        head = "NVIDIA driver %s (%s) %s" % (
            result["version"],
            result["flavor"],
            ("would be installed and pinned" if check_mode else "installed and pinned")
            if result["changed"]
            else "installed and pinned, nothing to change",
        )
    if result["fabric_manager"]["required"]:
        head += "; %s" % result["fabric_manager"]["detail"]
    if result["reboot_required"]:
        head += "; reboot required: %s" % result["reboot_reason"]
    return head
