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

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import kernels
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import fabric_manager
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.packages import (
    MANAGED_BY,
    checked,
    checked_packages,
    choose_version,
    lines,
    run_checked,
    sort_versions,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs, versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.dpkg import APT_ENV, DPKG_QUERY, parse_dpkg_query
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

PIN_FILE = "/etc/apt/preferences.d/gpufleet-nvidia-driver.pref"
UU_FILE = "/etc/apt/apt.conf.d/51gpufleet-nvidia-driver"
SOURCES_LIST = "/etc/apt/sources.list"
SOURCES_DIR = "/etc/apt/sources.list.d"
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


# --- what each distribution calls things --------------------------------------------------------


class DebianLayout(object):
    """Debian's packaging of the driver (source packages nvidia-graphics-drivers and, for the open
    kernel module, nvidia-open-gpu-kernel-modules)."""

    name = "apt-debian"
    archive = "Debian's non-free, contrib and non-free-firmware"
    components = ("contrib", "non-free", "non-free-firmware")
    kernel_packages = {
        "proprietary": ("nvidia-kernel-dkms", "nvidia-kernel-support"),
        "open": ("nvidia-open-kernel-dkms", "nvidia-open-kernel-support"),
    }
    # The headless user space: nvidia-smi, libcuda1 and libnvidia-ml1 with every package they
    # depend on at the same version (Depends "= version"), so that each one is pinned and held.
    common = (
        "firmware-nvidia-gsp",
        "libcuda1",
        "libnvidia-cfg1",
        "libnvidia-ml1",
        "libnvidia-pkcs11-openssl3",
        "libnvidia-ptxjitcompiler1",
        "nvidia-alternative",
        "nvidia-legacy-check",
        "nvidia-smi",
    )
    # NVIDIA's tools packaged from their own sources, at their own versions.
    companions = ("nvidia-persistenced", "nvidia-modprobe")

    # Debian does not package NVIDIA's fabric manager (no fabric-manager source package in the
    # archive); NVIDIA's CUDA repository for Debian does, under its own names.
    fm_repository = "cuda-apt"
    fm_archive = "the configured apt sources"

    def __init__(self, kernel, fabric_manager=False):
        self.kernel = kernel

    def is_marker(self, name):
        """Whether ``name`` tells which driver is installed (its version is the driver's)."""
        return name in ("libcuda1", "nvidia-smi", "libnvidia-ml1")

    def core(self, branch, flavor, modules):
        return sorted(self.kernel_packages[flavor] + self.common)

    def family(self, name):
        """Whether ``name`` is one of the driver's packages this layout installs (any flavour)."""
        return name in self.common or any(name in names for names in self.kernel_packages.values())

    def stale_module_package(self, name, want):
        return False

    def map_extra(self, name, branch):
        return name

    def headers(self):
        names = ["linux-headers-%s" % self.kernel]
        match = re.match(r"^\d+\.\d+\.\d+-\d+-(.+)$", self.kernel)
        if match:  # the flavour's metapackage brings the headers of every later kernel
            names.append("linux-headers-%s" % match.group(1))
        return names

    def modules_choice(self, requested):
        if requested == "precompiled":
            raise GpuFleetError(
                "kernel_modules: precompiled is not offered by Debian, whose driver packages build the kernel "
                "module with DKMS (use auto or dkms)"
            )
        return "dkms"


class UbuntuLayout(object):
    """Canonical's Enterprise Ready Driver packages (``-server``) in Ubuntu's restricted component."""

    name = "apt-ubuntu"
    archive = "Ubuntu's restricted"
    components = ("restricted",)
    companions = ()
    # The packages of the headless set, whatever their branch and flavour (the metapackages
    # nvidia-driver-* and nvidia-headless-* a user may have added move along as extras).
    _FAMILY = re.compile(
        r"^(nvidia-headless-no-dkms|nvidia-utils|libnvidia-compute|libnvidia-cfg1|"
        r"nvidia-compute-utils|nvidia-kernel-common|nvidia-kernel-source|nvidia-dkms)"
        r"-(\d+)-server(-open)?$"
    )
    _MODULES = re.compile(r"^linux-(modules|objects)-nvidia-(\d+)-server(-open)?-(.+)$")
    _BRANCHED = re.compile(r"-(\d+)-server")
    # Canonical packages the fabric manager and NSCQ per branch in multiverse (source packages
    # fabric-manager-<branch>, libnvidia-nscq-<branch>), at the -server driver's versions.
    fm_repository = "ubuntu"
    fm_archive = "Ubuntu's multiverse"

    def __init__(self, kernel, fabric_manager=False):
        self.kernel = kernel
        if fabric_manager:
            self.components = ("restricted", "multiverse")

    def core(self, branch, flavor, modules):
        open_ = "-open" if flavor == "open" else ""
        names = [
            "nvidia-headless-no-dkms-%d-server%s" % (branch, open_),
            "nvidia-utils-%d-server" % branch,
            "libnvidia-compute-%d-server" % branch,
            "libnvidia-cfg1-%d-server" % branch,
            "nvidia-compute-utils-%d-server" % branch,
            "nvidia-kernel-common-%d-server" % branch,
            "nvidia-kernel-source-%d-server%s" % (branch, open_),
        ]
        if modules == "dkms":
            names.append("nvidia-dkms-%d-server%s" % (branch, open_))
        return sorted(names)

    def precompiled(self, branch, flavor):
        return "linux-modules-nvidia-%d-server%s-%s" % (branch, "-open" if flavor == "open" else "", self.kernel)

    def family(self, name):
        return bool(self._FAMILY.match(name))

    def stale_module_package(self, name, want):
        """A precompiled module package to remove: another branch or flavour, or this kernel's when unwanted.

        Those of other kernels of the same branch and flavour stay (booting an older kernel keeps
        its modules). A ``linux-objects-nvidia-*`` package, which apt installs as a dependency of
        the modules package of the same name, is stale when that modules package is.
        """
        match = self._MODULES.match(name)
        if not match or name in want:
            return False
        if match.group(1) == "objects":
            return self.stale_module_package("linux-modules-" + name[len("linux-objects-"):], want)
        branch = re.search(r"-(\d+)-server(-open)?$", next((n for n in want if n.startswith("nvidia-kernel-source-")), ""))
        if not branch:
            return True
        same = int(match.group(2)) == int(branch.group(1)) and bool(match.group(3)) == bool(branch.group(2))
        return not same or match.group(4) == self.kernel

    def is_marker(self, name):
        return bool(re.match(r"^(libnvidia-compute|nvidia-utils)-\d+-server$", name))

    def map_extra(self, name, branch):
        if self._MODULES.match(name) or name.startswith("linux-signatures-nvidia-"):
            return None  # kernel modules: chosen per kernel, never carried along
        return self._BRANCHED.sub("-%d-server" % branch, name, count=1)

    def headers(self):
        return ["linux-headers-%s" % self.kernel]

    def modules_choice(self, requested):
        return requested


def next_boot_headers(system, running):
    """``[linux-headers-RELEASE]`` of the kernel the node boots next where it is another installed one
    (discovery.kernels reads it); installing them lets DKMS build the module for it before the reboot."""
    release = kernels.next_boot_other(system, running)
    return ["linux-headers-%s" % release] if release else []


def _next_kernel_of(name, running):
    """The kernel release of a ``linux-headers-RELEASE`` name other than the running kernel's, else None."""
    release = name[len("linux-headers-"):] if name.startswith("linux-headers-") else ""
    return release if release[:1].isdigit() and release != running else None


def layout_for(os_facts, kernel, fabric_manager=False):
    layout = UbuntuLayout if os_facts.get("id") == "ubuntu" else DebianLayout
    return layout(kernel, fabric_manager=fabric_manager)


# --- the driver installed -------------------------------------------------------------------------

# The libraries' package (its version is the driver's) and the kernel module's (its name tells the
# flavour), in Debian's and Canonical's names.
_DRIVER_LIBRARY = re.compile(r"^(libcuda1|libnvidia-compute-\d+(-server)?)$")
_DRIVER_MODULE = re.compile(r"^(nvidia(-open)?-kernel-dkms|nvidia-dkms-\d+.*|linux-modules-nvidia-\d+.*)$")


def packaged_driver(host):
    """``{'name', 'version', 'flavor'}`` of the driver's packages dpkg lists, or None (method preinstalled)."""
    rc, out, dummy = host.run(DPKG_QUERY)
    installed = parse_dpkg_query(out) if rc in (0, 1) else {}
    library = _first_match(installed, _DRIVER_LIBRARY)
    module = _first_match(installed, _DRIVER_MODULE)
    if not library and not module:
        return None
    return {
        "name": library or module,
        "version": installed[library]["version"] if library else None,
        "flavor": ("open" if "open" in module else "proprietary") if module else None,
    }


def _first_match(installed, pattern):
    return next((name for name in sorted(installed) if pattern.match(name)), None)


# --- apt sources --------------------------------------------------------------------------------

_ONELINE = re.compile(
    r"^(?P<lead>\s*)(?P<type>deb|deb-src)(?P<sp1>\s+)(?P<opts>\[[^\]]*\]\s+)?(?P<uri>\S+)(?P<sp2>\s+)"
    r"(?P<suite>\S+)(?P<comps>[^#]*?)(?P<trail>\s*(?:#.*)?)$"
)


class Entry(object):
    """One distribution entry of the apt sources: a one-line ``deb`` line or a deb822 stanza."""

    def __init__(self, suites, components, index):
        self.suites = list(suites)
        self.components = list(components)
        self.index = index  # the line of a one-line entry, the stanza of a deb822 one

    def missing(self, required):
        return [c for c in required if c not in self.components]


def parse_oneline(text):
    """``[(line_index, match)]`` of the active deb / deb-src lines of a one-line sources file."""
    found = []
    for index, line in enumerate(text.split("\n")):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _ONELINE.match(line)
        if match:
            found.append((index, match))
    return found


def edit_oneline(text, suites, required):
    """``(new_text, entries)``: ``text`` with ``required`` components added to the distribution lines."""
    lines_ = text.split("\n")
    entries = []
    for index, match in parse_oneline(text):
        comps = match.group("comps").split()
        if match.group("type") != "deb" or match.group("suite") not in suites or "main" not in comps:
            continue
        entry = Entry([match.group("suite")], comps, index)
        entries.append(entry)
        missing = entry.missing(required)
        if missing:
            head = match.string[: match.start("comps")] + match.group("comps").rstrip()
            lines_[index] = head + " " + " ".join(missing) + match.group("trail")
    return "\n".join(lines_), entries


def _deb822_stanzas(text):
    """``[[(line_index, line)]]``: the stanzas of a deb822 file (comment lines kept in them)."""
    stanzas, current = [], []
    for index, line in enumerate(text.split("\n")):
        if line.strip() == "":
            if current:
                stanzas.append(current)
                current = []
            continue
        current.append((index, line))
    if current:
        stanzas.append(current)
    return stanzas


def _deb822_fields(stanza):
    """``{lower name: (name, [(line_index, line)], value)}`` of a stanza's fields."""
    fields = {}
    name = None
    for index, line in stanza:
        if line.lstrip().startswith("#"):
            continue
        if line[:1] in (" ", "\t") and name:
            fields[name.lower()][1].append((index, line))
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        name = key.strip()
        fields[name.lower()] = (name, [(index, line)], None)
    out = {}
    for lower, (key, lines_, dummy) in fields.items():
        first = lines_[0][1].partition(":")[2]
        value = " ".join([first.strip()] + [l.strip() for i, l in lines_[1:]]).strip()
        out[lower] = (key, lines_, value)
    return out


def _deb822_value(fields, name, default=""):
    return (fields.get(name) or (None, None, default))[2]


def _distribution_stanzas(text, suites):
    """``[(number, stanza, fields)]`` of the enabled binary stanzas of a deb822 file with main for ``suites``."""
    found = []
    for number, stanza in enumerate(_deb822_stanzas(text)):
        fields = _deb822_fields(stanza)
        if (
            "deb" in _deb822_value(fields, "types").split()
            and _deb822_value(fields, "enabled", "yes").strip().lower() not in ("no", "false", "0")
            and "main" in _deb822_value(fields, "components").split()
            and any(s in suites for s in _deb822_value(fields, "suites").split())
        ):
            found.append((number, stanza, fields))
    return found


def edit_deb822(text, suites, required):
    """``(new_text, entries)`` for a deb822 ``.sources`` file."""
    lines_ = text.split("\n")
    entries = []
    for number, dummy, fields in _distribution_stanzas(text, suites):
        entry = Entry(_deb822_value(fields, "suites").split(), _deb822_value(fields, "components").split(), number)
        entries.append(entry)
        missing = entry.missing(required)
        if missing:
            index, line = fields["components"][1][-1]
            lines_[index] = _add_components(line, missing)
    return "\n".join(lines_), entries


def _add_components(line, missing):
    """The last line of a Components field with ``missing`` added, before its comment."""
    comment = ""
    if "#" in line:
        line, dummy, rest = line.partition("#")
        comment = " #" + rest
    return line.rstrip() + " " + " ".join(missing) + comment


def query_deb822(text, suites):
    """The distribution stanzas of an edited deb822 file, binary only, for a temporary apt config."""
    return "\n\n".join("\n".join(_binary_only(stanza, fields)) for dummy, stanza, fields in _distribution_stanzas(text, suites))


def _binary_only(stanza, fields):
    """The lines of a stanza without its comments, its Types field reduced to ``deb``."""
    types = fields["types"][1]
    continued = [i for i, dummy in types[1:]]
    kept = []
    for index, line in stanza:
        if line.lstrip().startswith("#") or index in continued:
            continue
        kept.append("Types: deb" if index == types[0][0] else line)
    return kept


def source_files(host):
    """``[(path, format)]`` of the host's apt sources: sources.list, then the .list and .sources of sources.list.d."""
    paths = [(SOURCES_LIST, "oneline")] if host.exists(SOURCES_LIST) else []
    for name in host.names(SOURCES_DIR):
        if name.endswith(".list"):
            paths.append((posixpath.join(SOURCES_DIR, name), "oneline"))
        elif name.endswith(".sources"):
            paths.append((posixpath.join(SOURCES_DIR, name), "deb822"))
    return paths


class Sources(object):
    """The apt sources of the host: which files there are, and their edit for the components."""

    def __init__(self, system, suites, required):
        self.suites = suites
        self.required = required
        self.files = []  # [(path, format, text, new_text, entries)]
        for path, fmt in source_files(system):
            text = system.read(path)
            if text is None:
                continue
            edit = edit_oneline if fmt == "oneline" else edit_deb822
            new, entries = edit(text, suites, required)
            self.files.append((path, fmt, text, new, entries))

    @property
    def entries(self):
        return [e for f in self.files for e in f[4]]

    @property
    def changes(self):
        """``[(path, before, after, [(suites, missing)])]`` of the files that need the components."""
        out = []
        for path, dummy, text, new, entries in self.files:
            if new != text:
                out.append((path, text, new, [(e.suites, e.missing(self.required)) for e in entries if e.missing(self.required)]))
        return out

    def query_files(self):
        """``(one-line text, deb822 text)`` of the edited distribution entries, binary only."""
        oneline, deb822 = [], []
        for dummy, fmt, text, new, entries in self.files:
            if not entries:
                continue
            if fmt == "oneline":
                wanted = set(e.index for e in entries)
                oneline += [line for i, line in enumerate(new.split("\n")) if i in wanted]
            else:
                deb822.append(query_deb822(new, self.suites))
        return "\n".join(oneline) + ("\n" if oneline else ""), "\n\n".join(d for d in deb822 if d) + (
            "\n" if deb822 else ""
        )


# --- parsing apt's answers ----------------------------------------------------------------------


def parse_madison(text):
    """``{name: [version, ...]}`` of ``apt-cache madison`` (binary entries, newest first, no repeats)."""
    found = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 3 or not parts[2].endswith("Packages"):
            continue
        versions_ = found.setdefault(parts[0], [])
        if parts[1] not in versions_:
            versions_.append(parts[1])
    return found


def parse_policy(text):
    """``{name: {'installed', 'candidate'}}`` of ``apt-cache policy`` (None for ``(none)``)."""
    found = {}
    name = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.rstrip().endswith(":"):
            name = line.rstrip()[:-1]
            found[name] = {"installed": None, "candidate": None}
            continue
        stripped = line.strip()
        if name is None:
            continue
        for key in ("installed", "candidate"):
            if stripped.lower().startswith(key + ":"):
                value = stripped.split(":", 1)[1].strip()
                found[name][key] = None if value == "(none)" else value
    return found


def parse_show_depends(text, branch):
    """``{package version: driver version}`` of the precompiled module stanzas of ``apt-cache show``.

    Canonical's ``linux-modules-nvidia-<branch>-server-<kernel>`` depends on
    ``nvidia-kernel-common-<branch>-server (>= <driver version>)``: the driver its objects were
    built from.
    """
    found = {}
    pattern = re.compile(r"nvidia-kernel-common-%d-server \(>= ([^)]+)\)" % branch)
    for stanza in text.split("\n\n"):
        version = depends = None
        for line in stanza.splitlines():
            if line.startswith("Version:"):
                version = line.split(":", 1)[1].strip()
            elif line.startswith("Depends:"):
                depends = line.split(":", 1)[1]
        if version and depends:
            match = pattern.search(depends)
            if match:
                found[version] = versions.upstream_version(match.group(1).strip())
    return found


# --- files this backend writes ------------------------------------------------------------------


def apt_packages(where, packages):
    """``packages`` (``{name: version}``) when each is a Debian package name and version (:func:`checked_packages`)."""
    return checked_packages(where, packages, inputs.debian_package, inputs.debian_version)


def apt_names(where, names):
    """``names`` when each is a Debian package name."""
    for name in names:
        checked(where, "package", inputs.debian_package, name)
    return list(names)


def render_pin(packages, version, flavor):
    """The apt preferences file: every package at its exact version, priority 1001.

    The names and versions come from the archive and dpkg: one with a new line or a space would
    add a stanza or a package to the file; it is refused instead.
    """
    apt_packages(PIN_FILE, packages)
    checked(PIN_FILE, "driver version", inputs.version, version)
    checked(PIN_FILE, "flavour", inputs.one_of("open", "proprietary"), flavor)
    by_version = {}
    for name, pkg_version in sorted(packages.items()):
        by_version.setdefault(pkg_version, []).append(name)
    stanzas = []
    for pkg_version, names in sorted(by_version.items(), key=lambda item: (-len(item[1]), item[0])):
        stanzas.append(
            "Explanation: %s: pinned with the NVIDIA driver %s (%s)\n"
            "Package: %s\nPin: version %s\nPin-Priority: 1001\n"
            % (MANAGED_BY, version, flavor, " ".join(names), pkg_version)
        )
    return "\n".join(stanzas)


def render_unattended(names, version):
    apt_names(UU_FILE, names)
    checked(UU_FILE, "driver version", inputs.version, version)
    body = "".join('    "^%s$";\n' % name for name in sorted(names))
    return (
        "// %s: unattended-upgrades never upgrades the NVIDIA driver %s, so that an\n"
        "// automatic upgrade cannot leave its libraries at another version than the loaded kernel module\n"
        "// ('driver/library version mismatch'). Change the version with the module, not with apt.\n"
        "Unattended-Upgrade::Package-Blacklist {\n%s};\n" % (MANAGED_BY, version, body)
    )


def write_local(path, content):
    """Write a file of the temporary apt configuration: a path of this machine, not of the host."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    with open(path, "w") as handle:
        handle.write(content)


# --- what a plan asks the archive, and what it answers --------------------------------------------


class Request(object):
    """What a present plan asks the archive about.

    ``names``: the driver's packages (both kernel module choices) and the fabric manager's;
    ``precompiled``: Ubuntu's precompiled module package for this kernel (None on Debian);
    ``fm_names``: the fabric manager's packages of the branch, ``fm_other`` those installed of
    another branch or naming; ``extras``: ``{installed name: its name at the branch, or None}``
    of the old driver's packages this module did not choose; ``headers``: the kernel headers.
    """

    def __init__(self, names, precompiled, fm_names, fm_other, extras, headers):
        self.names = names
        self.precompiled = precompiled
        self.fm_names = fm_names
        self.fm_other = fm_other
        self.extras = extras
        self.headers = headers

    def query(self):
        """The packages of one ``apt-cache madison``, sorted."""
        carried = set(m for m in self.extras.values() if m)
        return sorted(self.names | carried | set(self.headers) | set(self.fm_other))


class Archive(object):
    """What the archive answered: ``madison`` ``{name: [version, ...]}``, ``policy`` (the companions'
    candidates) and ``precompiled_driver`` ``{package version: driver version}`` of Ubuntu's
    precompiled modules."""

    def __init__(self, madison, policy, precompiled_driver):
        self.madison = madison
        self.policy = policy
        self.precompiled_driver = precompiled_driver


def package_changes(installed, want, removals, headers):
    """``(install, hold, unhold)``: what moves to its version (and the headers), what is held after, what first released."""
    held = set(n for n, i in installed.items() if i["held"])
    install = dict((n, v) for n, v in want.items() if not installed.get(n) or installed[n]["version"] != v)
    install.update(headers)
    unhold = sorted(held & (set(install) | set(removals)))
    hold = sorted(n for n in want if n not in held or n in unhold)
    return install, hold, unhold


# --- the backend ----------------------------------------------------------------------------------


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
        newest = None
        for name in self.system.names(LISTS_DIR):
            if "_Packages" in name:
                mtime = self.system.mtime(posixpath.join(LISTS_DIR, name)) or 0
                newest = mtime if newest is None or mtime > newest else newest
        if newest is None:
            return False
        return time.time() - newest < int(self.params.get("cache_valid_time") or 0)

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
        return {
            "version": version,
            "available_versions": sort_versions(available),
            "packages": dict(sorted(want.items())),
            "kernel_modules": chosen_modules,
            "pin_file": PIN_FILE,
            "notes": notes,
            "changes": {
                "install": ["%s=%s" % item for item in sorted(install.items())],
                "remove": removals,
                "hold": hold,
                "unhold": unhold,
            },
            "package_diff": package_diff(installed, want, removals, header_installs),
            "fabric_manager": self._fabric_manager_report(installed, want, install, removals),
        }

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
        available = self._common_upstreams(archive.madison, self.layout.core(declared.branch, flavor, "dkms"))
        if ubuntu and not available:
            available = self._common_upstreams(archive.madison, self.layout.core(declared.branch, flavor, "precompiled"))
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
            (name, self._package_version(madison, name, version))
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
        out = dict((name, self._preferred_version(madison, name, version, driver_pkg)) for name in request.fm_names)
        for name in request.fm_other:
            target = self._package_version(madison, name, version, required=False)
            if target:
                out[name] = target
        return out

    def _extras_at(self, request, madison, version):
        """``(carried, removals)``: the extras the archive has at ``version`` (by their new names), those that go."""
        carried, removals = {}, []
        for name, mapped in sorted(request.extras.items()):
            target = self._package_version(madison, mapped, version, required=False) if mapped else None
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
        return {
            "version": None,
            "available_versions": [],
            "packages": {},
            "kernel_modules": None,
            "pin_file": PIN_FILE,
            "notes": [],
            "changes": {"install": [], "remove": removals, "hold": [], "unhold": held},
            "package_diff": package_diff(installed, {}, removals, {}),
            "fabric_manager": self._fabric_manager_report(installed, {}, {}, removals),
        }

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
        family = fabric_manager.FAMILY.match
        return {
            "packages": dict((n, v) for n, v in want.items() if family(n)) if self.fm_required else {},
            "installed": dict((n, i["version"]) for n, i in installed.items() if family(n)),
            "install": sorted(n for n in install if family(n)) if self.fm_required else [],
            "remove": sorted(n for n in removals if family(n)) if self.fm_required else [],
        }

    def _fabric_manager_choice(self, declared, available, madison, fm_names, notes):
        """The driver versions to choose from: with the fabric manager needed, those it exists at."""
        if not fm_names:
            return available
        fm_available = self._common_upstreams(madison, fm_names)
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

    @staticmethod
    def _preferred_version(madison, name, version, prefer):
        """The package version of ``name`` at upstream ``version``: ``prefer`` (the driver's own) when it has it."""
        candidates = [v for v in madison.get(name, []) if versions.upstream_version(v) == version]
        if not candidates:
            raise GpuFleetError("%s has no version %s in the repositories" % (name, version), package=name)
        return prefer if prefer in candidates else candidates[0]

    @staticmethod
    def _common_upstreams(madison, names):
        sets = [set(versions.upstream_version(v) for v in madison.get(name, [])) for name in names]
        if not sets:
            return []
        common = sets[0]
        for item in sets[1:]:
            common &= item
        return sorted(common)

    @staticmethod
    def _package_version(madison, name, version, required=True):
        for pkg_version in madison.get(name, []):
            if versions.upstream_version(pkg_version) == version:
                return pkg_version
        if required:
            raise GpuFleetError("%s has no version %s in the repositories" % (name, version), package=name)
        return None

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
        found = set()
        for line in out.splitlines():
            match = re.match(r"^nvidia-headless-no-dkms-(\d+)-server(-open)?$", line.strip())
            if match:
                found.add(int(match.group(1)))
        return [str(b) for b in sorted(found)]

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
    if before == after:
        return None
    return {
        "before_header": "packages",
        "after_header": "packages",
        "before": lines(before),
        "after": lines(after),
    }
