# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Style-preserving edits of a TOML document parsed by tomlkit (``runtime.edit``), as the editors make them.

Keys and tables are added where the file's own would be, laid out in its style (``edit.TomlStyle``),
so that removing them gives back the same text; a key the module changes keeps its place,
indentation and comment, and its original text is recorded for an exact undo. tomlkit's own
errors on what it cannot edit in place (a table defined in several places) become a refusal that
names the file and the table. tomlkit is reached through ``runtime.edit`` (``edit.tomlkit``,
``edit.tk_items``), which may import it late (:func:`edit.load_tomlkit`).
"""

from __future__ import annotations

import contextlib

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import edit
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit import TomlStyle, body_of, fragments, is_table, real_nodes, tk_value
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.managed import (
    GoTemplateMask, decode_record_line, encode_record, same, toml_key, unwrap,
)


def split_table(doc, path):
    """The first table on ``path`` (a key path) that the file defines in several places, else None."""
    for depth in range(1, len(path) + 1):
        if len(real_nodes(doc, path[:depth])) > 1:
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
        % (path, where, how, getattr(edit.tomlkit, "__version__", "?"), why),
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
        edit.strict_toml(after)
    except Exception as exc:  # noqa: BLE001 - tomllib's or tomlkit's error, whichever parser read it
        try:
            doc = edit.tomlkit.parse(before or "")
        except Exception:  # noqa: BLE001 - not even tomlkit reads the original: no table to name
            doc = edit.tomlkit.document()
        if split_table(doc, list(table_path)):
            raise out_of_order_refusal(path, doc, table_path, "the result would not be valid TOML: %s" % exc)
        raise GpuFleetError("internal error: the edited %s would not be valid TOML: %s; nothing was written" % (path, exc), path=path)


def _last_is_blank(table) -> bool:
    """Whether the text a table renders ends with a blank line."""
    body = body_of(fragments(table)[-1])
    if not body:
        return False
    last = body[-1][1]
    if isinstance(last, edit.tk_items.Whitespace):
        return "\n" in last.s
    if isinstance(last, (edit.tk_items.Table,)):
        return _last_is_blank(last)
    return False


def _kv_indent(table, style: TomlStyle, depth: int) -> str:
    """The indentation of the key-values already in ``table`` (else the style's)."""
    for frag in fragments(table):
        for key, item in body_of(frag):
            if key is not None and not isinstance(item, (edit.tk_items.Table, edit.tk_items.AoT)):
                return item.trivia.indent.lstrip("\n")
    return style.key_indent(depth)


def new_table(desired: dict, depth: int, style: TomlStyle, leading_blank: bool = True):
    """A tomlkit table holding ``desired``, laid out in ``style`` at ``depth``.

    ``leading_blank``: a blank line before the header (and before each sub-table's).
    """
    edit.require_tomlkit()
    tbl = edit.tomlkit.table()
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
    body = body_of(last)
    if body and isinstance(body[-1][1], edit.tk_items.Table):
        _append_blank(body[-1][1])
        return
    last.raw_append(None, edit.tk_items.Whitespace("\n"))


def _strip_trailing_blank(table) -> None:
    """Remove blank-line whitespace at the very end of what ``table`` renders."""
    last = fragments(table)[-1]
    body = body_of(last)
    while body and isinstance(body[-1][1], edit.tk_items.Whitespace):
        body.pop()
    if body and isinstance(body[-1][1], edit.tk_items.Table):
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
    if isinstance(target, edit.TkContainer):
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
        if isinstance(old, edit.tk_items.String) and isinstance(new, edit.tk_items.String):
            kind = getattr(old, "type", None) or getattr(old, "_t", None)  # tomlkit < 0.12: _t
            literal = kind in (edit.tk_items.StringType.SLL, edit.tk_items.StringType.MLL)
            if literal and "'" not in value and "\n" not in value:
                new = edit.tomlkit.string(value, literal=True)
            elif not literal:
                new = edit.tomlkit.string(value)
        table[key] = new
        return True
    item = tk_value(value, style)
    item.trivia.indent = _kv_indent(table, style, depth)
    target = fragments(table)[0]
    if getattr(target, "_is_super_table", None):
        target._is_super_table = False  # pylint: disable=protected-access  # it gets a header now
    _insert_kv(target if isinstance(target, edit.TkContainer) else target.value, key, item)
    return True


def _insert_kv(container, key: str, item) -> None:
    """Insert a key-value after the container's last key-value (before its sub-tables).

    ``Container.append`` would add a blank line between the key and the sub-tables, which
    removing the key later would leave behind.
    """
    body = container.body
    position = 0
    for index, (k, v) in enumerate(body):
        if isinstance(v, (edit.tk_items.Table, edit.tk_items.AoT)):
            break
        if isinstance(v, edit.tk_items.Comment) and GoTemplateMask.is_action_line(v.trivia.comment):
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
            changed = put_table(table, key, value, depth + 1, style) or changed
        else:
            changed = set_scalar(table, key, value, depth, style) or changed
    return changed


def put_table(parent, key: str, desired: dict, depth: int, style: TomlStyle) -> bool:
    """Make ``parent[key]`` a table holding every key of ``desired``: synced where it is one, else (re)added."""
    if key in parent and is_table(parent[key]):
        return sync_table(parent[key], desired, depth, style)
    if key in parent:
        del parent[key]
    add_table(parent, key, desired, depth, style)
    return True


def ensure_tables(doc, path, style: TomlStyle, created: list):
    """Walk ``path`` from the document, creating the tables that are missing.

    A table created here prints no header while it holds only sub-tables (tomlkit's
    super tables); the key paths of created tables are appended to ``created``.
    """
    node = doc
    for i, key in enumerate(path):
        if key not in node:
            tbl = edit.tomlkit.table()
            # No header while it holds only sub-tables (tomlkit < 0.12 does not work it out).
            tbl._is_super_table = True  # pylint: disable=protected-access
            tbl.trivia.indent = style.header_indent(i + 1)
            blank_before = not isinstance(node, edit.TkContainer) and _last_is_blank(node)
            if blank_before:
                _strip_trailing_blank(node)  # it moves along to the end of what is added
            target = fragments(node)[-1]
            if isinstance(target, edit.TkContainer):
                target.append(key, tbl)
            else:
                target.raw_append(key, tbl)
            # Container.append starts a table without indentation with a blank line.
            tbl.trivia.indent = style.header_indent(i + 1)
            if blank_before:
                tbl.raw_append(None, edit.tk_items.Whitespace("\n"))
            created.append(list(path[: i + 1]))
        node = node[key]
        if not is_table(node):
            raise GpuFleetError(
                "%s is not a table in the configuration (found %r)"
                % (".".join(path[: i + 1]), unwrap(node))
            )
    return node


def insert_top_kv(doc, key: str, item, first: bool = False) -> None:
    """Insert a top-level key: first in the file, or after the last top-level key."""
    item.trivia.indent = ""
    body = doc.body
    kv_positions = [
        i
        for i, (k, v) in enumerate(body)
        if k is not None and not isinstance(v, (edit.tk_items.Table, edit.tk_items.AoT))
    ]
    tables = [i for i, (k, v) in enumerate(body) if isinstance(v, (edit.tk_items.Table, edit.tk_items.AoT))]
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


def delete_path(doc, path) -> bool:
    """Delete the key at ``path`` wherever it really is (also in split tables)."""
    deleted = False
    for node in real_nodes(doc, path[:-1]):
        container = node if isinstance(node, edit.TkContainer) else node.value
        if path[-1] in container:
            del container[path[-1]]
            deleted = True
    return deleted


def replace_path(doc, path, item) -> bool:
    """Set the existing key at ``path`` to ``item`` where it really is."""
    for node in real_nodes(doc, path[:-1]):
        container = node if isinstance(node, edit.TkContainer) else node.value
        if path[-1] in container:
            container[path[-1]] = item
            return True
    return False


def prune_created(doc, created) -> None:
    """Remove the tables in ``created`` (deepest first) that are now empty."""
    for path in sorted(created, key=len, reverse=True):
        for node in real_nodes(doc, path):
            if len(unwrap(node)) == 0:
                delete_path(doc, path)
                break


def hide_headers(doc, paths) -> None:
    """Make the tables at ``paths`` header-less again once they hold only sub-tables."""
    for path in paths:
        for node in real_nodes(doc, path):
            # tomlkit leaves a Null in the body where a key was deleted
            kinds = (edit.tk_items.Table, edit.tk_items.AoT, edit.tk_items.Whitespace, edit.tk_items.Null)
            if all(isinstance(entry[1], kinds) for entry in node.value.body):
                node._is_super_table = True  # pylint: disable=protected-access


def item_of(table, key):
    """The tomlkit item of ``table[key]`` (indexing gives plain ``bool`` for booleans)."""
    for frag in fragments(table):
        if key in frag:
            container = frag if isinstance(frag, edit.TkContainer) else frag.value
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
    entry["set"] = unwrap(new_value)


def parse_raw(raw):
    return edit.tomlkit.parse("x = %s\n" % raw)["x"]


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
            if isinstance(item, edit.tk_items.Comment):
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
    comment = edit.tk_items.Comment(edit.tk_items.Trivia(indent=indent, comment_ws="", comment=text, trail="\n"))
    container = fragments(table)[0].value
    # tomlkit has no public way to insert a comment at a position: shift its key index.
    container.body.insert(0, (None, comment))
    index = container._map  # pylint: disable=protected-access
    for key, value in list(index.items()):
        index[key] = tuple(v + 1 for v in value) if isinstance(value, tuple) else value + 1
