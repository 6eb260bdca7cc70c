# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A file the runtime editors manage, as a reader sees it, without tomlkit.

The marks the editors leave in the files they manage (the owner line of a file they own
outright, the one-line state record of a file they edit), their values compared as plain data,
a TOML key as they write it, and the Go template actions of k3s / RKE2 templates masked from a
TOML parser. Discovery and validation read the runtime's files with this and
``common.toml_subset``; the editors (``runtime.edit`` and the files that use it) write them with
tomlkit, which a node that is only read need not import.
"""

from __future__ import annotations

import json
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

#: Prefix of the comment that carries the module's state record inside a managed file.
STATE_MARK = "gpufleet.nvidia.container_runtime state:"
#: First line of every file the module owns outright (drop-ins, created templates).
OWNER_MARK = "# Managed by gpufleet.nvidia.container_runtime"


def unwrap(value):
    """A tomlkit item (or anything) as plain Python values (tomlkit's ``unwrap``)."""
    if hasattr(value, "unwrap"):
        return value.unwrap()
    return value


def same(a, b) -> bool:
    """Equal as config values (``True`` is not ``1``)."""
    return json.dumps(unwrap(a), sort_keys=True, default=str) == json.dumps(
        unwrap(b), sort_keys=True, default=str
    )


def get_path(tree, path, default=None):
    node = tree
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node


def encode_record(record: dict, mark: str = STATE_MARK) -> str:
    """The comment line (without indentation) that carries ``record``, after ``mark`` (the
    container runtime editor's; the toolkit config's editor has its own)."""
    return "# %s %s" % (mark, json.dumps(record, sort_keys=True, separators=(", ", ": ")))


def decode_record_line(line: str, mark: str = STATE_MARK):
    """The record in a comment line after ``mark``, or ``None`` when the line carries none."""
    text = line.strip()
    if not text.startswith("#"):
        return None
    text = text.lstrip("#").strip()
    if not text.startswith(mark):
        return None
    try:
        value = json.loads(text[len(mark):].strip())
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def find_record_in_text(text, mark: str = STATE_MARK):
    """The first record after ``mark`` found in the comment lines of ``text`` (``{}`` when none)."""
    for line in (text or "").splitlines():
        record = decode_record_line(line, mark)
        if record is not None:
            return record
    return {}


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_key(key: str) -> str:
    """A key as TOML writes it: bare, else a basic string of real UTF-8 (JSON's ``\\ud83d\\ude00``
    for a character beyond the BMP is a pair of surrogates, which TOML refuses; DEL is escaped)."""
    if _BARE_KEY.fullmatch(key):  # not match: its $ also matches before a final newline
        return key
    return json.dumps(key, ensure_ascii=False).replace("\x7f", "\\u007f")


_ACTION_RE = re.compile(r"\{\{.*?\}\}")
_ONLY_ACTIONS_RE = re.compile(r"^[ \t]*(\{\{.*?\}\}[ \t]*)+$")


class GoTemplateMask:
    """Hide Go template actions from the TOML parser and put them back afterwards.

    A line holding only actions (``{{ template "base" . }}``, ``{{ if ... }}``) becomes a
    comment; an action used as a value becomes a quoted placeholder string; an action inside
    a string or a key becomes a bare placeholder. ``unmask`` reverses all three.
    """

    def __init__(self, text: str) -> None:
        self.original = text
        self.replacements = []  # (token as written in the masked text, original text)
        self.masked = self._mask(text)

    @staticmethod
    def is_action_line(comment: str) -> bool:
        """Whether a comment is a masked line of template actions."""
        return comment.startswith("#GPUFLEET_GOTMPL_LINE_")

    @property
    def uses_base(self) -> bool:
        return bool(re.search(r"\{\{-?\s*template\s+\"base\"", self.original))

    def _token(self, kind: str) -> str:
        # The trailing "X" keeps token 1 from being a prefix of token 10.
        return "GPUFLEET_GOTMPL_%s_%dX" % (kind, len(self.replacements))

    def _mask(self, text: str) -> str:
        out = []
        for line in text.splitlines(True):
            body = line.rstrip("\r\n")
            eol = line[len(body):]
            if "{{" not in body:
                out.append(line)
                continue
            if body.count("{{") != body.count("}}"):
                raise GpuFleetError(
                    "a Go template action spans several lines (%r); the module edits templates "
                    "whose actions each fit on one line" % body.strip()
                )
            if _ONLY_ACTIONS_RE.match(body):
                token = "#" + self._token("LINE")
                self.replacements.append((token, body))
                out.append(token + eol)
                continue
            pieces = []
            pos = 0
            for m in _ACTION_RE.finditer(body):
                before = body[pos:m.start()]
                pieces.append(before)
                prefix = "".join(pieces)
                in_string = prefix.count('"') % 2 == 1 or prefix.count("'") % 2 == 1
                if not in_string and re.search(r"=\s*$", prefix):
                    core = self._token("VALUE")
                    self.replacements.append(('"%s"' % core, m.group(0)))
                    self.replacements.append(("'%s'" % core, m.group(0)))
                    pieces.append('"%s"' % core)
                else:
                    core = self._token("TEXT")
                    self.replacements.append((core, m.group(0)))
                    pieces.append(core)
                pos = m.end()
            pieces.append(body[pos:])
            out.append("".join(pieces) + eol)
        return "".join(out)

    def unmask(self, text: str) -> str:
        for token, original in self.replacements:
            text = text.replace(token, original)
        return text
