# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver on a host: read its state, compute a plan, then carry the plan out.

:func:`run` is the whole of ``gpufleet.nvidia.nvidia_driver``: it reads the host through a
:class:`System` (files under a root, commands through an injected runner), lets the backend of
the OS family (:mod:`ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt` for Debian and Ubuntu, :mod:`ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.dnf` for RHEL and its
rebuilds) compute a :class:`Plan` -- the concrete files to write and commands to run -- and, only
when the plan is not empty and check mode is off, executes it in order.

Nothing is changed before every check that can fail has passed: a malformed version, or one that
the repositories do not carry, fails while reading, listing the versions that are there.
``method: preinstalled`` never plans anything: it reports the driver it finds and whether it
drifted from the declared one.

Hosts whose GPUs are joined by NVSwitches also need NVIDIA's fabric manager at exactly the
driver's version (:class:`FabricManagerNeed` says whether this host does, from the NVSwitches in
sysfs); the backends add its packages to the driver's set, pinned and held with it, and
:func:`plan_fabric_manager_service` enables and starts its service where systemd runs.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import tempfile

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import facts as gpu_facts
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight import (  # the GPU rules, shared
    _needs_open,
    _pre_turing,
    installed_driver_flavor,
    installed_driver_version,
)

MANAGED_BY = "Managed by gpufleet.nvidia.nvidia_driver"

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


# OS id -> releases the package method supports (VERSION_ID, or its major for these ids).
PACKAGE_OS = {
    "debian": ("12", "13"),
    "ubuntu": ("22.04", "24.04"),
    "rhel": ("8", "9"),
    "rocky": ("8", "9"),
    "almalinux": ("8", "9"),
}
_MAJOR_ONLY = ("debian", "rhel", "rocky", "almalinux")

# NVIDIA made the open kernel modules its default in the R560 release.
OPEN_DEFAULT_BRANCH = 560

NOUVEAU_FILE = "/etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf"
NOUVEAU_CONTENT = (
    "# %s: keep nouveau off the NVIDIA GPUs so that the nvidia module can bind them.\n"
    "# Takes effect at the next boot (the initramfs is regenerated when the host has one).\n"
    "blacklist nouveau\n"
    "options nouveau modeset=0\n" % MANAGED_BY
)

# Files that say "this is a container" (podman/docker write the first two, systemd the third).
CONTAINER_MARKERS = ("/run/.containerenv", "/.dockerenv", "/run/systemd/container")


# --- the host ---------------------------------------------------------------------------------


class System(common_host.Host):
    """The host as seen from here: files under ``root``, commands through ``runner``.

    ``runner(argv, env=None) -> (rc, stdout, stderr)`` never raises; ``env`` adds environment
    variables. ``tmpdir`` is where temporary apt configurations are built.
    """

    def __init__(self, root="/", runner=None, kernel_root=None, kernel_release=None, path_env=None, tmpdir=None):
        super(System, self).__init__(
            root, runner=runner, kernel_root=kernel_root, kernel_release=kernel_release, path_env=path_env
        )
        self.tmpdir = tmpdir or tempfile.gettempdir()

    def run(self, argv, env=None):
        if env:
            return self.runner(list(argv), env)
        return self.runner(list(argv))

    def read(self, path):
        """The text of a host file, or None when it does not exist."""
        try:
            return self.read_text(path)
        except FileNotFoundError:
            return None
        except (IOError, OSError) as exc:
            if not self.exists(path):
                return None
            raise GpuFleetError("could not read %s: %s" % (path, exc), path=path)

    def mtime(self, path):
        try:
            return os.stat(self.local(path)).st_mtime
        except (IOError, OSError):
            return None

    def glob_names(self, directory):
        try:
            return self.listdir(directory)
        except (IOError, OSError):
            return []

    def mkdtemp(self, prefix):
        return tempfile.mkdtemp(prefix=prefix, dir=self.tmpdir)

    def write_tmp(self, path, content):
        """Write a file of a temporary configuration (a path of this machine, not the host)."""
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        with open(path, "w") as handle:
            handle.write(content)


def command_line(argv):
    """An argv as a shell would show it, for plans and messages."""
    out = []
    for arg in argv:
        if arg == "" or re.search(r"[^A-Za-z0-9_./:=+@%,~-]", arg):
            out.append("'%s'" % arg.replace("'", "'\"'\"'"))
        else:
            out.append(arg)
    return " ".join(out)


