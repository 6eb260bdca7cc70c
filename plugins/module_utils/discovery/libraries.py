# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The loaded nvidia module against the driver's user-space libraries and packages
(``gpufleet_nvidia.driver_libraries``): a drift makes every NVML and CUDA call fail with
"Driver/library version mismatch"; and who holds the GPU, which says whether a reload can fix it.
"""

from __future__ import annotations

import os
import posixpath
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions

# The user-space library that every driver ships with its version in the file name.
LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    # Debian's driver packages (libnvidia-ml1 and the others) keep the files here, the linker finds
    # them through ld.so.conf.d.
    "/usr/lib/x86_64-linux-gnu/nvidia/current",
    "/usr/lib/aarch64-linux-gnu/nvidia/current",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/nvidia/lib64",
)
_LIBNVIDIA_ML = re.compile(r"^libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$")
# Ubuntu's names carry the branch (nvidia-utils-580); Debian's do not (libnvidia-ml1, nvidia-driver,
# nvidia-kernel-dkms; its nvidia-kernel-common has a version of its own and is not one of them).
_DRIVER_DEB = re.compile(r"^(?:(?:libnvidia-compute|nvidia-utils|nvidia-kernel-common|nvidia-driver)-\d+(?:-server)?(?:-open)?"
                         r"|libnvidia-ml1|nvidia-driver|nvidia-driver-libs|nvidia-kernel-dkms|nvidia-open-kernel-dkms)$")
_VERSION_IN_PACKAGE = re.compile(r"^(?:\d+:)?(\d+\.\d+(?:\.\d+)?)")


def _same_version(one, other):
    return bool(one) and bool(other) and one.split("-")[0] == other.split("-")[0]


def library_versions(host):
    """``{version: [paths]}`` of the ``libnvidia-ml.so.<version>`` files (not links) on the host."""
    found = {}
    for folder in LIBRARY_DIRS:
        for name in host.names(folder):
            match = _LIBNVIDIA_ML.match(name)
            path = posixpath.join(folder, name)
            if match and not host.islink(path) and host.isfile(path):
                found.setdefault(match.group(1), []).append(path)
    return found


def package_versions(dpkg):
    """``{version: [packages]}`` of the driver's own packages (libnvidia-compute, nvidia-utils, ...)."""
    found = {}
    for name, version in sorted((dpkg or {}).items()):
        match = _VERSION_IN_PACKAGE.match(version or "")
        if _DRIVER_DEB.match(name) and match:
            found.setdefault(match.group(1), []).append(name)
    return found


def gpu_holders(host):
    """``(holders, complete)``: ``[{pid, command}]`` of the processes with a /dev/nvidia* file open.

    ``complete`` is False where some process's descriptors could not be read (not root).
    """
    holders, complete = [], True
    for pid in host.names("/proc", kernel=True):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(host.klocal("/proc/%s/fd" % pid))
        except OSError:
            complete = complete and not os.path.isdir(host.klocal("/proc/%s" % pid))
            continue
        if any(_is_nvidia_fd(host, pid, fd) for fd in fds):
            holders.append({"pid": int(pid), "command": _command_name(host, pid)})
    return holders, complete


def _is_nvidia_fd(host, pid, fd):
    try:
        return os.readlink(host.klocal("/proc/%s/fd/%s" % (pid, fd))).startswith("/dev/nvidia")
    except OSError:
        return False


def _command_name(host, pid):
    try:
        return host.read_text("/proc/%s/comm" % pid, kernel=True).strip()
    except (IOError, OSError):
        return "?"


def library_mismatch(host, loaded, dpkg):
    """``gpufleet_nvidia.driver_libraries``: the loaded module against the libraries and packages.

    ``state``: ``ok``, ``drift`` (a library or package of another version than the loaded
    module: every NVML and CUDA call fails with "Driver/library version mismatch"),
    ``not_loaded`` or ``unknown`` (no library found). On drift, ``fix`` says ``reload`` where no
    process holds the GPU, else ``reboot``, and ``holders`` who holds it.
    """
    libraries = library_versions(host)
    packages = package_versions(dpkg)
    facts = {"state": "ok", "loaded": loaded, "libraries": libraries, "packages": packages,
             "holders": None, "fix": None, "detail": ""}
    others = sorted(v for v in set(libraries) | set(packages) if not _same_version(v, loaded or ""))
    if not loaded:
        facts.update(state="not_loaded", detail="no nvidia module loaded")
    elif not libraries and not packages:
        facts.update(state="unknown", detail="no libnvidia-ml.so.<version> in %s" % ", ".join(LIBRARY_DIRS))
    elif others:
        holders, complete = gpu_holders(host)
        facts.update(state="drift", holders=holders, fix="reload" if complete and not holders else "reboot")
        facts["detail"] = "the loaded nvidia module is %s, the libraries or packages on disk are %s" % (loaded, ", ".join(others))
    else:
        facts["detail"] = "the loaded module and the libraries are %s" % loaded
    return facts


def fix_text(mismatch):
    """What to do about a library drift, in words."""
    holders = mismatch.get("holders") or []
    if mismatch.get("fix") == "reload":
        return ("No process holds the GPU: reload the modules (modprobe -r nvidia_uvm nvidia_drm nvidia_modeset nvidia; "
                "modprobe nvidia), or reboot.")
    if holders:
        named = ", ".join("%s (%d)" % (h["command"], h["pid"]) for h in holders[:5])
        return "Reboot the node, or stop what holds the GPU (%s) and reload the modules." % named
    return "Reboot the node (the processes holding the GPU could not all be read)."


def _newest(found):
    return max(found, key=lambda v: versions.parse_driver_version(v).key())


def wanted_version(libraries, packages, loaded):
    """The driver version a kernel's module must have: the libraries' (the newest where there
    are several: the last install), else the driver packages', else the loaded module's."""
    if libraries:
        return _newest(libraries)
    if packages:
        return _newest(packages)
    return loaded
