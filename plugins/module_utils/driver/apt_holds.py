# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files that hold the driver at its version on a Debian or Ubuntu host: the apt preferences
file that pins every package (priority 1001) and unattended-upgrades' ``Package-Blacklist``.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.packages import (
    MANAGED_BY,
    checked,
    checked_names,
    checked_packages,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs

PIN_FILE = "/etc/apt/preferences.d/gpufleet-nvidia-driver.pref"
UU_FILE = "/etc/apt/apt.conf.d/51gpufleet-nvidia-driver"


def apt_packages(where, packages):
    """``packages`` (``{name: version}``) when each is a Debian package name and version (:func:`checked_packages`)."""
    return checked_packages(where, packages, inputs.debian_package, inputs.debian_version)


def apt_names(where, names):
    """``names`` when each is a Debian package name."""
    return checked_names(where, names, inputs.debian_package)


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
