# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver from NVIDIA's CUDA repository on RHEL, Rocky Linux and AlmaLinux 8, 9 and 10.

NVIDIA's driver installation guide for these releases: the CUDA repository
(``cuda-rhel<major>.repo``), a module stream of ``nvidia-driver`` per branch and flavour
(``<branch>-dkms`` for the proprietary kernel modules, ``<branch>-open`` for the open ones) and,
for a compute-only ("headless") node, ``nvidia-driver-cuda`` with ``kmod-nvidia-latest-dkms`` or
``kmod-nvidia-open-dkms``. On RHEL 10 the repository has no module: the packages are installed and
version-locked alone (the same guide's RHEL 10 rows). The backend

- adds the repository when no enabled repository points at it, and lists its versions through
  ``--repofrompath`` before that, so that a version the repository does not carry fails first;
- enables the branch's stream (resetting another one), installs every package at its exact
  version (``dnf install`` moves an installed package up or down to the version named) and locks
  each one with ``dnf versionlock``;
- fails before any change when DKMS itself is not available (it comes from EPEL);
- on hosts that need NVIDIA's fabric manager (NVSwitches), installs and locks its packages from the
  same repository at exactly the driver's version (``nvidia-fabric-manager`` and
  ``libnvidia-nscq-<branch>`` before R580, ``nvidia-fabricmanager`` and ``libnvidia-nscq`` from
  R580: :func:`~ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.fabric_manager.packages`), and removes those of another branch or naming.
