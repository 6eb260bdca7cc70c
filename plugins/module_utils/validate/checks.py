# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node's validation is made of: the statuses (``ok``, ``drift``, ``failed``, ``skipped``,
ranked), :class:`Checks` (the checks of one node, in order), and the small reads the checks share.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import toml_subset

OK = "ok"
DRIFT = "drift"
FAILED = "failed"
SKIPPED = "skipped"
RANK = {SKIPPED: 0, OK: 1, DRIFT: 2, FAILED: 3}
_TAIL = 600


def worst(statuses):
    """The worst of ``statuses`` (failed, drift, ok), else skipped; what is not a status is passed over."""
    ranked = [s for s in statuses if s in RANK and s != SKIPPED]
    return max(ranked, key=lambda s: RANK[s]) if ranked else SKIPPED


class Checks(object):
    """The checks of one node, in order, each ``{name, status, msg}``."""

    def __init__(self):
        self.items = []

    def add(self, name, status, msg):
        self.items.append({"name": name, "status": status, "msg": msg})
        return status

    def status(self):
        return worst(c["status"] for c in self.items)

    def messages(self, status):
        return [c["msg"] for c in self.items if c["status"] == status]


def _tail(text, limit=_TAIL):
    text = (text or "").strip()
    return text if len(text) <= limit else "..." + text[-(limit - 3):]


def _read(host, path):
    """``(text, error)``: the host file's text, or None and why not."""
    try:
        return host.read_text(path), None
    except (IOError, OSError) as exc:
        return None, "%s: %s" % (path, exc.strerror or exc)


def _read_toml_file(host, path):
    """``(data, error)``; a missing file is ``({}, None)``."""
    if not host.exists(path):
        return {}, None
    text, error = _read(host, path)
    if error:
        return None, error
    try:
        return toml_subset.loads(text), None
    except ValueError as exc:
        return None, "%s is not valid TOML: %s" % (path, exc)


def _executable(host, path):
    """The host path of a runtime binary (absolute, or looked up like the runtime does), or None."""
    if not path:
        return None
    if path.startswith("/"):
        return path if host.exists(path) else None
    return host.which(path)
