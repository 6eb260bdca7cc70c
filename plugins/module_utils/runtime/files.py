# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files the runtime editors read, and what they plan to make of them.

The editors (``runtime.containerd``, ``runtime.crio``, ``runtime.docker``, ``runtime.toolkit_config``)
are plain functions over file contents: they take the text of each file (:func:`read_text`: UTF-8,
or a refusal; :func:`parse_json`: strict JSON) and return a :class:`Plan` (each file's text before and
after, a diff and a message) without touching the disk, so that they can be unit-tested without Ansible.
"""

from __future__ import annotations

import json

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


def read_text(host, path: str):
    """The text of the host file ``path`` (``None`` when it does not exist), UTF-8 or an error.

    What the editors are given is rewritten whole: a byte that is not UTF-8 must stop the module
    rather than come back as a replacement character (``common.io.read_file``'s rule, through
    the host adapter, whose own ``read`` is lenient).
    """
    try:
        data = host.read_bytes(path)
    except FileNotFoundError:
        return None
    except (IOError, OSError) as exc:
        raise GpuFleetError("could not read %s: %s" % (path, to_native(exc)), path=path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GpuFleetError("%s is not UTF-8 text: %s; the file was left untouched" % (path, exc), path=path)


class FileChange:
    """One file the editor looked at: its text before and after (``None``: no file)."""

    def __init__(self, path: str, before, after) -> None:
        self.path = path
        self.before = before
        self.after = after

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def action(self):
        if not self.changed:
            return None
        if self.before is None:
            return "create"
        if self.after is None:
            return "delete"
        return "update"

    def diff(self) -> dict:
        """Ansible's diff dict for this file, with headers that say create / delete."""
        before_header = self.path if self.before is not None else "%s (absent)" % self.path
        after_header = self.path if self.after is not None else "%s (absent)" % self.path
        return {
            "before": self.before or "",
            "after": self.after or "",
            "before_header": before_header,
            "after_header": after_header,
        }


def message(files, did, nothing) -> str:
    """A plan's message: ``did`` and what happened to each file that changes, else ``nothing``."""
    changed = [f for f in files if f.changed]
    if not changed:
        return nothing
    return "%s (%s)" % (did, ", ".join("%s %s" % (f.action, f.path) for f in changed))


class Plan:
    """What an editor wants to do: the files, a message and facts about the config."""

    def __init__(self, files, msg: str = "", **facts) -> None:
        self.files = list(files)
        self.msg = msg
        self.facts = facts
        self.warnings = list(facts.pop("warnings", []) or [])

    @property
    def changed(self) -> bool:
        return any(f.changed for f in self.files)

    @property
    def diff(self) -> list:
        return [f.diff() for f in self.files if f.changed]

    @property
    def changed_files(self) -> list:
        return [f.path for f in self.files if f.changed]

    def file(self, path: str):
        for f in self.files:
            if f.path == path:
                return f
        return None


def check_handler_name(name: str, taken) -> None:
    """Refuse a handler name that is empty or one the runtime keeps for its own (``taken``).

    The one check of the editors' options that the module's argument spec cannot make.
    """
    if not name or name in taken:
        raise GpuFleetError(
            "runtime_name %r cannot be used (expected a new handler name, e.g. nvidia)" % (name,)
        )


#: How deep a JSON file the editors take: Docker's daemon.json nests four levels; the editors' own walks
#: over the tree recurse once a level.
JSON_DEPTH = 64


class _NotJson(ValueError):
    """A value Python's json takes and a strict JSON reader does not (NaN, Infinity, a number out of range)."""

    def __init__(self, msg):
        super().__init__(msg)
        self.msg = msg


def _refuse_constant(name):
    raise _NotJson("%s is not a JSON value" % name)


def _finite(text):
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NotJson("a number out of range (%s)" % text)
    return value


def json_depth(text: str) -> int:
    """How deeply the arrays and objects of a JSON ``text`` nest (strings skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            in_string, escaped = (ch != '"' or escaped), (ch == "\\" and not escaped)
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_json(text, path: str):
    """Parse JSON text (``None`` or blank: ``{}``) or raise with line and column; NaN, Infinity, a number
    out of range and nesting deeper than :data:`JSON_DEPTH` are refused (Python's json takes them)."""
    if text is None or not text.strip():
        return {}
    if json_depth(text) > JSON_DEPTH:
        raise GpuFleetError("%s is not valid JSON for the editor: nested deeper than %d levels; the file was left untouched"
                            % (path, JSON_DEPTH), path=path)
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)
    except _NotJson as exc:
        raise GpuFleetError("%s is not valid JSON: %s; the file was left untouched" % (path, exc.msg), path=path)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        col = getattr(exc, "colno", None)
        raise GpuFleetError(
            "%s is not valid JSON (line %s, column %s): %s; the file was left untouched"
            % (path, line, col, getattr(exc, "msg", exc)),
            path=path,
            line=line,
            column=col,
        )
    if not isinstance(value, dict):
        raise GpuFleetError(
            "%s must hold a JSON object, found %s; the file was left untouched"
            % (path, type(value).__name__),
            path=path,
        )
    return value