"""

from __future__ import annotations

import functools
import posixpath
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import kernels
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import fabric_manager
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.packages import (
    MANAGED_BY,
    checked,
    checked_names,
    checked_packages,
    choose_version,
    command_line,
    common_upstreams,
    package_diff,
    plan_result,
    run_checked,
    version_at,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

REPO_DIR = "/etc/yum.repos.d"
DEFAULT_BASEURL = "https://developer.download.nvidia.com/compute/cuda/repos/rhel%(major)s/%(arch)s"
GPG_KEY = "D42D0685.pub"
VERSIONLOCK_PLUGIN = "python3-dnf-plugin-versionlock"
LOCK_FILE = "/etc/dnf/plugins/versionlock.list"
KERNEL_PACKAGES = {"proprietary": "kmod-nvidia-latest-dkms", "open": "kmod-nvidia-open-dkms"}
# The compute-only set: nvidia-driver-cuda (nvidia-smi, nvidia-persistenced's service ...) and the
# packages it pulls at the same version, named so that each one is installed and locked at it.
COMMON = (
    "nvidia-driver-cuda",
    "nvidia-driver-cuda-libs",
    "nvidia-kmod-common",
    "nvidia-modprobe",
    "nvidia-persistenced",
)
# What tells that a driver came from these packages (method preinstalled).
DRIVER_RPMS = ["nvidia-driver-cuda", "kmod-nvidia-latest-dkms", "kmod-nvidia-open-dkms"]
STREAM_SUFFIX = {"proprietary": "dkms", "open": "open"}
# The releases whose CUDA repository holds the driver in module streams (RHEL 10's has none).
MODULAR_MAJORS = ("8", "9")
RPM_QF = "%{NAME}\\t%{EPOCH}:%{VERSION}-%{RELEASE}\\n"
# What needs no repository: listing and deleting version locks (the plugin's local file) and leaving
# a stream (dnf's local module state). Without --disablerepo, dnf 4 loads the metadata of every
# enabled repository first, and one that cannot be reached (any of the node's) failed them, so that
# state absent failed where `dnf remove` itself works (seen with the real dnf 4.14: scenario el9,
# fixtures el9-standin/*-unreachable-repo).
OFFLINE = ["dnf", "--disablerepo=*"]
LOCKS_LIST = ["dnf", "-q", "--disablerepo=*", "versionlock", "list"]
LOCKS_DELETE = OFFLINE + ["versionlock", "delete"]
STREAM_RESET = OFFLINE + ["module", "reset", "-y", "nvidia-driver"]
# rpm -qa patterns matching every name of fabric_manager.FAMILY on RHEL.
FABRIC_MANAGER_GLOBS = ["nvidia-fabric*", "libnvidia-nscq*", "cuda-drivers-fabricmanager*"]

_STREAM_ROW = re.compile(r"^nvidia-driver\s+(?P<stream>\S+)(?P<flags>(?:\s+\[[a-z]\])*)\s")
_LOCK = re.compile(r"^(?P<name>.+)-(?P<epoch>\d+):(?P<version>[^-:]+)-(?P<release>[^-]+)\.\*$")


def parse_rpm_q(text):
    """``{name: evr}`` of ``rpm -q --qf RPM_QF``; ``package X is not installed`` lines are skipped."""
    found = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 2:
            continue
        epoch, dummy, rest = parts[1].partition(":")
        found[parts[0].strip()] = "%s:%s" % ("0" if epoch in ("(none)", "") else epoch, rest.strip())
    return found


def parse_module_list(text):
    """``{stream: set(flags)}`` of ``dnf module list nvidia-driver`` (flags: d, e, x, i)."""
    streams = {}
    for line in text.splitlines():
        match = _STREAM_ROW.match(line)
        if match:
            streams[match.group("stream")] = set(re.findall(r"\[([a-z])\]", match.group("flags")))
    return streams


def parse_repoquery(text):
    """``{name: [evr, ...]}`` of ``dnf repoquery --qf '%{name}\\t%{epoch}:%{version}-%{release}'``, newest first."""
    found = {}
    for line in text.splitlines():
        parts = line.strip().split("\t")
        if len(parts) != 2:
            continue
        evrs = found.setdefault(parts[0], [])
        if parts[1] not in evrs:
            evrs.append(parts[1])
    for name in found:
        found[name] = sorted(found[name], key=_evr_key, reverse=True)
    return found


def parse_versionlock(text):
    """``{name: evr}`` of ``dnf versionlock list`` (the locks, not the excludes)."""
    found = {}
    for line in text.splitlines():
        match = _LOCK.match(line.strip())
        if match and not line.strip().startswith("!"):
            found[match.group("name")] = "%s:%s-%s" % (match.group("epoch"), match.group("version"), match.group("release"))
    return found


def _evr_key(evr):
    epoch, dummy, rest = evr.partition(":")
    version, dummy, release = rest.partition("-")

    def parts(text):
        return tuple((0, int(p)) if _number(p) else (1, p) for p in re.split(r"[.\-_+~]", text) if p)

    return (int(epoch) if _number(epoch) else 0, parts(version), parts(release))


def _number(text):
    """Whether ``text`` is ASCII digits (str.isdigit() also takes "²", which int() refuses)."""
    return text.isascii() and text.isdigit()


def parse_repo_files(texts):
    """``[(path, section, baseurl, enabled)]`` of the repositories in ``{path: text}``."""
    found = []
    for path, text in sorted(texts.items()):
        section = None
        values = {}

        def flush():
            if section is not None:
                found.append((path, section, values.get("baseurl", "").rstrip("/"), values.get("enabled", "1") != "0"))

        for line in text.splitlines():
            stripped = line.strip()
            if not stripped or stripped.startswith(("#", ";")):
                continue
            if stripped.startswith("[") and stripped.endswith("]"):
                flush()
                section, values = stripped[1:-1].strip(), {}
                continue
            key, sep, value = stripped.partition("=")
            if sep:
                values[key.strip().lower()] = value.strip()
        flush()
    return found


def packaged_driver(host):
    """``{'name', 'version', 'flavor'}`` of the driver's packages rpm lists, or None (method preinstalled)."""
    dummy, out, dummy = host.run(["rpm", "-q", "--qf", RPM_QF] + DRIVER_RPMS)
    installed = parse_rpm_q(out)
    if not installed:
        return None
    name = "nvidia-driver-cuda" if "nvidia-driver-cuda" in installed else sorted(installed)[0]
    flavor = next((f for f in ("open", "proprietary") if KERNEL_PACKAGES[f] in installed), None)
    return {"name": name, "version": installed[name], "flavor": flavor}


