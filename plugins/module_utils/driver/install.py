# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver on a host: read its state, compute a plan, then carry the plan out.

:func:`run` is the whole of ``gpufleet.nvidia.nvidia_driver``: it reads the host through a
:class:`~ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host.Host` (files under a
root, commands through an injected runner), lets the backend of the OS family
(:mod:`ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt` for Debian and Ubuntu,
:mod:`ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.dnf` for RHEL and its
rebuilds) compute a :class:`Plan` -- the concrete files to write and commands to run -- and, only
when the plan is not empty and check mode is off, executes it in order.

Nothing is changed before every check that can fail has passed: a malformed version, or one that
the repositories do not carry, fails while reading, listing the versions that are there.
``method: preinstalled`` never plans anything: it reports the driver it finds and whether it
drifted from the declared one.

Hosts whose GPUs are joined by NVSwitches also need NVIDIA's fabric manager at exactly the
driver's version (:mod:`ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.fabric_manager`
says whether this host does, from the NVSwitches in sysfs); the backends add its packages to the
driver's set, pinned and held with it, and its service is enabled and started where systemd runs.
"""

from __future__ import annotations

import errno
import functools
import os

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.driver import (
    gather_driver,
    found_of,
    gather_modinfo,
    loaded_driver,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.machine import gather_os
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.packages import gather_dpkg
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.pci import gather_pci
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import Probes
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs, systems, versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import apt as driver_apt
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import apt_layouts
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import dnf as driver_dnf
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import fabric_manager
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.packages import (
    MANAGED_BY,
    command_line,
    tail,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_driver import found_flavor, found_version
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_gpus import (  # the GPU rules, shared
    _needs_open,
    _pre_turing,
)

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


def _choices(name):
    return inputs.one_of(*ARGUMENT_SPEC[name]["choices"])


# What each option's value must be, checked before anything is read (in check mode too): the
# argument spec's choices and types, for callers that are not AnsibleModule, and what the spec
# cannot say -- the version is ASCII (check_params then parses it), the repository's URL has
# nothing a .repo file or dnf's --repofrompath reads as a new line, option or second URL.
PARAM_RULES = {
    "method": _choices("method"),
    "state": _choices("state"),
    "version": inputs.optional(inputs.expecting(
        inputs.version, "a driver version (ASCII digits and dots, %s)" % versions.DRIVER_VERSION_HINT)),
    "flavor": _choices("flavor"),
    "kernel_modules": _choices("kernel_modules"),
    "kernel_headers": inputs.boolean,
    "manage_sources": inputs.boolean,
    "update_cache": inputs.boolean,
    "cache_valid_time": inputs.integer(0),
    "unattended_upgrades_blacklist": inputs.boolean,
    "blacklist_nouveau": inputs.boolean,
    "cuda_repo_baseurl": inputs.optional(driver_dnf.BASEURL),
    "fabric_manager": _choices("fabric_manager"),
}

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

# --- the plan ---------------------------------------------------------------------------------


class Plan(object):
    """The actions that bring the host to the desired state, in the order they run.

    Each action is a dict: ``{'kind': 'write', 'path', 'content', 'before', 'mode'}``,
    ``{'kind': 'remove', 'path', 'before'}`` or ``{'kind': 'run', 'argv', 'env'}``, with a
    ``summary`` (one line saying what it does and why) and the ``group`` it belongs to (sources,
    repository, packages, hold, pin, unattended-upgrades, versionlock, nouveau, initramfs...).
    """

    def __init__(self):
        self.actions = []
        self.notes = []

    def __bool__(self):
        return bool(self.actions)

    __nonzero__ = __bool__

    def write(self, group, path, content, before, summary, mode=0o644):
        if content == before:
            return
        self.actions.append(
            {"kind": "write", "group": group, "path": path, "content": content, "before": before, "mode": mode,
             "summary": summary}
        )

    def remove(self, group, path, before, summary):
        if before is None:
            return
        self.actions.append({"kind": "remove", "group": group, "path": path, "before": before, "summary": summary})

    def run(self, group, argv, summary, env=None, undo=None):
        """A command; ``undo`` puts back what it changes (a hold it releases) when a later step fails."""
        action = {"kind": "run", "group": group, "argv": list(argv), "env": dict(env or {}), "summary": summary}
        if undo:
            action["undo"] = list(undo)
        self.actions.append(action)

    def note(self, text):
        if text not in self.notes:
            self.notes.append(text)

    def steps(self):
        """The plan as lines a person reads: the command, or what is written where."""
        lines = []
        for action in self.actions:
            if action["kind"] == "run":
                lines.append(command_line(action["argv"]))
            elif action["kind"] == "write":
                verb = "create" if action["before"] is None else "update"
                lines.append("%s %s (%s)" % (verb, action["path"], action["summary"]))
            else:
                lines.append("remove %s (%s)" % (action["path"], action["summary"]))
        return lines

    def files(self):
        return [a for a in self.actions if a["kind"] in ("write", "remove")]


# The commands after which the files written before them say what the host has: once the
# packages moved (or the initramfs holds the nouveau blacklist) those files stay, whatever fails
# later.
COMMITTING = ("packages", "initramfs")


class Executor(object):
    """Carries a plan out: files through the host's atomic writer (``Host.write``), commands through its runner.

    A step that fails puts back what the steps before it changed and no committing command has
    made good yet (:class:`Journal`), then raises.
    """

    def __init__(self, system):
        self.system = system

    def execute(self, plan):
        done = []
        journal = Journal(self.system)
        commits = commit_points(plan.actions)
        for index, action in enumerate(plan.actions):
            try:
                self._carry_out(action, journal, done)
            except GpuFleetError as exc:
                raise journal.undo(exc)
            done.append(_step(action))
            if index in commits:
                journal.commit()
            elif action.get("undo"):
                journal.command(action["undo"])
        return done

    def _carry_out(self, action, journal, done):
        if action["kind"] == "run":
            self._run(action, done)
            return
        journal.save(action["path"])
        try:
            if action["kind"] == "write":
                self.system.write(action["path"], action["content"], mode=action["mode"])
            else:
                self.system.remove(action["path"])
        except (IOError, OSError) as exc:
            raise GpuFleetError("could not %s %s: %s%s" % (action["kind"], action["path"], exc, _done(done)),
                                path=action["path"], done=done)
        except GpuFleetError as exc:
            raise GpuFleetError(exc.msg + _done(done), **dict(exc.details, done=done))

    def _run(self, action, done):
        rc, out, err = self.system.run(action["argv"], env=action["env"] or None)
        if rc != 0:
            raise GpuFleetError(
                "`%s` failed (exit %s): %s%s" % (command_line(action["argv"]), rc, failure_output(out, err), _done(done)),
                command=action["argv"],
                rc=rc,
                stdout=out,
                stderr=err,
                done=done,
            )


def failure_output(out, err):
    """What a failed command said: its stderr's end, then its stdout's when it printed both.

    apt-get says why it refused on stdout ("The following packages have unmet dependencies: ...")
    and only "E: Unable to correct problems, you have held broken packages." on stderr.
    """
    said = tail(err, 10)
    if said and tail(out):
        return "%s (its output ended: %s)" % (said, tail(out))
    return said or tail(out, 10) or "no output"


def _done(done):
    """What was done before a step that failed, for its message."""
    return "; done before it: %s" % "; ".join(done) if done else "; nothing had been changed yet"


def commit_points(actions):
    """The indexes of the committing commands (COMMITTING): the last of each group in the plan."""
    last = {}
    for index, action in enumerate(actions):
        if action["kind"] == "run" and action["group"] in COMMITTING:
            last[action["group"]] = index
    return set(last.values())


def _step(action):
    if action["kind"] == "run":
        return command_line(action["argv"])
    return "%s %s" % ("wrote" if action["kind"] == "write" else "removed", action["path"])


class Journal(object):
    """What a run changed that a failure puts back: each file's bytes and mode before its first change
    (None: it was not there), and the commands that restore the holds and locks it released."""

    def __init__(self, system):
        self.system = system
        self.entries = []  # ("file", path, bytes or None, mode) and ("run", argv), in the order they happened
        self.saved = set()

    def save(self, path):
        """Keep ``path`` as it is now, before the run first changes it."""
        if path in self.saved:
            return
        data, mode = self._snapshot(path)
        self.saved.add(path)
        self.entries.append(("file", path, data, mode))

    def _snapshot(self, path):
        try:
            return self.system.read_bytes(path), os.stat(self.system.local(path)).st_mode & 0o7777
        except (IOError, OSError) as exc:
            if exc.errno == errno.ENOENT:
                return None, None
            raise GpuFleetError("could not read %s before changing it: %s" % (path, exc), path=path)

    def command(self, argv):
        self.entries.append(("run", list(argv)))

    def commit(self):
        """The changes so far stay: a committing command made them good."""
        self.entries = []
        self.saved = set()

    def undo(self, exc):
        """``exc`` once every change of the journal is put back, newest first, saying what was put back."""
        if not self.entries:
            return exc
        restored, words, failed = [], [], []
        for entry in reversed(self.entries):
            try:
                said = self._put_back(entry)
            except GpuFleetError as error:
                failed.append(error.msg)
                continue
            if said:
                restored.append(entry[1] if entry[0] == "file" else command_line(entry[1]))
                words.append(said)
        self.commit()
        msg = exc.msg + ("; put back as they were: %s" % ", ".join(words) if words else "")
        msg += "; could not put back: %s" % "; ".join(failed) if failed else ""
        return GpuFleetError(msg, **dict(exc.details, restored=restored, not_restored=failed))

    def _put_back(self, entry):
        """Undo one change; the words saying so (None when there was nothing to undo)."""
        if entry[0] == "run":
            rc, out, err = self.system.run(entry[1])
            if rc != 0:
                raise GpuFleetError("`%s` exited %s: %s" % (command_line(entry[1]), rc, tail(err) or tail(out)))
            return command_line(entry[1])
        dummy, path, data, mode = entry
        try:
            if data is None:
                if not os.path.lexists(self.system.local(path)):
                    return None
                self.system.remove(path)
                return "%s (removed: it was not there)" % path
            self.system.write(path, data, mode=mode)
        except (IOError, OSError) as exc:
            raise GpuFleetError("%s: %s" % (path, exc))
        return path


# --- what the host is -------------------------------------------------------------------------


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
    environ = None
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


# --- flavour --------------------------------------------------------------------------------


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


# --- nouveau and the initramfs ----------------------------------------------------------------


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


# --- diff -------------------------------------------------------------------------------------


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


# --- pre-installed ----------------------------------------------------------------------------


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


# --- the whole run ----------------------------------------------------------------------------


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
