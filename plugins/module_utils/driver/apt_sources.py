# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The apt sources of a Debian or Ubuntu host, one-line (``sources.list``) and deb822
(``.sources``): the distribution's entries, the components they lack, and the edit that adds them,
changing only the component list of those entries and keeping the rest of each file.
"""

from __future__ import annotations

import posixpath
import re

SOURCES_LIST = "/etc/apt/sources.list"
SOURCES_DIR = "/etc/apt/sources.list.d"
_ONELINE = re.compile(
    r"^(?P<lead>\s*)(?P<type>deb|deb-src)(?P<sp1>\s+)(?P<opts>\[[^\]]*\]\s+)?(?P<uri>\S+)(?P<sp2>\s+)"
    r"(?P<suite>\S+)(?P<comps>[^#]*?)(?P<trail>\s*(?:#.*)?)$"
)


class Entry(object):
    """One distribution entry of the apt sources: a one-line ``deb`` line or a deb822 stanza."""

    def __init__(self, suites, components, index):
        self.suites = list(suites)
        self.components = list(components)
        self.index = index  # the line of a one-line entry, the stanza of a deb822 one

    def missing(self, required):
        return [c for c in required if c not in self.components]


def parse_oneline(text):
    """``[(line_index, match)]`` of the active deb / deb-src lines of a one-line sources file."""
    found = []
    for index, line in enumerate(text.split("\n")):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _ONELINE.match(line)
        if match:
            found.append((index, match))
    return found


def edit_oneline(text, suites, required):
    """``(new_text, entries)``: ``text`` with ``required`` components added to the distribution lines."""
    lines_ = text.split("\n")
    entries = []
    for index, match in parse_oneline(text):
        comps = match.group("comps").split()
        if match.group("type") != "deb" or match.group("suite") not in suites or "main" not in comps:
            continue
        entry = Entry([match.group("suite")], comps, index)
        entries.append(entry)
        missing = entry.missing(required)
        if missing:
            head = match.string[: match.start("comps")] + match.group("comps").rstrip()
            lines_[index] = head + " " + " ".join(missing) + match.group("trail")
    return "\n".join(lines_), entries


def _deb822_stanzas(text):
    """``[[(line_index, line)]]``: the stanzas of a deb822 file (comment lines kept in them)."""
    stanzas, current = [], []
    for index, line in enumerate(text.split("\n")):
        if line.strip() == "":
            if current:
                stanzas.append(current)
                current = []
            continue
        current.append((index, line))
    if current:
        stanzas.append(current)
    return stanzas


def _deb822_fields(stanza):
    """``{lower name: (name, [(line_index, line)], value)}`` of a stanza's fields."""
    fields = {}
    name = None
    for index, line in stanza:
        if line.lstrip().startswith("#"):
            continue
        if line[:1] in (" ", "\t") and name:
            fields[name.lower()][1].append((index, line))
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        name = key.strip()
        fields[name.lower()] = (name, [(index, line)])
    return dict((lower, (key, lines_, " ".join([lines_[0][1].partition(":")[2].strip()] + [l.strip() for i, l in lines_[1:]]).strip()))
                for lower, (key, lines_) in fields.items())


def _deb822_value(fields, name, default=""):
    return (fields.get(name) or (None, None, default))[2]


def _distribution_stanzas(text, suites):
    """``[(number, stanza, fields)]`` of the enabled binary stanzas of a deb822 file with main for ``suites``."""
    found = []
    for number, stanza in enumerate(_deb822_stanzas(text)):
        fields = _deb822_fields(stanza)
        if (
            "deb" in _deb822_value(fields, "types").split()
            and _deb822_value(fields, "enabled", "yes").strip().lower() not in ("no", "false", "0")
            and "main" in _deb822_value(fields, "components").split()
            and any(s in suites for s in _deb822_value(fields, "suites").split())
        ):
            found.append((number, stanza, fields))
    return found


def edit_deb822(text, suites, required):
    """``(new_text, entries)`` for a deb822 ``.sources`` file."""
    lines_ = text.split("\n")
    entries = []
    for number, dummy, fields in _distribution_stanzas(text, suites):
        entry = Entry(_deb822_value(fields, "suites").split(), _deb822_value(fields, "components").split(), number)
        entries.append(entry)
        missing = entry.missing(required)
        if missing:
            index, line = fields["components"][1][-1]
            lines_[index] = _add_components(line, missing)
    return "\n".join(lines_), entries


def _add_components(line, missing):
    """The last line of a Components field with ``missing`` added, before its comment."""
    comment = ""
    if "#" in line:
        line, dummy, rest = line.partition("#")
        comment = " #" + rest
    return line.rstrip() + " " + " ".join(missing) + comment


def query_deb822(text, suites):
    """The distribution stanzas of an edited deb822 file, binary only, for a temporary apt config."""
    return "\n\n".join("\n".join(_binary_only(stanza, fields)) for dummy, stanza, fields in _distribution_stanzas(text, suites))


def _binary_only(stanza, fields):
    """The lines of a stanza without its comments, its Types field reduced to ``deb``."""
    types = fields["types"][1]
    continued = [i for i, dummy in types[1:]]
    kept = []
    for index, line in stanza:
        if line.lstrip().startswith("#") or index in continued:
            continue
        kept.append("Types: deb" if index == types[0][0] else line)
    return kept


def source_files(host):
    """``[(path, format)]`` of the host's apt sources: sources.list, then the .list and .sources of sources.list.d."""
    paths = [(SOURCES_LIST, "oneline")] if host.exists(SOURCES_LIST) else []
    for name in host.names(SOURCES_DIR):
        if name.endswith(".list"):
            paths.append((posixpath.join(SOURCES_DIR, name), "oneline"))
        elif name.endswith(".sources"):
            paths.append((posixpath.join(SOURCES_DIR, name), "deb822"))
    return paths


class Sources(object):
    """The apt sources of the host: which files there are, and their edit for the components."""

    def __init__(self, system, suites, required):
        self.suites = suites
        self.required = required
        self.files = []  # [(path, format, text, new_text, entries)]
        for path, fmt in source_files(system):
            text = system.read(path)
            if text is None:
                continue
            edit = edit_oneline if fmt == "oneline" else edit_deb822
            new, entries = edit(text, suites, required)
            self.files.append((path, fmt, text, new, entries))

    @property
    def entries(self):
        return [e for f in self.files for e in f[4]]

    @property
    def changes(self):
        """``[(path, before, after, [(suites, missing)])]`` of the files that need the components."""
        out = []
        for path, dummy, text, new, entries in self.files:
            if new != text:
                out.append((path, text, new, [(e.suites, e.missing(self.required)) for e in entries if e.missing(self.required)]))
        return out

    def query_files(self):
        """``(one-line text, deb822 text)`` of the edited distribution entries, binary only."""
        oneline, deb822 = [], []
        for dummy, fmt, text, new, entries in self.files:
            if not entries:
                continue
            if fmt == "oneline":
                wanted = set(e.index for e in entries)
                oneline += [line for i, line in enumerate(new.split("\n")) if i in wanted]
            else:
                deb822.append(query_deb822(new, self.suites))
        return "\n".join(oneline) + ("\n" if oneline else ""), "\n\n".join(d for d in deb822 if d) + (
            "\n" if deb822 else ""
        )
