# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the container runtime configuration editors share.

The editors for containerd (and k3s / RKE2), CRI-O and Docker live in
``runtime.containerd``, ``runtime.crio`` and ``runtime.docker``. They are plain functions
over file contents: they take the current text of each file and return a :class:`Plan`
(the new text of each file, a diff and a message) without touching the disk, so they can
be unit-tested without Ansible. This file holds what they share, and imports none of them:

* :class:`Plan` / :class:`FileChange`: the result, each file's text before and after, a diff and a message;
* parsing with errors that name the file, line and column;
* the one-line state record the editors leave in the files they manage, so that
  ``state=absent`` can undo exactly what ``state=present`` did (its format, with what else a
  reader of those files needs, is ``runtime.managed``, which does not import tomlkit);
* style-preserving TOML editing on top of tomlkit (round-trip: comments, key order and
  unrelated keys survive; the file is never re-serialised from a plain dict);
* the drop-in files the module owns outright, written whole by tomlkit in containerd's layout.

The module's flow (read the host, plan, check, write) is ``runtime.config``, which uses the
editors and this file.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib
import json
import re
import traceback

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import toml_subset
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

# What a reader of the managed files needs, without tomlkit (discovery and validation import only
# that file); the editors and their callers find it here too, as part of what the editors share.
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.managed import (  # noqa: F401  pylint: disable=unused-import
    OWNER_MARK,
    STATE_MARK,
    GoTemplateMask,
    decode_record_line,
    encode_record,
    find_record_in_text,
    get_path,
    plain,
    same,
    toml_key,
)

try:
    import tomlkit
    from tomlkit import items as tk_items
    from tomlkit.container import Container as TkContainer
    from tomlkit.container import OutOfOrderTableProxy as TkProxy
    from tomlkit.exceptions import ParseError as TomlParseError

    HAS_TOMLKIT = True
    TOMLKIT_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - exercised on hosts without python3-tomlkit
    tomlkit = None
    tk_items = None
    TkContainer = None
    TkProxy = None
    TomlParseError = ValueError
    HAS_TOMLKIT = False
    TOMLKIT_IMPORT_ERROR = traceback.format_exc()


def load_tomlkit() -> bool:
    """Import tomlkit now if it was missing when this file was loaded; whether it is there.

    ``toolkit_packages`` installs ``python3-tomlkit`` and configures the runtime in the same
    process: the import at the top of this file ran before the install. The import system's
    caches still list the package directory as it was, hence ``invalidate_caches``. Every use
    of tomlkit in the runtime layer goes through this file, so the editors see it at once.
    """
    global tomlkit, tk_items, TkContainer, TkProxy, TomlParseError, HAS_TOMLKIT, TOMLKIT_IMPORT_ERROR
    if HAS_TOMLKIT:
        return True
    importlib.invalidate_caches()
    try:
        import tomlkit as loaded
        from tomlkit import items as loaded_items
        from tomlkit.container import Container as LoadedContainer
        from tomlkit.container import OutOfOrderTableProxy as LoadedProxy
        from tomlkit.exceptions import ParseError as LoadedParseError
    except ImportError:
        TOMLKIT_IMPORT_ERROR = traceback.format_exc()
        return False
    tomlkit, tk_items, TkContainer, TkProxy, TomlParseError = (
        loaded, loaded_items, LoadedContainer, LoadedProxy, LoadedParseError
    )
    HAS_TOMLKIT, TOMLKIT_IMPORT_ERROR = True, None
    return True


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


# --------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# Parsing with useful errors
# --------------------------------------------------------------------------------------


def require_tomlkit() -> None:
    if not HAS_TOMLKIT:
        raise GpuFleetError(
            "the Python library tomlkit is required to edit TOML files (install python3-tomlkit)",
            exception=TOMLKIT_IMPORT_ERROR,
        )


