# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dpkg's view of installed packages, shared by the driver's and the toolkit's apt code."""

from __future__ import annotations

APT_ENV = {"DEBIAN_FRONTEND": "noninteractive"}
DPKG_QUERY = ["dpkg-query", "-W", "-f", "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"]


def parse_dpkg_query(text):
    """``{name: {'version', 'status', 'held'}}`` of installed packages in ``dpkg-query -W`` output (DPKG_QUERY's format)."""
    packages = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        name, version, status = parts[0].strip(), parts[1].strip(), parts[2]
        installed = len(status) >= 2 and status[1] in ("i", "U", "F", "W", "t")
        if not installed or name in packages:
            continue
        packages[name] = {"version": version, "status": status.strip(), "held": status[:1] == "h"}
    return packages