def _specs(install, where="dnf install"):
    """``name-evr`` of each package to install (the name alone where no version is named), sorted.

    The names and versions come from rpm and dnf: one that dnf would read as an option, or as
    two arguments, is refused.
    """
    checked_packages(where, install, inputs.rpm_package, inputs.rpm_version)
    return ["%s-%s" % (n, evr) if evr else n for n, evr in sorted(install.items())]


# The repository's URL as it goes into the .repo file's baseurl and gpgkey and into --repofrompath:
# dnf splits those at commas, so a comma would add a second URL (and a second key to import).
BASEURL = functools.partial(inputs.url, forbid=",")
# A repository id, as dnf takes it in a .repo file's [section] and in --repofrompath.
_REPO_ID = re.compile(r"[A-Za-z0-9_.:-]+", re.ASCII)


def _repo_id(value):
    if not isinstance(value, str) or not _REPO_ID.fullmatch(value):
        raise inputs.Invalid("a repository id (ASCII letters, digits and _ . : -)")
    return value


def _lock_changes(locks, want, managed):
    """``(stale, lock)``: the locks of ``managed`` packages to release, the packages of ``want`` to lock."""
    stale = sorted(n for n, evr in locks.items() if n in managed and want.get(n) != evr)
    lock = sorted(n for n in want if locks.get(n) != want[n])
    return stale, lock


def render_repo(repo_id, baseurl):
    """NVIDIA's repository as a .repo file; an id or URL that would add a line, a section or a second URL is refused."""
    checked("the CUDA repository", "id", _repo_id, repo_id)
    checked("the CUDA repository", "baseurl", BASEURL, baseurl)
    return (
        "# %s: NVIDIA's CUDA repository, for the NVIDIA driver.\n"
        "[%s]\nname=%s\nbaseurl=%s\nenabled=1\ngpgcheck=1\ngpgkey=%s/%s\n"
        % (MANAGED_BY, repo_id, repo_id, baseurl, baseurl, GPG_KEY)
    )