def parse_toml(text, path: str):
    """Parse ``text`` (``None`` or empty: an empty document) or raise with line and column."""
    require_tomlkit()
    if not text:
        return tomlkit.document()
    try:
        doc = tomlkit.parse(text)
    except TomlParseError as exc:
        line = getattr(exc, "line", None)
        col = getattr(exc, "col", None)
        if col is not None:
            col += 1  # tomlkit counts columns from 0, editors (and json) from 1
        reason = re.sub(r" at line \d+ col \d+$", "", str(exc))
        raise GpuFleetError(
            "%s is not valid TOML (line %s, column %s): %s; the file was left untouched"
            % (path, line, col, reason),
            path=path,
            line=line,
            column=col,
        )
    except Exception as exc:  # tomlkit raises a few non-ParseError errors (duplicate keys)
        raise GpuFleetError(
            "%s is not valid TOML: %s; the file was left untouched" % (path, exc), path=path
        )
    if doc.as_string() != text:
        _repair_header_indents(doc, text)
    if doc.as_string() != text:
        raise GpuFleetError(
            "%s cannot be edited without changing its layout (tomlkit %s does not reproduce it "
            "byte for byte); the file was left untouched" % (path, getattr(tomlkit, "__version__", "?")),
            path=path,
        )
    return doc


def _repair_header_indents(doc, text: str) -> None:
    """Give every table header back the indentation it has in ``text``.

    tomlkit (0.11 to 0.15 at least) doubles the indentation of the second and later
    sub-tables of a table that has no header of its own (``[a.b.x]`` then ``[a.b.y]``,
    indented), so such a file would not come back byte for byte.
    """
    indents = {}
    for line in text.splitlines():
        m = _HEADER_RE.match(line)
        if m:
            key_path = header_path(m.group(2).strip())
            if key_path is not None:
                indents.setdefault(key_path, m.group(1))

    def walk(container, prefix):
        for key, item in container.body:
            if key is None or not isinstance(item, tk_items.Table):
                continue
            key_path = prefix + (key.key,)
            if key_path in indents:
                item.trivia.indent = re.sub(r"[ \t]*$", indents[key_path], item.trivia.indent, count=1)
            walk(item.value, key_path)

    walk(doc, ())


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


def toml_data(text: str):
    """The plain data of a TOML text (tomlkit's errors are raised as they are)."""
    return plain(tomlkit.parse(text))


def without_empty(tree):
    """``tree`` without its empty tables (and the tables left empty by that): settings, not layout."""
    if not isinstance(tree, dict):
        return tree
    out = dict((k, without_empty(v)) for k, v in tree.items())
    return dict((k, v) for k, v in out.items() if v != {})


def toml_settings(text: str):
    """The settings a TOML text holds, empty tables left out (:func:`undo_note`'s ``data``)."""
    return without_empty(toml_data(text))


# --------------------------------------------------------------------------------------
# The state record
# --------------------------------------------------------------------------------------


def _valid_record_entry(entry) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("path"), list) and bool(entry["path"]) and all(
        isinstance(k, str) for k in entry["path"]
    ) and isinstance(entry.get("raw"), (str, type(None)))


def _valid_paths(value) -> bool:
    return isinstance(value, list) and all(isinstance(p, list) and all(isinstance(k, str) for k in p) for p in value)


def checked_record(record, path, owner="gpufleet.nvidia.container_runtime", mark=STATE_MARK, created="paths"):
    """``record`` (a state comment the module wrote), or a refusal naming ``path`` when it is damaged.

    ``created``: what the record's ``created`` is, ``paths`` (the key paths the module added, as the
    runtime editors record them) or ``flag`` (a boolean: the module created the file)."""
    if record is None:
        return None
    fine = isinstance(record, dict) and isinstance(record.get("keys", []), list)
    fine = fine and all(_valid_record_entry(e) for e in record.get("keys", []))
    if created == "paths":
        fine = fine and all(_valid_paths(record.get(k, [])) for k in ("created", "headered"))
    else:
        fine = fine and isinstance(record.get("created", False), bool)
    if not fine:
        raise GpuFleetError(
            "%s: the state comment of %s (%s) is damaged (expected a JSON object whose keys is a list of "
            "{path: [key, ...], raw}, %s; found %s); put the file back from a backup, or remove the comment and "
            "what the module added; the file was left untouched"
            % (path, owner, mark, "created and headered lists of key paths" if created == "paths" else "created a boolean",
               json.dumps(record)[:200]),
            path=path,
        )
    return record


# --------------------------------------------------------------------------------------
# The byte-exact undo: what state=absent needs beyond the settings
# --------------------------------------------------------------------------------------

#: The record's key that holds :func:`undo_note`'s note.
UNDO_KEY = "undo"


