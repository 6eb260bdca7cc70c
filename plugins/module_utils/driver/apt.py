# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver from the distribution's own apt archive: Debian 12/13 and Ubuntu 22.04/24.04.

Debian builds the driver in ``non-free`` (the open kernel module and ``nvidia-persistenced`` in
``contrib``, the GSP firmware in ``non-free-firmware``); Ubuntu builds Canonical's server driver
(``-server`` packages, with precompiled signed kernel modules per kernel) in ``restricted``. The
backend

- checks the distribution's entries of the apt sources (one-line ``sources.list`` or deb822
  ``.sources``) for those components and adds the missing ones, editing only the component list
  of those entries and keeping the rest of each file;
- lists the versions the archive carries -- through a temporary apt configuration with the edited
  sources when they still lack the components, so that a version the archive does not carry
  fails before anything changes;
- installs a headless set of packages, every one at an explicit version, pins them with an apt
  preferences file (priority 1001), holds them (``apt-mark hold``) and lists them in
  unattended-upgrades' ``Package-Blacklist``, so that no automatic upgrade can leave the
  libraries at another version than the loaded kernel module;
- moves, on a version or flavour change, every package of the old driver: to the new version
  when the archive has it there, else out (purged);
- on hosts that need NVIDIA's fabric manager (NVSwitches), adds its packages, at exactly the
  driver's version, to the set that is installed, pinned, held and kept from unattended-upgrades:
  on Ubuntu from Canonical's ``multiverse`` (added to the sources like ``restricted``), on Debian
  from whatever apt source carries them -- Debian's own archive does not package the fabric
  manager, so without NVIDIA's CUDA repository in the sources the module fails before any change.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import time

