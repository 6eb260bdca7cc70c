# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The systems the driver's method ``package`` installs on: one table, read by the module and by preflight.

The driver's backends know the package repositories and names of these releases only (apt on
Debian and Ubuntu, NVIDIA's CUDA repository with dnf on the RHEL family); ``method: preinstalled``
works on any OS.
"""

from __future__ import annotations

__all__ = ["PACKAGE_OS", "PACKAGE_OS_NAMES", "package_release", "package_supported", "package_supported_list"]

# OS id -> releases the package method supports (VERSION_ID, or its major for MAJOR_ONLY ids).
PACKAGE_OS = {
    "debian": ("12", "13"),
    "ubuntu": ("22.04", "24.04"),
    "rhel": ("8", "9", "10"),
    "rocky": ("8", "9", "10"),
    "almalinux": ("8", "9", "10"),
}
MAJOR_ONLY = ("debian", "rhel", "rocky", "almalinux")
# The table as a person names it.
PACKAGE_OS_NAMES = "Debian 12/13, Ubuntu 22.04/24.04, RHEL/Rocky/AlmaLinux 8/9/10"


def package_release(os_facts):
    """The release of ``os_facts`` as the table names it: VERSION_ID, or its major for MAJOR_ONLY ids."""
    release = os_facts.get("version_id") or ""
    if os_facts.get("id") in MAJOR_ONLY:
        release = os_facts.get("version_major") or release.split(".", maxsplit=1)[0]
    return release


def package_supported(os_facts):
    """Whether the package method supports the OS of ``os_facts`` (``id``, ``version_id``, ``version_major``)."""
    return package_release(os_facts) in PACKAGE_OS.get(os_facts.get("id") or "", ())


def package_supported_list():
    """``almalinux 8/9, debian 12/13, ...``: the table in one line, by OS id."""
    return ", ".join("%s %s" % (os_id, "/".join(rel)) for os_id, rel in sorted(PACKAGE_OS.items()))