def run_checked(system, argv, what, env=None, ok=(0,)):
    """Run a read-only command and return its stdout; raise GpuFleetError when it fails."""
    rc, out, err = system.run(argv, env=env)
    if rc not in ok:
        raise GpuFleetError(
            "could not %s: `%s` exited %s: %s"
            % (what, command_line(argv), rc, _tail(err) or _tail(out) or "no output"),
            command=list(argv),
            rc=rc,
            stderr=err,
        )
    return out


def _tail(text, lines=6):
    kept = [line for line in (text or "").strip().splitlines() if line.strip()]
    return " / ".join(kept[-lines:])


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

    def run(self, group, argv, summary, env=None):
        self.actions.append({"kind": "run", "group": group, "argv": list(argv), "env": dict(env or {}),
                             "summary": summary})

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


class Executor(object):
    """Carries a plan out: files through ``writer`` (atomic writes), commands through the runner."""

    def __init__(self, system, writer=None):
        self.system = system
        self.writer = writer or LocalWriter(system)

    def execute(self, plan):
        done = []
        for action in plan.actions:
            if action["kind"] == "write":
                self.writer.write(action["path"], action["content"], action["mode"])
            elif action["kind"] == "remove":
                self.writer.remove(action["path"])
            else:
                rc, out, err = self.system.run(action["argv"], env=action["env"] or None)
                if rc != 0:
                    raise GpuFleetError(
                        "`%s` failed (exit %s): %s%s"
                        % (
                            command_line(action["argv"]),
                            rc,
                            _tail(err, 10) or _tail(out, 10) or "no output",
                            "; done before it: %s" % "; ".join(done) if done else "; nothing had been changed yet",
                        ),
                        command=action["argv"],
                        rc=rc,
                        stdout=out,
                        stderr=err,
                        done=done,
                    )
            done.append(_step(action))
        return done


def _step(action):
    if action["kind"] == "run":
        return command_line(action["argv"])
    return "%s %s" % ("wrote" if action["kind"] == "write" else "removed", action["path"])


class LocalWriter(object):
    """Plain writes under the system's root (unit tests); the module passes an atomic writer."""

    def __init__(self, system):
        self.system = system

    def write(self, path, content, mode=0o644):
        local = self.system.local(path)
        directory = os.path.dirname(local)
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        existed = os.path.exists(local)
        with open(local, "w") as handle:
            handle.write(content)
        if not existed:
            os.chmod(local, mode)

    def remove(self, path):
        local = self.system.local(path)
        if os.path.lexists(local):
            os.remove(local)


# --- what the host is -------------------------------------------------------------------------


def read_os(system):
    facts = gpu_facts.gather_os(system, gpu_facts.Probes())
    if not facts.get("id"):
        raise GpuFleetError("could not tell the OS: neither /etc/os-release nor /usr/lib/os-release is readable")
    return facts


def package_os_supported(os_facts):
    os_id = os_facts.get("id")
    release = os_facts.get("version_major") if os_id in _MAJOR_ONLY else os_facts.get("version_id")
    return os_id in PACKAGE_OS and release in PACKAGE_OS[os_id]