from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import fabric_manager
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.packages import (
    plan_result,
    choose_version,
    common_upstreams,
    package_diff as diff_of,
    run_checked,
    sort_versions,
    version_at,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.dpkg import APT_ENV, DPKG_QUERY, parse_dpkg_query
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_archive import (
    Archive,
    Request,
    parse_madison,
    parse_policy,
    parse_show_depends,
    write_local,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_holds import (
    PIN_FILE,
    UU_FILE,
    apt_names,
    apt_packages,
    render_pin,
    render_unattended,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_layouts import (
    DebianLayout,
    UbuntuLayout,
    _next_kernel_of,
    layout_for,
    next_boot_headers,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_sources import Sources

LISTS_DIR = "/var/lib/apt/lists"
APT_GET_INSTALL = [
    "apt-get",
    "install",
    "-y",
    "-q",
    "--no-install-recommends",
    "--allow-downgrades",
    "-o",
    "Dpkg::Options::=--force-confdef",
    "-o",
    "Dpkg::Options::=--force-confold",
]


def package_changes(installed, want, removals, headers):
    """``(install, hold, unhold)``: what moves to its version (and the headers), what is held after, what first released."""
    held = set(n for n, i in installed.items() if i["held"])
    install = dict((n, v) for n, v in want.items() if not installed.get(n) or installed[n]["version"] != v)
    install.update(headers)
    unhold = sorted(held & (set(install) | set(removals)))
    hold = sorted(n for n in want if n not in held or n in unhold)
    return install, hold, unhold


class AptBackend(object):
    """Reads the apt state of a Debian or Ubuntu host and plans the driver's packages and files."""

    def __init__(self, system, params, os_facts, kernel, check_mode, need):
        self.system = system
        self.params = params
        self.os = os_facts
        self.kernel = kernel
        self.check_mode = check_mode
        self.fabric_manager = need
        self.fm_required = self.fabric_manager.required
        self.layout = layout_for(os_facts, kernel, fabric_manager=self.fm_required)
        self.name = self.layout.name
        codename = os_facts.get("codename") or ""
        self.suites = [codename, codename + "-updates", codename + "-security"]
        self.apt_options = []
        self.tmp = None

    # -- reading --------------------------------------------------------------------------------

    def read(self):
        out = run_checked(self.system, DPKG_QUERY, "list the installed packages", ok=(0, 1))
        return {
            "installed": parse_dpkg_query(out),
            "sources": Sources(self.system, self.suites, self.layout.components),
            "pin": self.system.read(PIN_FILE),
            "unattended": self.system.read(UU_FILE),
        }

    def _lists_fresh(self):
        """Whether the newest of apt's package lists is younger than cache_valid_time."""
        mtimes = [self.system.mtime(posixpath.join(LISTS_DIR, n)) or 0 for n in self.system.names(LISTS_DIR) if "_Packages" in n]
        return bool(mtimes) and time.time() - max(mtimes) < int(self.params.get("cache_valid_time") or 0)

    def _prepare_queries(self, plan, sources):
        """Point the apt queries at the host's lists (refreshed when stale), or at a temporary
        configuration holding the distribution entries with the components added."""
        manage = self.params.get("manage_sources", True)
        if manage and sources.changes:
            self.tmp = self.system.mkdtemp("gpufleet-apt-")
            oneline, deb822 = sources.query_files()
            write_local(os.path.join(self.tmp, "sources.list"), oneline)
            write_local(os.path.join(self.tmp, "sources.list.d", "gpufleet.sources"), deb822)
            for sub in ("lists/partial", "cache/archives/partial"):
                os.makedirs(os.path.join(self.tmp, sub))
            self.apt_options = [
                "-o", "Dir::Etc::SourceList=%s" % os.path.join(self.tmp, "sources.list"),
                "-o", "Dir::Etc::SourceParts=%s" % os.path.join(self.tmp, "sources.list.d"),
                "-o", "Dir::State::Lists=%s" % os.path.join(self.tmp, "lists"),
                "-o", "Dir::Cache=%s" % os.path.join(self.tmp, "cache"),
                "-o", "APT::Sandbox::User=root",
                "-o", "Acquire::Languages=none",
            ]
            run_checked(
                self.system,
                ["apt-get"] + self.apt_options + ["update", "-q"],
                "read %s through a temporary apt configuration with the components added (the host's "
                "configuration is untouched)" % self.layout.archive,
            )
            return
        if not sources.entries:
            plan.note(
                "no %s entry with the main component in the apt sources: they were left as they are, and the "
                "driver is looked for in the configured repositories" % " / ".join(self.suites)
            )
        elif sources.changes:
            plan.note(
                "manage_sources is off: the apt sources lack %s and were left as they are"
                % ", ".join(self.layout.components)
            )
        if self.params.get("update_cache", True) and not self.check_mode and not self._lists_fresh():
            run_checked(self.system, ["apt-get", "update", "-q"], "update the apt lists")

    def _apt(self, args, what):
        return run_checked(self.system, ["apt-cache"] + self.apt_options + list(args), what)

    # -- planning -------------------------------------------------------------------------------

    def plan(self, plan, current, declared, flavor):
        try:
            if self.params["state"] == "absent":
                return self._plan_absent(plan, current)
            return self._plan_present(plan, current, declared, flavor)
        finally:
            if self.tmp:
                shutil.rmtree(self.tmp, ignore_errors=True)
                self.tmp = None

    def _old_versions(self, installed):
        """The package versions of the driver installed now (normally one)."""
        found = set(i["version"] for n, i in installed.items() if self.layout.is_marker(n))
        if not found:
            found = set(i["version"] for n, i in installed.items() if self.layout.family(n))
        return found

    def _plan_present(self, plan, current, declared, flavor):
        installed = current["installed"]
        notes = []
        self._prepare_queries(plan, current["sources"])
        modules = self.layout.modules_choice(self.params.get("kernel_modules") or "auto")
        request = self._request(installed, declared.branch, flavor)
        archive = self._read_archive(request, declared.branch)
        available, chosen_modules, version = self._choose_version(request, archive, declared, flavor, modules, notes)
        want = self._want(request, archive, installed, declared.branch, flavor, chosen_modules, version, notes)
        carried, removals = self._extras_at(request, archive.madison, version)
        want.update(carried)
        removals += [name for name in sorted(installed) if name not in removals and self._leftover(name, want)]
        header_installs = {}
        if chosen_modules == "dkms":
            header_installs = self._plan_headers(archive.madison, installed, request.headers, notes)
        install, hold, unhold = package_changes(installed, want, removals, header_installs)
        self._plan_sources(plan, current)
        self._plan_pins(plan, current, want, version, flavor, unhold)
        self._plan_packages(plan, install, removals, hold)
        changes = {"install": ["%s=%s" % item for item in sorted(install.items())], "remove": removals, "hold": hold,
                   "unhold": unhold}
        return plan_result(PIN_FILE, changes, package_diff(installed, want, removals, header_installs),
                           self._fabric_manager_report(installed, want, install, removals), notes, version, available, want,
                           chosen_modules)

    def _ours(self, name):
        """Whether ``name`` is a package this module manages: the driver's, a companion, the fabric manager's."""
        return bool(
            self.layout.family(name)
            or name in self.layout.companions
            or (self.fm_required and fabric_manager.FAMILY.match(name))
        )

    def _request(self, installed, branch, flavor):
        """What the plan asks the archive about (:class:`Request`)."""
        names = set(self.layout.core(branch, flavor, "dkms"))
        precompiled = None
        if isinstance(self.layout, UbuntuLayout):
            precompiled = self.layout.precompiled(branch, flavor)
            names.add(precompiled)
        fm_names, fm_other = [], []
        if self.fm_required:
            fm_names = fabric_manager.packages(self.layout.fm_repository, branch)
            fm_other = sorted(n for n in installed if fabric_manager.FAMILY.match(n) and n not in fm_names)
            names |= set(fm_names)
        headers = self.layout.headers() + next_boot_headers(self.system, self.kernel) if self.params.get("kernel_headers", True) else []
        return Request(names, precompiled, fm_names, fm_other, self._extras(installed, names, branch), headers)

    def _extras(self, installed, names, branch):
        """``{name: the name at the new branch, or None}`` of the installed driver's packages this module did not choose.

        libnvidia-encode1, a desktop metapackage...: carried along to the new version when the
        archive has it there, else removed.
        """
        old_versions = self._old_versions(installed)
        return dict(
            (name, self.layout.map_extra(name, branch))
            for name, info in installed.items()
            if info["version"] in old_versions and name not in names and not self._ours(name)
        )

    def _read_archive(self, request, branch):
        """What the archive has of the requested packages (:class:`Archive`)."""
        madison = parse_madison(self._apt(["madison"] + request.query(), "list the versions of the driver's packages"))
        policy = {}
        if self.layout.companions:
            policy = parse_policy(
                self._apt(["policy"] + list(self.layout.companions), "read the candidate versions of %s"
                          % ", ".join(self.layout.companions))
            )
        precompiled_driver = {}
        if request.precompiled and madison.get(request.precompiled):
            precompiled_driver = parse_show_depends(
                self._apt(["show", request.precompiled], "read the precompiled kernel modules"), branch
            )
        return Archive(madison, policy, precompiled_driver)

    def _choose_version(self, request, archive, declared, flavor, modules, notes):
        """``(available, kernel_modules, version)``: the driver's versions there, and the one chosen with its modules."""
        where = "%s (%s %s)" % (self.layout.archive, self.os.get("id"), self.os.get("version_id"))
        ubuntu = isinstance(self.layout, UbuntuLayout)
        available = common_upstreams(archive.madison, self.layout.core(declared.branch, flavor, "dkms"))
        if ubuntu and not available:
            available = common_upstreams(archive.madison, self.layout.core(declared.branch, flavor, "precompiled"))
        choosable = self._fabric_manager_choice(declared, available, archive.madison, request.fm_names, notes)
        if ubuntu:
            chosen_modules, version = self._ubuntu_modules(
                modules, declared, flavor, choosable, request.precompiled, archive.precompiled_driver, where
            )
            return available, chosen_modules, version
        return available, "dkms", self._choose(declared, flavor, choosable, where)

    def _want(self, request, archive, installed, branch, flavor, chosen_modules, version, notes):
        """``{name: package version}`` of the driver's packages at ``version``, its companions and fabric manager."""
        madison = archive.madison
        want = dict(
            (name, version_at(madison, name, version))
            for name in self.layout.core(branch, flavor, chosen_modules)
        )
        if chosen_modules == "precompiled":
            want[request.precompiled] = next(
                v for v in madison[request.precompiled] if archive.precompiled_driver.get(v) == version
            )
        want.update(self._companions(archive.policy, installed, notes))
        if request.fm_names:
            want.update(self._fabric_manager_versions(request, madison, want, version))
        return want

    def _companions(self, policy, installed, notes):
        """NVIDIA's tools at their own versions: the candidate, else the installed one; a note when neither."""
        want = {}
        for name in self.layout.companions:
            info = policy.get(name) or {}
            if info.get("candidate"):
                want[name] = info["candidate"]
            elif installed.get(name):
                want[name] = installed[name]["version"]
            else:
                notes.append("%s is not available from the configured repositories: not installed" % name)
        return want

    def _fabric_manager_versions(self, request, madison, want, version):
        """The fabric manager's packages at the driver's version (the driver's own package version where they
        have it); those of another branch or naming that the archive has there move with them."""
        driver_pkg = next((want[n] for n in sorted(want) if self.layout.is_marker(n)), None)
        out = dict((name, version_at(madison, name, version, prefer=driver_pkg)) for name in request.fm_names)
        for name in request.fm_other:
            target = version_at(madison, name, version, required=False)
            if target:
                out[name] = target
        return out

    def _extras_at(self, request, madison, version):
        """``(carried, removals)``: the extras the archive has at ``version`` (by their new names), those that go."""
        carried, removals = {}, []
        for name, mapped in sorted(request.extras.items()):
            target = version_at(madison, mapped, version, required=False) if mapped else None
            if target:
                carried[mapped] = target
            if not target or mapped != name:
                removals.append(name)
        return carried, removals

    def _leftover(self, name, want):
        """Whether the installed ``name`` goes: a package of the driver's family, or of the fabric manager, not wanted."""
        return name not in want and bool(
            self.layout.family(name)
            or self.layout.stale_module_package(name, want)
            or (self.fm_required and fabric_manager.FAMILY.match(name))
        )

    def _plan_pins(self, plan, current, want, version, flavor, unhold):
        """Release the holds of what moves, then pin the packages and keep them from unattended-upgrades."""
        if unhold:
            apt_names("apt-mark unhold", unhold)
            plan.run("hold", ["apt-mark", "unhold"] + unhold, "release the holds of the packages that move",
                     undo=["apt-mark", "hold"] + unhold)
        plan.write("pin", PIN_FILE, render_pin(want, version, flavor), current["pin"],
                   "pin the driver's packages to their versions")
        if self.params.get("unattended_upgrades_blacklist", True):
            plan.write("unattended-upgrades", UU_FILE, render_unattended(want, version), current["unattended"],
                       "keep the driver out of unattended-upgrades")
        else:
            plan.remove("unattended-upgrades", UU_FILE, current["unattended"], "unattended_upgrades_blacklist is off")

    @staticmethod
    def _plan_packages(plan, install, removals, hold):
        """One apt-get install of every package at its version (the removals purged in it), then the holds."""
        if install or removals:
            apt_packages("apt-get install", install)
            apt_names("apt-get install", removals)
            argv = list(APT_GET_INSTALL) + (["--purge"] if removals else [])
            argv += ["%s=%s" % item for item in sorted(install.items())] + ["%s-" % n for n in removals]
            plan.run("packages", argv, "install the driver's packages at their versions", env=APT_ENV)
        if hold:
            plan.run("hold", ["apt-mark", "hold"] + apt_names("apt-mark hold", hold), "hold the driver's packages")

    def _plan_sources(self, plan, current):
        changes = current["sources"].changes if self.params.get("manage_sources", True) else []
        for path, before, after, missing in changes:
            added = sorted(set(c for dummy, comps in missing for c in comps))
            plan.write("sources", path, after, before, "add %s to its %s entries" % (" ".join(added), self.suites[0]))
        if changes:
            plan.run("sources", ["apt-get", "update", "-q"], "read the components added")

    def _plan_absent(self, plan, current):
        installed = current["installed"]
        old_versions = self._old_versions(installed)
        removals = sorted(
            n
            for n, i in installed.items()
            if self._ours(n) or i["version"] in old_versions or self.layout.stale_module_package(n, {})
        )
        held = sorted(n for n in removals if installed[n]["held"])
        apt_names("apt-get purge", removals)
        if held:
            plan.run("hold", ["apt-mark", "unhold"] + held, "release the holds of the driver's packages",
                     undo=["apt-mark", "hold"] + held)
        if removals:
            plan.run("packages", ["apt-get", "purge", "-y", "-q"] + removals, "remove the driver's packages",
                     env=APT_ENV)
        plan.remove("pin", PIN_FILE, current["pin"], "no driver to pin")
        plan.remove("unattended-upgrades", UU_FILE, current["unattended"], "no driver to keep back")
        return plan_result(PIN_FILE, {"install": [], "remove": removals, "hold": [], "unhold": held},
                           package_diff(installed, {}, removals, {}), self._fabric_manager_report(installed, {}, {}, removals))

    def _plan_headers(self, madison, installed, headers, notes):
        out = {}
        for name in headers:
            if installed.get(name):
                continue
            if madison.get(name):
                out[name] = madison[name][0]
            elif name == headers[0]:
                notes.append(
                    "%s is not in the repositories: DKMS cannot build the nvidia module for the running kernel %s"
                    % (name, self.kernel)
                )
            elif _next_kernel_of(name, self.kernel):
                notes.append(
                    "%s is not in the repositories: DKMS cannot build the nvidia module for the kernel the node boots next, %s; "
                    "it would come back without the driver" % (name, _next_kernel_of(name, self.kernel))
                )
        return out

    def _fabric_manager_report(self, installed, want, install, removals):
        versions_ = dict((n, i["version"]) for n, i in installed.items())
        return fabric_manager.plan_report(versions_, want, install, removals, self.fm_required)

    def _fabric_manager_choice(self, declared, available, madison, fm_names, notes):
        """The driver versions to choose from: with the fabric manager needed, those it exists at."""
        if not fm_names:
            return available
        fm_available = common_upstreams(madison, fm_names)
        if not fm_available and isinstance(self.layout, DebianLayout):
            if any(versions.try_parse_driver_version(v) and versions.matches(declared, v) for v in available):
                raise GpuFleetError(
                    "nvidia_driver: fabric_manager: %s, and NVIDIA's fabric manager must run at exactly the driver's "
                    "version, but Debian's archive does not package the fabric manager and no apt source read has "
                    "%s%s; nothing was changed. Add NVIDIA's CUDA repository for Debian "
                    "(https://developer.download.nvidia.com/compute/cuda/repos/) to the apt sources and choose a "
                    "driver version it carries, use method preinstalled for a driver installed with its fabric "
                    "manager by other means, or set fabric_manager to never to install the driver alone"
                    % (
                        self.fabric_manager.reason,
                        " / ".join(fm_names),
                        " (the sources lack %s, so only Debian's entries were read, through a temporary "
                        "configuration)" % " ".join(self.layout.components)
                        if self.tmp
                        else "",
                    ),
                    fabric_manager_packages=list(fm_names),
                    fabric_manager_versions=[],
                )
            return available
        where = "%s (%s %s)" % (self.layout.fm_archive, self.os.get("id"), self.os.get("version_id"))
        return fabric_manager.choice(self.fabric_manager, declared, available, fm_available, fm_names, where, notes)

    def _choose(self, declared, flavor, available, where):
        try:
            return choose_version(declared, available, flavor, where)
        except GpuFleetError as exc:
            hint = ""
            if isinstance(self.layout, DebianLayout) and not available:
                hint = (
                    " (none at all: no %s entry with main in the apt sources gets %s from this module; add the "
                    "components to the entries that hold Debian's archive)"
                    % (self.suites[0], " ".join(self.layout.components))
                )
            elif isinstance(self.layout, UbuntuLayout) and not available:
                branches = self._ubuntu_branches()
                hint = "; branches with -server packages: %s" % (", ".join(branches) or "none")
                exc.details["available_branches"] = branches
            raise GpuFleetError("nvidia_driver: " + exc.msg + hint, **exc.details)

    def _ubuntu_branches(self):
        dummy, out, dummy = self.system.run(["apt-cache"] + self.apt_options + ["pkgnames", "nvidia-headless-no-dkms-"])
        matches = (re.match(r"^nvidia-headless-no-dkms-(\d+)-server(-open)?$", line.strip()) for line in out.splitlines())
        return [str(b) for b in sorted(set(int(m.group(1)) for m in matches if m))]

    def _ubuntu_modules(self, requested, declared, flavor, available, pkg, precompiled_driver, where):
        """Precompiled signed modules when they carry the chosen driver for this kernel, else DKMS."""
        carried = sort_versions(precompiled_driver.values())
        usable = [v for v in carried if v in available and versions.matches(declared, v)]
        if requested in ("auto", "precompiled") and usable:
            return "precompiled", sort_versions(usable)[-1]
        if requested == "precompiled":
            raise GpuFleetError(
                "nvidia_driver: kernel_modules precompiled: %s carries %s for the running kernel %s, not %s; use "
                "kernel_modules auto or dkms, or a version the precompiled modules carry"
                % (pkg, "driver " + ", ".join(carried) if carried else "nothing (no such package)", self.kernel,
                   declared),
                available_versions=carried,
            )
        return "dkms", self._choose(declared, flavor, available, where)


def package_diff(installed, want, removals, headers):
    """The packages before and after, one ``name=version`` line each (held ones marked)."""
    names = set(want) | set(removals) | set(headers)
    before = sorted(
        "%s=%s%s" % (n, installed[n]["version"], " (held)" if installed[n]["held"] else "") for n in names if n in installed
    )
    after = sorted(["%s=%s (held)" % item for item in want.items()] + ["%s=%s" % item for item in headers.items()])
    return diff_of(before, after)