def _digest(text: str) -> str:
    """A fingerprint of ``text`` (change detection, not security: 64 bits of SHA-256)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def keep_undo_note(item, record, note):
    """Store ``note`` (None: no note) in a handler's record, the comment on ``item``, unless it is
    the one already there."""
    if note == record.get(UNDO_KEY):
        return
    record.pop(UNDO_KEY, None)
    if note is not None:
        record[UNDO_KEY] = note
    item.trivia.comment = encode_record(record)


def undo_note(removed, origin, data):
    """What turns ``removed`` back into ``origin`` byte for byte: ``{"sha": .., "patch": [[i1, i2, text], ..]}``.

    ``removed`` is the file as ``state=absent`` leaves it by settings (the editor's own keys taken
    out: tomlkit and ``json`` may drop a blank line, a final newline, an empty table), ``origin``
    the user's file before the module's first edit. The patch replaces lines ``i1:i2`` of
    ``removed`` by ``text``; ``sha`` fingerprints ``removed``, so that the patch is applied only to
    the very text it was made for (the user changed nothing but the module's own keys since).
    ``None`` when no note is to be kept: the texts are the same, there is no file on one side, or
    they differ in settings (``data``: a text's settings, empty tables left out; e.g. a handler
    another tool wrote before the module: the patch must not put it back).
    """
    if removed is None or origin is None or removed == origin or not same(data(removed), data(origin)):
        return None
    a, b = removed.splitlines(True), origin.splitlines(True)
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    patch = [[i1, i2, "".join(b[j1:j2])] for tag, i1, i2, j1, j2 in opcodes if tag != "equal"]
    return {"sha": _digest(removed), "patch": patch}


def apply_undo(removed, note):
    """``removed`` with ``note``'s patch applied; ``None`` when the note is not for this text (or damaged)."""
    if removed is None or not isinstance(note, dict) or note.get("sha") != _digest(removed):
        return None
    patch = note.get("patch")
    lines = removed.splitlines(True)
    if not isinstance(patch, list) or not all(_patch_step(step, len(lines)) for step in patch):
        return None
    for i1, i2, text in sorted(patch, reverse=True):
        lines[i1:i2] = [text]
    return "".join(lines)


def _patch_step(step, size: int) -> bool:
    """Whether ``step`` is ``[i1, i2, text]`` with ``0 <= i1 <= i2 <= size``."""
    if not isinstance(step, list) or len(step) != 3 or not isinstance(step[2], str):
        return False
    i1, i2 = step[0], step[1]
    valid = all(isinstance(i, int) and not isinstance(i, bool) for i in (i1, i2))
    return valid and 0 <= i1 <= i2 <= size


def recover_origin(text, removed, note):
    """The user's file before the module's first edit, as far as it is known.

    ``removed`` is ``text`` with the module's keys out (None: the file holds no edit of the module,
    ``text`` is the origin). ``note`` applied to ``removed`` when it is the text the note was made
    for; ``removed`` itself when there is no note (its bytes are all that is known). ``None`` when
    a note is there but made for another text (the user edited the file since): the note is kept
    as it is, so that a second run changes nothing and the note works again if the edit is undone.
    """
    if note is None and removed is None:
        return text
    if note is None:
        return removed
    return apply_undo(removed, note)


# --------------------------------------------------------------------------------------
# tomlkit's own errors: a refusal that names the file and the table
# --------------------------------------------------------------------------------------


def split_table(doc, path):
    """The first table on ``path`` (a key path) that the file defines in several places, else None."""
    for depth in range(1, len(path) + 1):
        if len(_real_nodes(doc, path[:depth])) > 1:
            return list(path[:depth])
    return None


def out_of_order_refusal(path: str, doc, table_path, why) -> GpuFleetError:
    """The refusal of an in-place edit of ``table_path`` that tomlkit cannot make (``why``: what went wrong)."""
    split = split_table(doc, list(table_path))
    where = ".".join(toml_key(k) for k in (split or table_path))
    how = "is defined in several places of the file (its tables out of order)" if split else "could not be edited"
    return GpuFleetError(
        "%s: the table %s %s, and tomlkit %s cannot edit it in place (%s); put its tables together "
        "(or, for containerd and CRI-O, use config_mode=dropin); the file was left untouched"
        % (path, where, how, getattr(tomlkit, "__version__", "?"), why),
        path=path,
        table=where,
    )


@contextlib.contextmanager
def refusing_tomlkit_errors(path: str, doc, table_path):
    """Turn an exception of tomlkit's (``NonExistentKey`` on an out-of-order table) raised while
    editing ``table_path`` of ``path`` into a GpuFleetError that names the file and the table."""
    try:
        yield
    except GpuFleetError:
        raise
    except Exception as exc:  # noqa: BLE001 - tomlkit's own only; anything else is raised as it is
        if not type(exc).__module__.startswith("tomlkit"):
            raise
        raise out_of_order_refusal(path, doc, table_path, "%s: %s" % (type(exc).__name__, exc))


def check_edited_toml(path: str, before, after, table_path) -> None:
    """Refuse ``after`` (the edited text of ``path``) unless a strict TOML parser reads it.

    tomlkit reads and writes some files it edited among out-of-order tables that TOML (Python's
    tomllib, containerd's and CRI-O's Go parsers) refuses: a table declared twice. Where Python has
    no tomllib (before 3.11), tomlkit's own reading is the check.
    """
    if after is None:
        return
    try:
        strict_toml(after)
    except Exception as exc:  # noqa: BLE001 - tomllib's or tomlkit's error, whichever parser read it
        try:
            doc = tomlkit.parse(before or "")
        except Exception:  # noqa: BLE001 - not even tomlkit reads the original: no table to name
            doc = tomlkit.document()
        if split_table(doc, list(table_path)):
            raise out_of_order_refusal(path, doc, table_path, "the result would not be valid TOML: %s" % exc)
        raise GpuFleetError("internal error: the edited %s would not be valid TOML: %s; nothing was written" % (path, exc), path=path)


def strict_toml(text: str):
    """The data of ``text`` read by tomllib (or tomli; tomlkit without either); raises the parser's error."""
    if toml_subset.tomllib is None:  # pragma: no cover - Python before 3.11 without tomli
        return toml_data(text)
    return toml_subset.tomllib.loads(text)


# --------------------------------------------------------------------------------------
# Writing TOML that the module owns (drop-ins)
# --------------------------------------------------------------------------------------


def dump_toml(top: dict, header_comments=()) -> str:
    """A plain dict as a whole new TOML file, laid out the way containerd writes its own: a header
    per table, indented two spaces per depth, scalars before sub-tables, each in the dict's order,
    after the comment lines ``header_comments`` (each with its ``#``)."""
    require_tomlkit()
    doc = tomlkit.document()
    for line in header_comments:
        doc.add(tk_items.Comment(tk_items.Trivia(comment=line, trail="\n")))
    for key, value in top.items():
        if not isinstance(value, dict):
            doc.add(key, tk_value(value, _OWNED))
    for key, value in top.items():
        if isinstance(value, dict):
            doc.add(key, _owned_table(value, 0, bool(doc.body)))
    return doc.as_string()


def _owned_table(table: dict, depth: int, blank: bool):
    """``table`` as a tomlkit table with its own header (a blank line before it where ``blank``)."""
    tbl = tomlkit.table(is_super_table=False)
    tbl.trivia.indent = ("\n" if blank else "") + _OWNED.header_indent(depth + 1)
    for key, value in table.items():
        if not isinstance(value, dict):
            item = tk_value(value, _OWNED)
            item.trivia.indent = _OWNED.key_indent(depth + 1)
            tbl.raw_append(key, item)
    for key, value in table.items():
        if isinstance(value, dict):
            tbl.raw_append(key, _owned_table(value, depth + 1, True))
    return tbl


# --------------------------------------------------------------------------------------
# Style-preserving edits of a parsed TOML document
# --------------------------------------------------------------------------------------

_HEADER_RE = re.compile(r"^([ \t]*)\[(?!\[)(.+?)\][ \t]*(#.*)?$")
_KV_RE = re.compile(r"^([ \t]*)[A-Za-z0-9_\"'.-][^=]*=")


def header_path(inner: str):
    """The key path of a table header's inner text (``plugins."a.b".c``)."""
    require_tomlkit()
    try:
        doc = tomlkit.parse("[%s]\n" % inner)
    except Exception:  # pragma: no cover - the text came from a parsed file
        return None
    path = []
    node = doc
    while isinstance(node, (dict,)) and len(node) == 1:
        key = list(node.keys())[0]
        path.append(key)
        node = node[key]
    return tuple(path)


def defined_tables(text: str) -> set:
    """Key paths of the tables a TOML text defines with a ``[header]``."""
    found = set()
    for line in (text or "").splitlines():
        m = _HEADER_RE.match(line)
        if m:
            path = header_path(m.group(2).strip())
            if path:
                found.add(path)
    return found


class TomlStyle:
    """How a file lays out its tables, so that what the module adds looks like the rest.

    ``step``: the indentation added per table depth for headers (containerd writes two
    spaces, hand-written files usually none); ``key_offset``: keys' indentation relative to
    their header; ``literal``: the file writes strings in single quotes (containerd 2.x).
    """

    def __init__(self, step: str = "  ", key_offset: str = "  ", literal: bool = False) -> None:
        self.step = step
        self.key_offset = key_offset
        self.literal = literal

    @classmethod
    def detect(cls, text: str, default_step: str = "  ") -> "TomlStyle":
        """The style of ``text``; an empty file gets ``default_step``, a flat one no indentation."""
        step, key_offset = _indentation(text or "")
        if step is None:
            step = default_step if not text or not text.strip() else ""
        if key_offset is None:
            key_offset = step
        singles = len(re.findall(r"=\s*'", text or ""))
        doubles = len(re.findall(r'=\s*"', text or ""))
        return cls(step=step, key_offset=key_offset, literal=singles > doubles)

    def header_indent(self, depth: int) -> str:
        return self.step * max(depth - 1, 0)

    def key_indent(self, depth: int) -> str:
        return self.header_indent(depth) + self.key_offset


#: The style of the files the module writes whole: strings in double quotes.
_OWNED = TomlStyle()


def _indentation(text: str):
    """``(step, key offset)`` as the file shows them (``None`` where it does not).

    The step is read from the first header of a nested table (indented by depth or not), the
    key offset from the first key under a header.
    """
    step = key_offset = header_indent = None
    for line in text.splitlines():
        m = _HEADER_RE.match(line)
        if m:
            header_indent = m.group(1)
            if step is None:
                step = _header_step(m)
            continue
        if header_indent is not None and key_offset is None:
            key_offset = _key_offset(line, header_indent)
    return step, key_offset


def _header_step(match):
    """The indentation step a nested table's header shows; None for a top-level table's."""
    path = header_path(match.group(2).strip()) or ()
    if len(path) < 2:
        return None
    return "  " if len(match.group(1)) == 2 * (len(path) - 1) else ""


def _key_offset(line: str, header_indent: str):
    """The indentation of a key line beyond its header's; None for other lines."""
    k = _KV_RE.match(line)
    if k and not line.strip().startswith("#") and k.group(1).startswith(header_indent):
        return k.group(1)[len(header_indent):]
    return None


def tk_value(value, style: TomlStyle):
    """A tomlkit item for a plain value, in the file's string style."""
    require_tomlkit()
    if isinstance(value, str):
        if style.literal and "'" not in value and "\n" not in value:
            return tomlkit.string(value, literal=True)
        return tomlkit.string(value)
    if isinstance(value, (list, tuple)):
        arr = tomlkit.array()
        for v in value:
            arr.append(tk_value(v, style))
        return arr
    if isinstance(value, dict):
        tbl = tomlkit.inline_table()
        for k, v in value.items():
            tbl.append(k, tk_value(v, style))
        return tbl
    return tomlkit.item(value)


def toml_item(value):
    """A tomlkit item for a plain value as tomlkit writes it (strings in double quotes)."""
    return tomlkit.item(value)


def is_table(node) -> bool:
    return isinstance(node, (tk_items.Table, TkProxy)) or (
        HAS_TOMLKIT and isinstance(node, TkContainer)
    )


def fragments(table) -> list:
    """The real tables behind a table (tomlkit shows split tables through a proxy)."""
    if isinstance(table, TkProxy):
        return list(table._tables)  # pylint: disable=protected-access
    return [table]


def shows_no_header(table) -> bool:
    """Whether ``table`` prints no header of its own (tomlkit's super tables, in every fragment)."""
    return all(isinstance(frag, tk_items.Table) and frag.is_super_table() for frag in fragments(table))


def _body(table):
    if isinstance(table, TkContainer):
        return table.body
    return table.value.body


def _last_is_blank(table) -> bool:
    """Whether the text a table renders ends with a blank line."""
    body = _body(fragments(table)[-1])
    if not body:
        return False
    last = body[-1][1]
    if isinstance(last, tk_items.Whitespace):
        return "\n" in last.s
    if isinstance(last, (tk_items.Table,)):
        return _last_is_blank(last)
    return False


def _kv_indent(table, style: TomlStyle, depth: int) -> str:
    """The indentation of the key-values already in ``table`` (else the style's)."""
    for frag in fragments(table):
        for key, item in _body(frag):
            if key is not None and not isinstance(item, (tk_items.Table, tk_items.AoT)):
                return item.trivia.indent.lstrip("\n")
    return style.key_indent(depth)


def new_table(desired: dict, depth: int, style: TomlStyle, leading_blank: bool = True):
    """A tomlkit table holding ``desired``, laid out in ``style`` at ``depth``.

    ``leading_blank``: a blank line before the header (and before each sub-table's).
    """
    require_tomlkit()
    tbl = tomlkit.table()
    tbl.trivia.indent = ("\n" if leading_blank else "") + style.header_indent(depth)
    for key, value in desired.items():
        if isinstance(value, dict):
            continue
        item = tk_value(value, style)
        item.trivia.indent = style.key_indent(depth)
        tbl.raw_append(key, item)
    for key, value in desired.items():
        if isinstance(value, dict):
            tbl.raw_append(key, new_table(value, depth + 1, style, leading_blank=leading_blank))
    return tbl


def _append_blank(table) -> None:
    """Append a blank line at the very end of what ``table`` renders."""
    last = fragments(table)[-1]
    body = _body(last)
    if body and isinstance(body[-1][1], tk_items.Table):
        _append_blank(body[-1][1])
        return
    last.raw_append(None, tk_items.Whitespace("\n"))


def _strip_trailing_blank(table) -> None:
    """Remove blank-line whitespace at the very end of what ``table`` renders."""
    last = fragments(table)[-1]
    body = _body(last)
    while body and isinstance(body[-1][1], tk_items.Whitespace):
        body.pop()
    if body and isinstance(body[-1][1], tk_items.Table):
        _strip_trailing_blank(body[-1][1])


def add_table(parent, key: str, desired: dict, depth: int, style: TomlStyle) -> None:
    """Add a new sub-table ``key`` at the end of ``parent``, so that removing it gives back
    the same text.

    When parsing, tomlkit gives the blank lines before a header to the table above it. So
    a new table starts with a blank line only where ``parent`` ended with one, and that
    blank line moves to the end of the new table: the table above keeps its blank line,
    the new table owns the one it brought.
    """
    blank_before = _last_is_blank(parent)
    if blank_before:
        _strip_trailing_blank(parent)
    tbl = new_table(desired, depth, style, leading_blank=blank_before)
    indent = tbl.trivia.indent
    if blank_before:
        _append_blank(tbl)
    target = fragments(parent)[-1]
    if isinstance(target, TkContainer):
        target.append(key, tbl)
    else:
        target.raw_append(key, tbl)
    # Container.append gives a table without indentation a blank line before it.
    tbl.trivia.indent = indent


def set_scalar(table, key: str, value, depth: int, style: TomlStyle) -> bool:
    """Set ``table[key] = value`` keeping the key's place, indentation and comment."""
    if key in table:
        if same(table[key], value):
            return False
        old = item_of(table, key)
        new = tk_value(value, style)
        if isinstance(old, tk_items.String) and isinstance(new, tk_items.String):
            kind = getattr(old, "type", None) or getattr(old, "_t", None)  # tomlkit < 0.12: _t
            literal = kind in (tk_items.StringType.SLL, tk_items.StringType.MLL)
            if literal and "'" not in value and "\n" not in value:
                new = tomlkit.string(value, literal=True)
            elif not literal:
                new = tomlkit.string(value)
        table[key] = new
        return True
    item = tk_value(value, style)
    item.trivia.indent = _kv_indent(table, style, depth)
    target = fragments(table)[0]
    if getattr(target, "_is_super_table", None):
        target._is_super_table = False  # pylint: disable=protected-access  # it gets a header now
    _insert_kv(target if isinstance(target, TkContainer) else target.value, key, item)
    return True


def _insert_kv(container, key: str, item) -> None:
    """Insert a key-value after the container's last key-value (before its sub-tables).

    ``Container.append`` would add a blank line between the key and the sub-tables, which
    removing the key later would leave behind.
    """
    body = container.body
    position = 0
    for index, (k, v) in enumerate(body):
        if isinstance(v, (tk_items.Table, tk_items.AoT)):
            break
        if isinstance(v, tk_items.Comment) and GoTemplateMask.is_action_line(v.trivia.comment):
            break  # stay out of {{ if }} blocks of a Go template
        if k is not None:
            position = index + 1
    if position < len(body):
        container._insert_at(position, key, item)  # pylint: disable=protected-access
    else:
        container.append(key, item)


def sync_table(table, desired: dict, depth: int, style: TomlStyle) -> bool:
    """Make ``table`` hold every key of ``desired`` (keys not in it are kept)."""
    changed = False
    for key, value in desired.items():
        if isinstance(value, dict):
            if key in table and is_table(table[key]):
                changed = sync_table(table[key], value, depth + 1, style) or changed
            else:
                if key in table:
                    del table[key]
                add_table(table, key, value, depth + 1, style)
                changed = True
        else:
            changed = set_scalar(table, key, value, depth, style) or changed
    return changed


def ensure_tables(doc, path, style: TomlStyle, created: list):
    """Walk ``path`` from the document, creating the tables that are missing.

    A table created here prints no header while it holds only sub-tables (tomlkit's
    super tables); the key paths of created tables are appended to ``created``.
    """
    node = doc
    for i, key in enumerate(path):
        if key not in node:
            tbl = tomlkit.table()
            # No header while it holds only sub-tables (tomlkit < 0.12 does not work it out).
            tbl._is_super_table = True  # pylint: disable=protected-access
            tbl.trivia.indent = style.header_indent(i + 1)
            blank_before = not isinstance(node, TkContainer) and _last_is_blank(node)
            if blank_before:
                _strip_trailing_blank(node)  # it moves along to the end of what is added
            target = fragments(node)[-1]
            if isinstance(target, TkContainer):
                target.append(key, tbl)
            else:
                target.raw_append(key, tbl)
            # Container.append starts a table without indentation with a blank line.
            tbl.trivia.indent = style.header_indent(i + 1)
            if blank_before:
                tbl.raw_append(None, tk_items.Whitespace("\n"))
            created.append(list(path[: i + 1]))
        node = node[key]
        if not is_table(node):
            raise GpuFleetError(
                "%s is not a table in the configuration (found %r)"
                % (".".join(path[: i + 1]), plain(node))
            )
    return node


def insert_top_kv(doc, key: str, item, first: bool = False) -> None:
    """Insert a top-level key: first in the file, or after the last top-level key."""
    item.trivia.indent = ""
    body = doc.body
    kv_positions = [
        i
        for i, (k, v) in enumerate(body)
        if k is not None and not isinstance(v, (tk_items.Table, tk_items.AoT))
    ]
    tables = [i for i, (k, v) in enumerate(body) if isinstance(v, (tk_items.Table, tk_items.AoT))]
    if first and kv_positions:
        position = kv_positions[0]
    elif kv_positions:
        position = kv_positions[-1] + 1
    elif tables:
        position = tables[0]  # before the first table, without the blank line append adds
    else:
        position = len(body)
    if position < len(body):
        doc._insert_at(position, key, item)  # pylint: disable=protected-access
    else:
        doc.append(key, item)


def _real_nodes(doc, path):
    """The real tables at ``path``, walking the document's bodies rather than tomlkit's
    proxies (a table split in several places is several nodes)."""
    nodes = [doc]
    for key in path:
        found = []
        for node in nodes:
            container = node if isinstance(node, TkContainer) else node.value
            for k, item in container.body:
                if k is not None and k.key == key and isinstance(item, tk_items.Table):
                    found.append(item)
        nodes = found
    return nodes


def delete_path(doc, path) -> bool:
    """Delete the key at ``path`` wherever it really is (also in split tables)."""
    deleted = False
    for node in _real_nodes(doc, path[:-1]):
        container = node if isinstance(node, TkContainer) else node.value
        if path[-1] in container:
            del container[path[-1]]
            deleted = True
    return deleted


def replace_path(doc, path, item) -> bool:
    """Set the existing key at ``path`` to ``item`` where it really is."""
    for node in _real_nodes(doc, path[:-1]):
        container = node if isinstance(node, TkContainer) else node.value
        if path[-1] in container:
            container[path[-1]] = item
            return True
    return False


def prune_created(doc, created) -> None:
    """Remove the tables in ``created`` (deepest first) that are now empty."""
    for path in sorted(created, key=len, reverse=True):
        for node in _real_nodes(doc, path):
            if len(plain(node)) == 0:
                delete_path(doc, path)
                break


def hide_headers(doc, paths) -> None:
    """Make the tables at ``paths`` header-less again once they hold only sub-tables."""
    for path in paths:
        for node in _real_nodes(doc, path):
            # tomlkit leaves a Null in the body where a key was deleted
            kinds = (tk_items.Table, tk_items.AoT, tk_items.Whitespace, tk_items.Null)
            if all(isinstance(entry[1], kinds) for entry in node.value.body):
                node._is_super_table = True  # pylint: disable=protected-access


# --------------------------------------------------------------------------------------
# Recorded changes (for an exact undo)
# --------------------------------------------------------------------------------------


def item_of(table, key):
    """The tomlkit item of ``table[key]`` (indexing gives plain ``bool`` for booleans)."""
    for frag in fragments(table):
        if key in frag:
            container = frag if isinstance(frag, TkContainer) else frag.value
            return container.item(key)
    raise KeyError(key)


def raw_text(table, key):
    """The TOML text of ``table[key]`` (``None`` when missing)."""
    if key not in table:
        return None
    return item_of(table, key).as_string().strip()


def record_entry(record: dict, path) -> dict:
    for entry in record.setdefault("keys", []):
        if entry.get("path") == list(path):
            return entry
    return None


def note_change(record: dict, path, table, key, new_value) -> None:
    """Record the original text of ``path`` (first time only) and the value now set."""
    entry = record_entry(record, path)
    if entry is None:
        entry = {"path": list(path), "raw": raw_text(table, key)}
        record["keys"].append(entry)
    entry["set"] = plain(new_value)


def parse_raw(raw):
    return tomlkit.parse("x = %s\n" % raw)["x"]


def lookup(doc, path):
    node = doc
    for key in path:
        if not is_table(node) or key not in node:
            return None
        node = node[key]
    return node


def restore_entry(doc, entry: dict, warnings: list) -> bool:
    """Put back the value recorded in ``entry`` if the key still holds what was set."""
    path = entry["path"]
    parent = lookup(doc, path[:-1]) if len(path) > 1 else doc
    key = path[-1]
    if parent is None or not hasattr(parent, "keys") or key not in parent:
        return False
    if not same(parent[key], entry.get("set")):
        warnings.append(
            "%s was changed after the module set it; left as it is" % ".".join(path)
        )
        return False
    if entry.get("raw") is None:
        delete_path(doc, path)
    else:
        replace_path(doc, path, parse_raw(entry["raw"]))
    return True


def record_comment(table):
    """``(item, record)`` of the state comment inside a runtime table."""
    for frag in fragments(table):
        for entry in frag.value.body:
            item = entry[1]
            if isinstance(item, tk_items.Comment):
                record = decode_record_line(item.trivia.comment)
                if record is not None:
                    return item, record
    return None, None


def write_record_comment(table, record, indent) -> None:
    """Put the state record as the first line of a runtime table (or update it)."""
    item = record_comment(table)[0]
    text = encode_record(record)
    if item is not None:
        item.trivia.comment = text
        return
    comment = tk_items.Comment(tk_items.Trivia(indent=indent, comment_ws="", comment=text, trail="\n"))
    container = fragments(table)[0].value
    # tomlkit has no public way to insert a comment at a position: shift its key index.
    container.body.insert(0, (None, comment))
    index = container._map  # pylint: disable=protected-access
    for key, value in list(index.items()):
        index[key] = tuple(v + 1 for v in value) if isinstance(value, tuple) else value + 1
