# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a plan asks the apt archive and what it answers: ``apt-cache madison``, ``policy`` and
``show``'s answers parsed, :class:`Request` and :class:`Archive`, and the files of the temporary
apt configuration that asks with the edited sources.
"""

from __future__ import annotations

import os
import re
from collections import namedtuple

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions


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


def write_local(path, content):
    """Write a file of the temporary apt configuration: a path of this machine, not of the host."""
    os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
    with open(path, "w") as handle:
        handle.write(content)


class Request(namedtuple("Request", "names precompiled fm_names fm_other extras headers")):
    """What a present plan asks the archive about.

    ``names``: the driver's packages (both kernel module choices) and the fabric manager's;
    ``precompiled``: Ubuntu's precompiled module package for this kernel (None on Debian);
    ``fm_names``: the fabric manager's packages of the branch, ``fm_other`` those installed of
    another branch or naming; ``extras``: ``{installed name: its name at the branch, or None}``
    of the old driver's packages this module did not choose; ``headers``: the kernel headers.
    """

    __slots__ = ()

    def query(self):
        """The packages of one ``apt-cache madison``, sorted."""
        carried = set(m for m in self.extras.values() if m)
        return sorted(self.names | carried | set(self.headers) | set(self.fm_other))


# What the archive answered: ``madison`` ``{name: [version, ...]}``, ``policy`` (the companions'
# candidates) and ``precompiled_driver`` ``{package version: driver version}`` of Ubuntu's
# precompiled modules.
Archive = namedtuple("Archive", "madison policy precompiled_driver")