class DnfBackend(object):
    name = "dnf"

    def __init__(self, system, params, os_facts, kernel, check_mode, need):
        self.system = system
        self.fabric_manager = need
        self.fm_required = self.fabric_manager.required
        self.params = params
        self.os = os_facts
        self.kernel = kernel
        self.check_mode = check_mode
        self.major = os_facts.get("version_major")
        self.arch = self._arch(kernel)
        self.baseurl = (params.get("cuda_repo_baseurl") or DEFAULT_BASEURL % {"major": self.major, "arch": self.arch}).rstrip("/")
        self.repo_id = "cuda-rhel%s-%s" % (self.major, self.arch)
        self.repo_file = posixpath.join(REPO_DIR, "cuda-rhel%s.repo" % self.major)
        self.repo_options = []
        # NVIDIA's CUDA repository for RHEL 10 has no nvidia-driver module (RHEL 10 carries no modular
        # content): there `dnf module list nvidia-driver` exits 1, "No matching Modules to list" (the
        # real dnf 4, scenario el10), and the branch is held by the version locks alone.
        self.modular = str(self.major) in MODULAR_MAJORS

    @staticmethod
    def _arch(kernel):
        """The repository's name of the kernel's architecture: sbsa for aarch64, else x86_64."""
        return "sbsa" if kernel.endswith(".aarch64") else "x86_64"

    def _names(self):
        return sorted(set(COMMON) | set(KERNEL_PACKAGES.values()))

    # -- reading --------------------------------------------------------------------------------

    def read(self):
        devel = "kernel-devel-%s" % self.kernel
        argv = ["rpm", "-q", "--qf", RPM_QF] + self._names() + [VERSIONLOCK_PLUGIN, "dkms", devel]
        # rpm exits with the number of packages it did not find
        rc, out, err = self.system.run(argv)
        if rc < 0 or (rc > 0 and not out and "is not installed" not in out + err):
            raise GpuFleetError("could not list the installed packages: `%s` exited %s: %s"
                                % (command_line(argv), rc, err.strip()))
        installed = parse_rpm_q(out)
        if self.fm_required:
            # every package of the fabric manager, whatever its branch or naming
            installed.update(parse_rpm_q(run_checked(
                self.system, ["rpm", "-qa", "--qf", RPM_QF] + FABRIC_MANAGER_GLOBS,
                "list the installed fabric manager packages",
            )))
        texts = {}
        for name in self.system.names(REPO_DIR):
            if name.endswith(".repo"):
                texts[posixpath.join(REPO_DIR, name)] = self.system.read(posixpath.join(REPO_DIR, name)) or ""
        repos = parse_repo_files(texts)
        configured = [r for r in repos if r[3] and r[2] == self.baseurl]
        locks = {}
        if VERSIONLOCK_PLUGIN in installed:
            locks = parse_versionlock(run_checked(self.system, LOCKS_LIST, "list the version locks"))
        return {
            "installed": installed,
            "repo_configured": bool(configured),
            "repo_before": self.system.read(self.repo_file),
            "locks": locks,
            "devel": devel,
        }

    def _dnf(self, args, what):
        return run_checked(self.system, ["dnf", "-q"] + self.repo_options + list(args), what)

    # -- planning -------------------------------------------------------------------------------

    def plan(self, plan, current, declared, flavor):
        if self.params["state"] == "absent":
            return self._plan_absent(plan, current)
        return self._plan_present(plan, current, declared, flavor)

    def _plan_present(self, plan, current, declared, flavor):
        installed = current["installed"]
        notes = []
        streams, found, fm_names, fm_other = self._query(current, declared)
        names = sorted(set(COMMON) | {KERNEL_PACKAGES[flavor]})
        available = common_upstreams(found, names)
        version = self._choose(declared, flavor, available, found, fm_names, notes)
        stream = self._stream(declared, flavor, streams)
        self._check_dkms(installed, found)
        want = dict((name, version_at(found, name, version)) for name in names + fm_names)
        other = [n for n in KERNEL_PACKAGES.values() if n != KERNEL_PACKAGES[flavor] and n in installed]
        install = dict((n, evr) for n, evr in want.items() if installed.get(n) != evr)
        install.update(self._devel(current, found, notes))
        install.update(self._next_devel(found, notes))
        stale, lock = _lock_changes(current["locks"], want, set(self._names()) | set(fm_names) | set(fm_other))
        self._plan_repository(plan, current, installed)
        self._plan_stream(plan, current["locks"], stale, streams, stream)
        self._plan_packages(plan, fm_other, install, other)
        if lock:
            locking = _specs(dict((n, want[n]) for n in lock), "dnf versionlock add")
            plan.run("versionlock", ["dnf", "versionlock", "add"] + locking, "lock the driver's packages at their versions")
        return plan_result(LOCK_FILE, {"install": _specs(install), "remove": other + fm_other, "lock": lock, "unlock": stale},
                           self._diff(installed, want, other + fm_other, current["locks"]),
                           fabric_manager.plan_report(installed, want, install, fm_other, self.fm_required),
                           notes, version, available, want, "dkms")

    def _query(self, current, declared):
        """``(streams, found, fm_names, fm_other)``: the driver's streams and the versions of its packages.

        Through ``--repofrompath`` while NVIDIA's repository is not configured. ``found`` is
        ``{name: [evr, ...]}``; ``fm_names`` the fabric manager's packages of the driver's branch
        (when the host needs it), ``fm_other`` those installed of another branch or naming.
        """
        if not current["repo_configured"]:
            self.repo_options = ["--repofrompath=%s,%s" % (self.repo_id, self.baseurl),
                                 "--setopt=%s.gpgcheck=0" % self.repo_id]
        streams = {}
        if self.modular:
            streams = parse_module_list(self._dnf(["module", "list", "nvidia-driver"], "list the nvidia-driver streams"))
        fm_names, fm_other = [], []
        if self.fm_required:
            fm_names = fabric_manager.packages("cuda-rpm", declared.branch)
            fm_other = sorted(n for n in current["installed"] if fabric_manager.FAMILY.match(n) and n not in fm_names)
        found = parse_repoquery(
            self._dnf(
                ["repoquery", "--disable-modular-filtering", "--showduplicates", "--qf",
                 "%{name}\\t%{epoch}:%{version}-%{release}"] + self._names() + fm_names + ["dkms", current["devel"]],
                "list the versions of the driver's packages",
            )
        )
        return streams, found, fm_names, fm_other

    def _choose(self, declared, flavor, available, found, fm_names, notes):
        """The driver version: the newest ``declared`` names, among those with a fabric manager when it is needed."""
        where = "NVIDIA's CUDA repository (%s)" % self.baseurl
        choosable = available
        if fm_names:
            choosable = fabric_manager.choice(self.fabric_manager, declared, available, common_upstreams(found, fm_names),
                                              fm_names, where, notes)
        try:
            return choose_version(declared, choosable, flavor, where)
        except GpuFleetError as exc:
            raise GpuFleetError("nvidia_driver: " + exc.msg, **exc.details)

    def _stream(self, declared, flavor, streams):
        """The module stream of the branch and flavour (None on RHEL 10: no module); fails when the repository has none."""
        if not self.modular:
            return None
        stream = "%d-%s" % (declared.branch, STREAM_SUFFIX[flavor])
        if stream not in streams:
            raise GpuFleetError(
                "nvidia_driver: the CUDA repository has no nvidia-driver stream %s for RHEL %s; streams: %s"
                % (stream, self.major, ", ".join(sorted(streams)) or "none"),
                streams=sorted(streams),
            )
        return stream

    @staticmethod
    def _check_dkms(installed, found):
        if "dkms" not in installed and not found.get("dkms"):
            raise GpuFleetError(
                "nvidia_driver: dkms is neither installed nor available from the enabled repositories; the driver's "
                "kernel modules are built with DKMS, which comes from EPEL: enable EPEL (and CodeReady Builder on "
                "RHEL, CRB / PowerTools on Rocky and AlmaLinux) first",
            )

    def _devel(self, current, found, notes):
        """``{kernel-devel of the running kernel: None}`` to install, when wanted and missing; a note when unavailable."""
        if not self.params.get("kernel_headers", True) or current["devel"] in current["installed"]:
            return {}
        running = self.kernel.rsplit(".", 1)[0] if self.kernel.endswith((".x86_64", ".aarch64")) else self.kernel
        if any(evr.split(":", 1)[1] == running for evr in found.get("kernel-devel", [])):
            return {current["devel"]: None}
        notes.append("%s is not in the repositories: DKMS cannot build the nvidia module for the running "
                     "kernel %s" % (current["devel"], self.kernel))
        return {}

    def _next_devel(self, found, notes):
        """``{kernel-devel of the kernel the node boots next: None}`` where it is another installed kernel whose
        sources (/usr/src/kernels/RELEASE) are missing, so DKMS builds the module for it before the reboot."""
        release = kernels.next_boot_other(self.system, self.kernel) if self.params.get("kernel_headers", True) else None
        if not release or self.system.isdir("/usr/src/kernels/%s" % release):
            return {}
        bare = release.rsplit(".", 1)[0] if release.endswith((".x86_64", ".aarch64")) else release
        if any(evr.split(":", 1)[1] == bare for evr in found.get("kernel-devel", [])):
            return {"kernel-devel-%s" % release: None}
        notes.append("kernel-devel-%s is not in the repositories: DKMS cannot build the nvidia module for the kernel the node "
                     "boots next, %s; it would come back without the driver" % (release, release))
        return {}

    def _plan_repository(self, plan, current, installed):
        """NVIDIA's repository when no enabled one points at it, and dnf's versionlock plugin when missing."""
        if not current["repo_configured"]:
            plan.write("repository", self.repo_file, render_repo(self.repo_id, self.baseurl), current["repo_before"],
                       "add NVIDIA's CUDA repository")
        if VERSIONLOCK_PLUGIN not in installed:
            plan.run("versionlock", ["dnf", "install", "-y", VERSIONLOCK_PLUGIN], "install dnf's versionlock plugin")

    @staticmethod
    def _plan_stream(plan, locks, stale, streams, stream):
        """Release the locks of what moves, then follow the branch's stream (leaving another one first), if any."""
        if stale:
            held = _specs(dict((n, locks[n]) for n in stale), "dnf versionlock delete")
            plan.run("versionlock", LOCKS_DELETE + held, "release the locks of what moves",
                     undo=["dnf", "versionlock", "add"] + held)
        if stream is None:
            return
        enabled = [s for s, flags in streams.items() if "e" in flags]
        if enabled != [stream]:
            reset = ["dnf", "module", "reset", "-y", "nvidia-driver"]
            if enabled:
                plan.run("stream", reset, "leave the stream %s" % enabled[0],
                         undo=["dnf", "module", "enable", "-y", "nvidia-driver:%s" % enabled[0]])
            plan.run("stream", ["dnf", "module", "enable", "-y", "nvidia-driver:%s" % stream],
                     "follow the branch's stream", undo=reset)

    @staticmethod
    def _plan_packages(plan, fm_other, install, other):
        if fm_other:
            plan.run("packages", ["dnf", "remove", "-y"] + checked_names("dnf remove", fm_other, inputs.rpm_package),
                     "remove the fabric manager packages of another branch or naming")
        if install:
            plan.run("packages", ["dnf", "install", "-y", "--allowerasing"] + _specs(install),
                     "install the driver's packages at their versions")
        if other:
            plan.note("%s (the other flavour) is replaced through --allowerasing" % ", ".join(other))

    def _plan_absent(self, plan, current):
        installed = current["installed"]
        names = set(self._names())
        if self.fm_required:
            names |= set(n for n in installed if fabric_manager.FAMILY.match(n))
        ours = sorted(n for n in names if n in installed)
        locked = sorted(n for n in current["locks"] if n in names)
        if locked:
            held = _specs(dict((n, current["locks"][n]) for n in locked), "dnf versionlock delete")
            plan.run("versionlock", LOCKS_DELETE + held, "release the driver's locks",
                     undo=["dnf", "versionlock", "add"] + held)
        if ours:
            plan.run("packages", ["dnf", "remove", "-y"] + checked_names("dnf remove", ours, inputs.rpm_package), "remove the driver's packages")
            if self.modular:
                plan.run("stream", STREAM_RESET, "leave the driver's stream")
        return plan_result(LOCK_FILE, {"install": [], "remove": ours, "lock": [], "unlock": locked},
                           self._diff(installed, {}, ours, current["locks"]),
                           fabric_manager.plan_report(installed, {}, {}, ours, self.fm_required),
                           ["NVIDIA's CUDA repository stays configured"] if current["repo_configured"] else [])

    @staticmethod
    def _diff(installed, want, removals, locks):
        names = set(want) | set(removals)
        before = sorted("%s-%s%s" % (n, installed[n], " (locked)" if n in locks else "") for n in names if n in installed)
        after = sorted("%s-%s (locked)" % item for item in want.items())
        return package_diff(before, after)
