# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TOML, read only, with whatever Python the node has.

The modules run with the node's Python: ``tomllib`` is there from Python 3.11, ``tomli`` where
someone installed it. :func:`loads` reads with that library (:data:`tomllib`) when there is one,
and otherwise with :func:`parse_subset`, the one hand-written reader of the collection, which
reads the TOML that runtime configs use: tables, arrays of tables, dotted and quoted keys,
strings, booleans, integers, floats, one-line inline tables and (multi-line) arrays of scalars.
Both raise ValueError on what they cannot read (``tomllib.TOMLDecodeError`` is a ValueError).
"""

from __future__ import annotations

import json
import re

try:  # Python >= 3.11
    import tomllib
except ImportError:  # pragma: no cover - depends on the node's Python
    try:
        import tomli as tomllib
    except ImportError:
        tomllib = None

__all__ = ["loads", "parse_subset", "tomllib"]

_HEADER = re.compile(r"^\[\s*(.+?)\s*\]\s*(?:#.*)?$")
_ARRAY_HEADER = re.compile(r"^\[\[\s*(.+?)\s*\]\]\s*(?:#.*)?$")
_KEY_PART = re.compile(r"\s*(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[A-Za-z0-9_-]+)\s*")
_ARRAY_ITEM = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^,\s]+")
_INLINE_PAIR = re.compile(r"([^,=]+)=\s*(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^,}]+)")


def loads(text):
    """The TOML document ``text`` as dicts: with :data:`tomllib` where there is one, else :func:`parse_subset`."""
    if tomllib is not None:
        return tomllib.loads(text)
    return parse_subset(text)


def parse_subset(text):
    """The TOML document ``text`` as dicts, read without a TOML library; ValueError names the line it cannot read."""
    data = {}
    current = data
    for number, line in _statements(text):
        try:
            current = _apply(data, current, line)
        except ValueError as exc:
            raise ValueError("line %d: %s" % (number, exc))
    return data


def _statements(text):
    """``(number, line)`` of each statement, comments stripped; a multi-line array is joined onto
    one line, numbered by its last."""
    pending = ""
    for number, raw in enumerate(text.splitlines(), 1):
        if pending:
            pending += " " + _strip_comment(raw.strip())
            if _unclosed(pending):
                continue
            line, pending = pending, ""
        else:
            line = _strip_comment(raw)
            if _opens_array(line):
                pending = line
                continue
        if line:
            yield number, line
    if pending:
        raise ValueError("unterminated array")


def _unclosed(text):
    return text.count("[") > text.count("]")


def _opens_array(line):
    """Whether ``line`` is ``key = [`` an array that goes on over the next lines."""
    if _ARRAY_HEADER.match(line) or _HEADER.match(line):
        return False
    dummy, sep, value = line.partition("=")
    value = value.strip()
    return bool(sep) and value.startswith("[") and _unclosed(value)


def _apply(data, current, line):
    """Read one statement into ``data``; returns the table that the keys after it go to."""
    array = _ARRAY_HEADER.match(line)
    header = array or _HEADER.match(line)
    if header:
        return _open_table(data, header.group(1), bool(array))
    key, sep, value = line.partition("=")
    if not sep:
        raise ValueError("expected 'key = value'")
    _set(current, _split_key(key), _scalar(value))
    return current


def _open_table(data, name, array):
    """The table that ``[name]`` (or a new one of ``[[name]]``) opens in ``data``."""
    keys = _split_key(name)
    current = data
    for key in keys[:-1] if array else keys:
        current = current.setdefault(key, {})
        if isinstance(current, list):
            current = current[-1]
        if not isinstance(current, dict):
            raise ValueError("table %s redefines a value" % name)
    if not array:
        return current
    tables = current.setdefault(keys[-1], [])
    if not isinstance(tables, list):
        raise ValueError("array of tables %s redefines a value" % name)
    tables.append({})
    return tables[-1]


def _split_key(text):
    """``a."b.c".d`` -> ``['a', 'b.c', 'd']``; raises ValueError on anything else."""
    parts = []
    rest = text.strip()
    while True:
        match = _KEY_PART.match(rest)
        if not match:
            raise ValueError("bad key %r" % text)
        parts.append(_key_part(match.group(1)))
        rest = rest[match.end():]
        if not rest:
            return parts
        if rest[0] != ".":
            raise ValueError("bad key %r" % text)
        rest = rest[1:]


def _key_part(part):
    if part[0] == '"':
        return json.loads(part)
    if part[0] == "'":
        return part[1:-1]
    return part


def _strip_comment(text):
    """``text`` up to its ``#`` comment (one outside quotes), stripped."""
    out = []
    quote = None
    escaped = False
    for char in text:
        if quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#":
            break
        out.append(char)
    return "".join(out).strip()


def _scalar(text):
    """One value: a string, a boolean, an array, an inline table or a number."""
    text = text.strip()
    if text.startswith('"'):
        return json.loads(text)
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    if text.startswith("["):
        return _array(text)
    if text.startswith("{"):
        return _inline_table(text)
    return _number(text)


def _array(text):
    inner = text[1:-1].strip().rstrip(",")
    if not inner:
        return []
    return [_scalar(item) for item in _ARRAY_ITEM.findall(inner)]


def _inline_table(text):
    table = {}
    for key, value in _INLINE_PAIR.findall(text[1:-1]):
        _set(table, _split_key(key), _scalar(value))
    return table


def _number(text):
    try:
        return int(text.replace("_", ""))
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise ValueError("bad value %r" % text)


def _set(table, keys, value):
    for key in keys[:-1]:
        table = table.setdefault(key, {})
        if not isinstance(table, dict):
            raise ValueError("key %s is both a value and a table" % ".".join(keys))
    table[keys[-1]] = value
