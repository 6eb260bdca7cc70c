# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""tomlkit for the runtime editors: TOML read with errors that name the file, line and column, the
layout of a file (:class:`TomlStyle`), and the files the module owns outright written whole.

Every use of tomlkit in the runtime layer goes through this file (:func:`load_tomlkit` may import it
late), so that a node whose modules only read the runtime's files need not have it: what a reader
needs (the editors' marks and state records, a TOML key as they write it) is ``runtime.managed``,
without tomlkit. The style-preserving edits are ``runtime.toml_edit``; what an editor reads and
returns, ``runtime.files``; the byte-exact undo, ``runtime.undo``; the module's flow (read the host,
plan, check, write), ``runtime.config``.
"""

from __future__ import annotations

import importlib
import re
import traceback

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import toml_subset
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.managed import unwrap

tomlkit = tk_items = TkContainer = TkProxy = None
TomlParseError = ValueError
HAS_TOMLKIT = False
TOMLKIT_IMPORT_ERROR = None


def load_tomlkit(invalidate: bool = True) -> bool:
    """Import tomlkit (when this file is loaded, and again if it was missing then); whether it is there.

    ``toolkit_packages`` installs ``python3-tomlkit`` and configures the runtime in the same
    process: the import when this file was loaded ran before the install. The import system's
    caches still list the package directory as it was, hence ``invalidate_caches``. Every use
    of tomlkit in the runtime layer goes through this file, so the editors see it at once.
    """
    global tomlkit, tk_items, TkContainer, TkProxy, TomlParseError, HAS_TOMLKIT, TOMLKIT_IMPORT_ERROR
    if HAS_TOMLKIT:
        return True
    if invalidate:
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


load_tomlkit(invalidate=False)


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


def toml_data(text: str):
    """The plain data of a TOML text (tomlkit's errors are raised as they are)."""
    return unwrap(tomlkit.parse(text))


def without_empty(tree):
    """``tree`` without its empty tables (and the tables left empty by that): settings, not layout."""
    if not isinstance(tree, dict):
        return tree
    out = dict((k, without_empty(v)) for k, v in tree.items())
    return dict((k, v) for k, v in out.items() if v != {})


def toml_settings(text: str):
    """The settings a TOML text holds, empty tables left out (:func:`undo_note`'s ``data``)."""
    return without_empty(toml_data(text))


def strict_toml(text: str):
    """The data of ``text`` read by tomllib (or tomli; tomlkit without either); raises the parser's error."""
    if toml_subset.tomllib is None:  # pragma: no cover - Python before 3.11 without tomli
        return toml_data(text)
    return toml_subset.tomllib.loads(text)


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


def body_of(table):
    if isinstance(table, TkContainer):
        return table.body
    return table.value.body


def real_nodes(doc, path):
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
