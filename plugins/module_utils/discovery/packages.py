# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's package databases as discovery reads them: dpkg's status and file lists in pure
Python, ``rpm -qf`` where rpm is the manager.
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import command_detail

# dpkg info lists worth opening when looking for the owner of the driver's files.
_DPKG_LIST_RE = re.compile(r"(nvidia|libcuda|cuda-driver|cuda-compat)")


def parse_dpkg_status(text):
    """``{package: version}`` of the installed packages of /var/lib/dpkg/status."""
    installed = {}
    for stanza in text.split("\n\n"):
        name = version = status = None
        for line in stanza.splitlines():
            if line.startswith("Package:"):
                name = line[8:].strip()
            elif line.startswith("Status:"):
                status = line[7:].strip()
            elif line.startswith("Version:"):
                version = line[8:].strip()
        # "install ok installed", or "hold ok installed" for a held package (the driver
        # role holds the driver's packages).
        if name and status and status.endswith(" ok installed") and status.split()[0] in ("install", "hold"):
            installed[name] = version
    return installed


def gather_dpkg(host, probes, family=None):
    """Installed packages from /var/lib/dpkg/status, or None on hosts without dpkg.

    An installed package's stanza without a version (a damaged database: dpkg itself refuses
    it) is left out, and named in an error probe. On an EL host (``family`` redhat) the database
    is not read: its packages are rpm's, and a dpkg database there (EPEL's dpkg; the lab's EL
    stand-in, a Debian userland) holds none of the driver's, the toolkit's or the kernel's
    (:func:`_driver_package` says why), so it would report them as not installed.
    """
    path = "/var/lib/dpkg/status"
    if family == "redhat":
        probes.missing("dpkg_status", "not read: the host is of the redhat family, whose packages are rpm's")
        return None
    if not host.exists(path):
        probes.missing("dpkg_status", "%s does not exist" % path)
        return None
    try:
        packages = parse_dpkg_status(host.read_text(path))
    except (IOError, OSError) as exc:
        probes.error("dpkg_status", "%s: %s" % (path, exc))
        return None
    installed = dict((name, version) for name, version in packages.items() if version)
    versionless = sorted(name for name in packages if name not in installed)
    if versionless:
        probes.error("dpkg_status", "%d installed packages; no Version: in the stanza of %s" % (len(installed), ", ".join(versionless)))
    else:
        probes.ok("dpkg_status", "%d installed packages" % len(installed))
    return installed


def _usrmerge_variants(path):
    variants = {path}
    for top in ("/bin/", "/sbin/", "/lib/", "/lib64/", "/lib32/"):
        if path.startswith(top):
            variants.add("/usr" + path)
        if path.startswith("/usr" + top):
            variants.add(path[4:])
    return variants


def dpkg_owner(host, paths):
    """``(package, path)``: the dpkg package owning the first of ``paths`` that one owns.

    Reads only the file lists whose names look like the driver's (nvidia, libcuda, cuda-driver,
    cuda-compat), in pure Python: no ``dpkg -S`` process.
    """
    info = "/var/lib/dpkg/info"
    wanted = {}
    for path in paths:
        for variant in _usrmerge_variants(path):
            wanted.setdefault(variant, path)
    try:
        names = host.listdir(info)
    except (IOError, OSError):
        return None, None
    owners = {}
    for name in names:
        if not name.endswith(".list") or not _DPKG_LIST_RE.search(name):
            continue
        try:
            listed = host.read_text(posixpath.join(info, name)).splitlines()
        except (IOError, OSError):
            continue
        for line in listed:
            if line in wanted:
                owners.setdefault(wanted[line], name[: -len(".list")].split(":", maxsplit=1)[0])
    for path in paths:
        if path in owners:
            return owners[path], path
    return None, None


def rpm_owner(host, probes, paths):
    rpm = host.which("rpm")
    if rpm is None:
        probes.missing("driver_package", "rpm not found")
        return None
    argv = [rpm, "-qf", "--queryformat", "%{NAME}\t%{VERSION}-%{RELEASE}\n"] + list(paths)
    rc, out, err = host.run(argv)
    for line in out.splitlines():
        if "\t" in line:
            name, dummy, version = line.partition("\t")
            probes.ok("driver_package", "rpm: %s %s" % (name, version))
            return {"manager": "rpm", "name": name.strip(), "version": version.strip()}
    if rc not in (0, 1):
        probes.error("driver_package", command_detail(argv, rc, out, err))
    else:
        probes.ok("driver_package", "rpm: no package owns %s" % ", ".join(paths))
    return None
