# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each reader of discovery says of itself: :class:`Probes` (``ok``, ``missing`` or
``error``, with a detail), and the one way a version is read from a ``--version`` command.
"""

from __future__ import annotations

import posixpath
import re

_DETAIL_MAX = 400


class Probes(dict):
    """``name -> {'state': ok|missing|error, 'detail': str}``."""

    def set(self, name, state, detail=""):
        detail = str(detail).strip()
        if len(detail) > _DETAIL_MAX:
            detail = detail[: _DETAIL_MAX - 3] + "..."
        self[name] = {"state": state, "detail": detail}

    def ok(self, name, detail=""):
        self.set(name, "ok", detail)

    def missing(self, name, detail=""):
        self.set(name, "missing", detail)

    def error(self, name, detail=""):
        self.set(name, "error", detail)


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def command_detail(argv, rc, out, err):
    message = first_line(err) or first_line(out) or "no output"
    return "%s exited %s: %s" % (" ".join([posixpath.basename(argv[0])] + list(argv[1:])), rc, message)


def run_version(host, probes, name, argv, pattern):
    """Run ``argv`` (a --version call); return the first group of ``pattern`` or None."""
    rc, out, err = host.run(argv)
    if rc != 0:
        probes.error(name, command_detail(argv, rc, out, err))
        return None
    match = re.search(pattern, out + "\n" + err)
    if not match:
        probes.error(name, "%s: no version in %r" % (" ".join(argv), first_line(out)))
        return None
    probes.ok(name, "%s %s" % (argv[0], match.group(1)))
    return match.group(1)