def supported_list():
    return ", ".join("%s %s" % (os_id, "/".join(rel)) for os_id, rel in sorted(PACKAGE_OS.items()))


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
    """What the kernel has loaded and what modinfo would load, for the running kernel."""
    modules = []
    try:
        modules = gpu_facts.parse_proc_modules(system.read_text("/proc/modules", kernel=True))
        proc_modules = True
    except (IOError, OSError):
        proc_modules = False
    loaded_version = loaded_flavor = None
    try:
        loaded_version, loaded_flavor = gpu_facts.parse_nvrm_version(
            system.read_text("/proc/driver/nvidia/version", kernel=True)
        )
    except (IOError, OSError):
        pass
    try:
        loaded_version = system.read_text("/sys/module/nvidia/version", kernel=True).strip() or loaded_version
    except (IOError, OSError):
        pass
    installed = gpu_facts.gather_modinfo(system, gpu_facts.Probes())
    return {
        "loaded": "nvidia" in modules or loaded_version is not None,
        "loaded_version": loaded_version,
        "loaded_flavor": loaded_flavor,
        "installed_version": installed.get("version"),
        "installed_flavor": installed.get("flavor"),
        "installed_filename": installed.get("filename"),
        "proc_modules": proc_modules,
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
    gpus, dummy = gpu_facts.gather_pci(system, gpu_facts.Probes())
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


# --- fabric manager ---------------------------------------------------------------------------

FABRIC_MANAGER_UNIT = "nvidia-fabricmanager"
# Every package of NVIDIA's fabric manager and of its NVSwitch library, whatever the repository
# and branch names them: nvidia-fabricmanager[-dev][-<branch>] (apt), nvidia-fabric-manager[-devel]
# and nvidia-fabricmanager[-devel] (rpm), libnvidia-nscq[-<branch>], and NVIDIA's
# cuda-drivers-fabricmanager[-<branch>] metapackages (which pull NVIDIA's whole driver in).
FABRIC_MANAGER_FAMILY = re.compile(
    r"^(nvidia-fabricmanager|nvidia-fabric-manager|libnvidia-nscq|cuda-drivers-fabricmanager)(-dev|-devel)?(-\d+)?$"
)
# NVIDIA renamed the fabric manager's packages in its CUDA repositories at R580 (no branch in the
# name from there on).
FABRIC_MANAGER_UNBRANCHED_FROM = 580
# `systemctl is-enabled` answers that start the unit at boot.
SERVICE_ENABLED = ("enabled", "static", "generated")


def fabric_manager_packages(repository, branch):
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
    if branch >= FABRIC_MANAGER_UNBRANCHED_FROM:
        return ["libnvidia-nscq", "nvidia-fabricmanager"]
    if repository == "cuda-rpm":
        return ["libnvidia-nscq-%d" % branch, "nvidia-fabric-manager"]
    return ["libnvidia-nscq-%d" % branch, "nvidia-fabricmanager-%d" % branch]


def _nvswitches(count):
    return "%d NVSwitch%s" % (count, "" if count == 1 else "es")


class FabricManagerNeed(object):
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
            return "fabric_manager is %s%s" % (self.mode, " (the host has %s)" % _nvswitches(count) if count else "")
        if count:
            return "this host has %s" % _nvswitches(count)
        return "no NVSwitch on this host"


def read_fabric_manager_need(system, mode):
    """The need of this host, its NVSwitches read from sysfs as gpu_facts reads them."""
    dummy, nvswitches = gpu_facts.gather_pci(system, gpu_facts.Probes())
    return FabricManagerNeed(mode, nvswitches)


def fabric_manager_choice(need, declared, available, fm_available, names, where, notes):
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


def fabric_manager_installed_version(installed):
    """The upstream version of the fabric manager among ``{package: version}``, or None."""
    for name in sorted(installed):
        if FABRIC_MANAGER_FAMILY.match(name) and "fabric" in name and "-dev" not in name and "cuda-drivers" not in name:
            return upstream_version(installed[name])
    return None


def read_fabric_manager_service(system, container):
    """``{'name', 'managed', 'enabled', 'active', 'detail'}`` of the nvidia-fabricmanager unit.

    ``managed`` is False, with the reason in ``detail``, where no systemd runs the host's
    services: a container, a host booted without systemd, no systemctl.
    """
    service = {"name": FABRIC_MANAGER_UNIT, "managed": False, "enabled": None, "active": None, "detail": None}
    if container:
        service["detail"] = (
            "this is a %s container, where no systemd runs the host's services: enable and start %s on the host"
            % (container, FABRIC_MANAGER_UNIT)
        )
        return service
    if not system.isdir("/run/systemd/system"):
        service["detail"] = (
            "systemd is not running on this host (no /run/systemd/system): start %s with the host's init system"
            % FABRIC_MANAGER_UNIT
        )
        return service
    if system.which("systemctl") is None:
        service["detail"] = "systemctl is not installed: start %s with the host's init system" % FABRIC_MANAGER_UNIT
        return service
    enabled = _systemctl(system, "is-enabled")
    active = _systemctl(system, "is-active")
    service.update(managed=True, enabled=enabled, active=active, detail="%s, %s" % (enabled, active))
    return service


def _systemctl(system, verb):
    rc, out, err = system.run(["systemctl", verb, FABRIC_MANAGER_UNIT])
    first = next((line.strip() for line in (out or "").splitlines() if line.strip()), "")
    if first:
        return first
    if "No such file" in (err or "") or "not found" in (err or "").lower():
        return "not-found"
    if rc:
        return "unknown"
    return "enabled" if verb == "is-enabled" else "active"


def plan_fabric_manager_service(plan, service, moved, kmod_state, kmod_reason, version):
    """Enable (and, with the driver of its version loaded, start) nvidia-fabricmanager. Returns the verbs."""
    if not service["managed"]:
        plan.note("%s is not enabled or started by this module: %s" % (FABRIC_MANAGER_UNIT, service["detail"]))
        return []
    verbs = []
    if service["enabled"] not in SERVICE_ENABLED:
        plan.run("fabric-manager", ["systemctl", "enable", FABRIC_MANAGER_UNIT], "start the fabric manager at every boot")
        verbs.append("enable")
    if kmod_state == "current":
        if service["active"] != "active":
            plan.run("fabric-manager", ["systemctl", "start", FABRIC_MANAGER_UNIT],
                     "start the fabric manager: the driver %s is loaded" % version)
            verbs.append("start")
        elif moved:
            plan.run("fabric-manager", ["systemctl", "restart", FABRIC_MANAGER_UNIT],
                     "run the fabric manager at its new version")
            verbs.append("restart")
    elif service["active"] != "active" or moved:
        # The fabric manager compares its version with the loaded driver's when it starts and
        # exits when they differ: started now, it would fail.
        plan.note(
            "%s starts at the next boot, with the driver %s loaded (it refuses to run with a driver of another "
            "version; now: %s)" % (FABRIC_MANAGER_UNIT, version, kmod_reason)
        )
    return verbs


def fabric_manager_report(need, fm, service, verbs, version, check_mode, state):
    """The ``fabric_manager`` return value of the package method."""
    fm = fm or {}
    installed = fm.get("installed") or {}
    packages = fm.get("packages") or {}
    actions = []
    if fm.get("remove"):
        actions.append("remove")
    if fm.get("install"):
        moved = [n for n in fm["install"] if n in installed]
        actions.append("update" if moved and len(moved) == len(fm["install"]) else "install")
    actions += verbs
    report = {
        "mode": need.mode,
        "required": need.required,
        "reason": need.reason,
        "nvswitch_count": len(need.nvswitches),
        "packages": dict(sorted(packages.items())),
        "installed_version": fabric_manager_installed_version(installed),
        "wanted_version": version if need.required and state == "present" else None,
        "service": service,
        "action": ", ".join(actions) or "none",
    }
    report["detail"] = _fabric_manager_detail(report, check_mode, state)
    return report


def _fabric_manager_detail(report, check_mode, state):
    if not report["required"]:
        if report["mode"] == "never" and report["nvswitch_count"]:
            return (
                "fabric_manager is never: not managed, although the host has %s (CUDA fails on its GPUs until a "
                "fabric manager of the driver's version runs)" % _nvswitches(report["nvswitch_count"])
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
        text += "; %s not managed: %s" % (service.get("name", FABRIC_MANAGER_UNIT), service.get("detail"))
    return "%s: %s" % (report["reason"], text)


# --- versions ---------------------------------------------------------------------------------


def upstream_version(package_version):
    """``535.261.03`` of a package version ``535.261.03-1``, ``3:580.95.05-1.el9`` or ``580.95.05-0ubuntu1``."""
    text = package_version.split(":", 1)[1] if ":" in package_version else package_version
    return text.split("-", 1)[0]


def sort_versions(items):
    """Driver versions (strings) sorted oldest first; those that do not parse go last."""

    def key(text):
        parsed = versions.try_parse_driver_version(text)
        return (0, parsed.key()) if parsed else (1, (text,))

    return sorted(set(items), key=key)


def choose_version(requested, available, flavor, where):
    """The newest of ``available`` (upstream versions) that ``requested`` names; or fail listing them."""
    matching = [v for v in available if versions.try_parse_driver_version(v) and versions.matches(requested, v)]
    if matching:
        return sort_versions(matching)[-1]
    listed = ", ".join(sort_versions(available)) or "none"
    raise GpuFleetError(
        "version %s (%s) is not available from %s; available: %s"
        % (requested, flavor, where, listed),
        version=str(requested),
        flavor=flavor,
        available_versions=sort_versions(available),
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


def lines(items):
    return "".join("%s\n" % item for item in items)


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
    probes = gpu_facts.Probes()
    dpkg = gpu_facts.gather_dpkg(system, probes)
    driver = gpu_facts.gather_driver(system, probes, dpkg)
    facts = {"driver": driver}
    if driver["source"] == "absent":
        raise GpuFleetError(
            "method preinstalled: no NVIDIA driver on this host (no nvidia module loaded or installed, no "
            "nvidia-smi, no libcuda.so.1); nothing is installed with method preinstalled",
            method="preinstalled",
            driver=driver,
        )
    version = installed_driver_version(facts)
    version_source = None
    if version is not None:
        version_source = "loaded module" if driver.get("version") else (
            "nvidia-smi" if (driver.get("nvidia_smi") or {}).get("driver_version") else "modinfo"
        )
    flavor = installed_driver_flavor(facts)
    packaged = None
    if version is None or flavor is None:
        packaged = packaged_driver(system)
    if version is None and packaged and packaged["version"]:
        version = versions.try_parse_driver_version(upstream_version(packaged["version"]))
        version_source = "package %s" % packaged["name"] if version else None
    if flavor is None and packaged:
        flavor = packaged["flavor"]
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
    need = read_fabric_manager_need(system, params.get("fabric_manager") or "auto")
    notes = []
    fabric_manager = verify_fabric_manager(system, need, dpkg, version, container, drift, notes)
    kmod = read_kernel_module(system)
    mstate, reboot, reason = module_state(kmod, str(version) if version else None, container)
    if kmod["loaded"] and kmod["installed_version"] and kmod["loaded_version"] != kmod["installed_version"]:
        mstate, reboot = "outdated", True
        reason = "the loaded nvidia module is %s, the installed one %s: reboot to load it" % (
            kmod["loaded_version"],
            kmod["installed_version"],
        )
    msg = "pre-installed driver %s (%s, %s)%s" % (
        version or "of unknown version",
        flavor or "flavour unknown",
        driver["source"],
        ": drifted: %s" % "; ".join(drift) if drift else "",
    )
    return {
        "changed": False,
        "msg": msg,
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
        "kernel_module": dict(kmod, state=mstate, detail=reason),
        "reboot_required": reboot,
        "reboot_reason": reason if reboot else None,
        "in_container": container is not None,
        "container": container,
        "plan": [],
        "notes": notes,
        "fabric_manager": fabric_manager,
    }


def verify_fabric_manager(system, need, dpkg, version, container, drift, notes):
    """The pre-installed fabric manager against the driver; what differs goes to ``drift``.

    Needed (NVSwitches, or fabric_manager always): installed, at exactly the driver's version
    (the loaded module's, else the installed one's), its service enabled and running where
    systemd runs. Never changes anything.
    """
    report = {
        "mode": need.mode,
        "required": need.required,
        "reason": need.reason,
        "nvswitch_count": len(need.nvswitches),
        "packages": {},
        "installed_version": None,
        "wanted_version": str(version) if version and need.required else None,
        "service": None,
        "action": "none",
    }
    if not need.required:
        if need.nvswitches and need.mode == "never":
            notes.append("fabric_manager is never: the fabric manager was not checked, although the host has %s"
                         % _nvswitches(len(need.nvswitches)))
        report["detail"] = "%s: not checked" % need.reason
        return report
    report["action"] = "verify"
    facts = gpu_facts.gather_fabric_manager(system, gpu_facts.Probes(), dpkg, len(need.nvswitches))
    report["installed_version"] = facts["version"]
    if facts["package"]:
        report["packages"] = {facts["package"]: (dpkg or {}).get(facts["package"])}
    found = []
    if not facts["installed"]:
        found.append("fabric manager not installed (%s; CUDA fails on its GPUs until one of the driver's version "
                     "runs)" % need.reason)
    elif facts["version"] is None:
        found.append("fabric manager installed (%s) but its version could not be read" % (facts["path"] or facts["package"]))
    elif version is not None and versions.try_parse_driver_version(facts["version"]) != version:
        found.append("fabric manager %s, the driver %s (they must be the same version)" % (facts["version"], version))
    if facts["installed"]:
        service = read_fabric_manager_service(system, container)
        report["service"] = service
        if not service["managed"]:
            notes.append("%s not checked: %s" % (FABRIC_MANAGER_UNIT, service["detail"]))
        else:
            if service["active"] != "active":
                found.append("fabric manager service %s is %s" % (FABRIC_MANAGER_UNIT, service["active"]))
            if service["enabled"] not in SERVICE_ENABLED:
                found.append("fabric manager service %s is %s (it does not start at boot)"
                             % (FABRIC_MANAGER_UNIT, service["enabled"]))
    drift.extend(found)
    report["detail"] = "%s: %s" % (
        need.reason,
        "; ".join(found) if found else "fabric manager %s at the driver's version%s" % (
            facts["version"],
            ", %s %s" % (FABRIC_MANAGER_UNIT, report["service"]["detail"]) if report["service"]["managed"] else "",
        ),
    )
    return report


def packaged_driver(system):
    """``{'name', 'version', 'flavor'}`` of the driver's packages (dpkg or rpm), or None.

    For a driver that is installed but neither loaded nor readable by modinfo (a container, a
    kernel whose module is not built yet): the kernel module package tells the flavour, the
    libraries' package the version.
    """
    if system.which("dpkg-query"):
        from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import apt as driver_apt

        rc, out, dummy = system.run(driver_apt.DPKG_QUERY)
        installed = driver_apt.parse_dpkg_query(out) if rc in (0, 1) else {}
        names = sorted(installed)
        library = next((n for n in names if re.match(r"^(libcuda1|libnvidia-compute-\d+(-server)?)$", n)), None)
        module_re = re.compile(r"^(nvidia(-open)?-kernel-dkms|nvidia-dkms-\d+.*|linux-modules-nvidia-\d+.*)$")
        module = next((n for n in names if module_re.match(n)), None)
        if not library and not module:
            return None
        flavor = None
        if module:
            flavor = "open" if "open" in module else "proprietary"
        return {
            "name": library or module,
            "version": installed[library or module]["version"] if library else None,
            "flavor": flavor,
        }
    if system.which("rpm"):
        from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import dnf as driver_dnf

        rc, out, dummy = system.run(["rpm", "-q", "--qf", driver_dnf.RPM_QF] + driver_dnf.DRIVER_RPMS)
        installed = driver_dnf.parse_rpm_q(out)
        if not installed:
            return None
        flavor = "open" if "kmod-nvidia-open-dkms" in installed else (
            "proprietary" if "kmod-nvidia-latest-dkms" in installed else None
        )
        name = "nvidia-driver-cuda" if "nvidia-driver-cuda" in installed else sorted(installed)[0]
        return {"name": name, "version": installed[name], "flavor": flavor}
    return None


def _os_summary(os_facts):
    return {
        "id": os_facts.get("id"),
        "version_id": os_facts.get("version_id"),
        "codename": os_facts.get("codename"),
        "family": os_facts.get("family"),
    }


# --- the whole run ----------------------------------------------------------------------------


def backend_for(os_facts):
    """The backend module for the OS (imported here to keep the core free of both)."""
    if os_facts.get("family") == "debian":
        from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import apt as driver_apt

        return driver_apt.AptBackend
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import dnf as driver_dnf

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


def run(system, params, check_mode=False, diff_mode=False, writer=None):
    """Everything the module does; returns its result dict (raises GpuFleetError on failure)."""
    declared = check_params(params)
    os_facts = read_os(system)
    container = detect_container(system)
    if params["method"] == "preinstalled":
        return verify_preinstalled(system, params, os_facts, container)

    if not package_os_supported(os_facts):
        raise GpuFleetError(
            "nvidia_driver: method package does not support %s %s (supported: %s); use method preinstalled "
            "to verify a driver installed by other means"
            % (os_facts.get("id"), os_facts.get("version_id"), supported_list()),
            os=_os_summary(os_facts),
        )
    kernel = system.kernel_release()
    flavor = flavor_reason = None
    if params["state"] == "present":
        flavor, flavor_reason = resolve_flavor(system, params.get("flavor") or "auto", declared)

    need = read_fabric_manager_need(system, params.get("fabric_manager") or "auto")
    backend = backend_for(os_facts)(system, params, os_facts, kernel, check_mode, fabric_manager=need)
    current = backend.read()
    plan = Plan()
    desired = backend.plan(plan, current, declared, flavor)
    nouveau = plan_nouveau(
        system, plan, params["state"], params.get("blacklist_nouveau", True), os_facts.get("family"), kernel
    )
    fm = desired.get("fabric_manager") or {}
    service, verbs = None, []
    if need.required and params["state"] == "present":
        service = read_fabric_manager_service(system, container)
        if service["enabled"] == "masked":
            raise GpuFleetError(
                "nvidia_driver: fabric_manager: %s, and %s is masked, so it could never start; unmask it "
                "(systemctl unmask %s) or set fabric_manager to never" % (need.reason, FABRIC_MANAGER_UNIT,
                                                                          FABRIC_MANAGER_UNIT),
                service=service,
            )
        loaded_state, dummy, loaded_reason = module_state(read_kernel_module(system), desired.get("version"), container)
        verbs = plan_fabric_manager_service(
            plan, service, bool(fm.get("install")), loaded_state, loaded_reason, desired.get("version")
        )
    elif need.nvswitches and need.mode == "never":
        plan.note(
            "fabric_manager is never: the fabric manager is not installed or checked, although the host has %s "
            "(CUDA fails on its GPUs until a fabric manager of the driver's version runs)" % _nvswitches(len(need.nvswitches))
        )
    changed = bool(plan)
    done = []
    if changed and not check_mode:
        done = Executor(system, writer).execute(plan)
        if verbs:
            service = _check_fabric_manager_started(system, container, verbs, done)

    # against the desired version: in check mode, what the host would need once the plan ran
    kmod = read_kernel_module(system)
    mstate, reboot, reason = module_state(kmod, desired.get("version"), container, params["state"])
    notes = list(plan.notes) + list(desired.get("notes", []))
    if flavor_reason and flavor_reason != "asked for":
        notes.insert(0, flavor_reason)
    result = {
        "changed": changed,
        "method": "package",
        "state": params["state"],
        "os": _os_summary(os_facts),
        "backend": backend.name,
        "version": desired.get("version"),
        "version_requested": str(declared) if declared else None,
        "flavor": flavor,
        "available_versions": desired.get("available_versions", []),
        "packages": desired.get("packages", {}),
        "package_changes": desired.get("changes", {}),
        "pin_file": desired.get("pin_file"),
        "kernel_modules": desired.get("kernel_modules"),
        "nouveau": nouveau,
        "kernel_module": dict(kmod, state=mstate, detail=reason),
        "reboot_required": reboot,
        "reboot_reason": reason if reboot else None,
        "in_container": container is not None,
        "container": container,
        "plan": plan.steps(),
        "executed": done,
        "notes": notes,
        "drift": False,
        "drift_detail": [],
        "fabric_manager": fabric_manager_report(
            need, fm, service, verbs, desired.get("version"), check_mode, params["state"]
        ),
    }
    result["msg"] = _message(result, check_mode)
    if diff_mode:
        result["diff"] = build_diff(plan, desired.get("package_diff"))
    return result


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


def _check_fabric_manager_started(system, container, verbs, done):
    """The service after the run; fail when a start or restart did not leave it running."""
    service = read_fabric_manager_service(system, container)
    if ("start" in verbs or "restart" in verbs) and service["active"] != "active":
        raise GpuFleetError(
            "nvidia_driver: %s is %s after `systemctl %s %s` (the fabric manager exits when the loaded driver is "
            "not its version, or when it cannot configure the NVSwitches): see `journalctl -u %s`; done: %s"
            % (FABRIC_MANAGER_UNIT, service["active"], "restart" if "restart" in verbs else "start",
               FABRIC_MANAGER_UNIT, FABRIC_MANAGER_UNIT, "; ".join(done)),
            service=service,
            done=done,
        )
    return service


# --- helpers shared by the backends -----------------------------------------------------------


def ensure_tmp_clean(path):
    shutil.rmtree(path, ignore_errors=True)


def join(*parts):
    return posixpath.join(*parts)
