# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The values a module writes into a file or passes to a command, checked before anything is read or written.

A value that reaches an apt source line, a deb822 stanza, an apt preferences file, a dnf
``.repo`` section or a command's argv must not be able to change what that file or command
says: a newline starts a new line (a second ``deb [trusted=yes] ...`` source, a
``Pin-Priority: 1001`` stanza, a ``[section]`` with ``gpgcheck=0``), a space starts a new
option or list item (``signed-by=/k.asc trusted=yes``), a leading ``-`` makes an argument an
option of apt-get or dnf, and a character that only looks like a digit (``"５８０"``, which
:meth:`str.isdigit`, :func:`int` and ``\\d`` accept) is not one to the tools that read the file.

Each validator takes a value and returns it (a file mode as a number), or raises
:class:`Invalid` saying what was expected. :func:`check` runs a table ``{option: validator}``
over a module's parameters and raises one :class:`GpuFleetError` naming the module, the option
and the value (``repr``'d, so that a newline shows as ``\\n``) at the first one that is not what
its option takes; :func:`checked` does the same for one value a module read from the host
before writing it. The validators are the collection's, shared by every layer that writes a
file or runs a command; they know nothing of a particular module.
"""

from __future__ import annotations

import functools
import posixpath
import re
import unicodedata
from urllib.parse import urlsplit

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

__all__ = [
    "Invalid",
    "absolute_path",
    "boolean",
    "chart_path",
    "chart_ref",
    "check",
    "checked",
    "debian_package",
    "debian_version",
    "expecting",
    "file_mode",
    "integer",
    "keyring",
    "name",
    "one_of",
    "optional",
    "release_name",
    "rpm_package",
    "rpm_version",
    "url",
    "version",
]

_DEBIAN_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+", re.ASCII)
_DEBIAN_VERSION = re.compile(r"(?:[0-9]+:)?[0-9][A-Za-z0-9.+~:-]*", re.ASCII)
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+~:_-]*", re.ASCII)
#: Helm's own rule for a release name (``pkg/chartutil`` / ``pkg/release``), at most 53 characters.
_RELEASE_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*", re.ASCII)
_OCTAL = re.compile(r"(?:0o)?[0-7]{1,4}", re.ASCII)

NO_SPACE = "no whitespace or control characters"


class Invalid(ValueError):
    """A value that is not what its option takes; ``expected`` says what it takes (``a URL (...)``)."""

    def __init__(self, expected):
        super().__init__(expected)
        self.expected = expected


# --- the characters -----------------------------------------------------------------------------


def unsafe(text):
    """Whether ``text`` has a whitespace, control, format or other non-printing character (any Unicode one)."""
    return any(ch.isspace() or unicodedata.category(ch)[0] == "C" for ch in text)


def printable_ascii(text):
    """Whether every character of ``text`` is printable ASCII other than the space (``!`` to ``~``)."""
    return all("!" <= ch <= "~" for ch in text)


def _text(value, expected):
    """``value`` when it is a string, else Invalid."""
    if not isinstance(value, str):
        raise Invalid(expected)
    return value


def _matching(pattern, expected, doc):
    """A validator of the strings that ``pattern`` matches whole; others are refused as not ``expected``."""

    def validate(value):
        if not pattern.fullmatch(_text(value, expected)):
            raise Invalid(expected)
        return value

    validate.__doc__ = doc
    return validate


def _plain(value, expected, forbid=""):
    """A non-empty string of printable ASCII without the characters of ``forbid``, else Invalid."""
    text = _text(value, expected)
    if not text or not printable_ascii(text) or any(ch in forbid for ch in text):
        raise Invalid(expected)
    return text


# --- the validators ------------------------------------------------------------------------------


def url(value, schemes=("http", "https", "file"), forbid=""):
    """An ``http``, ``https`` or ``file`` URL of printable ASCII: no whitespace, no control characters.

    ``forbid``: characters that the file it goes into reads as a separator (dnf splits a
    ``baseurl`` at commas).
    """
    expected = "a URL (%s; %s%s)" % (
        ", ".join(schemes), NO_SPACE, "".join(", no %r" % ch for ch in forbid),
    )
    text = _plain(value, expected, forbid)
    try:
        parts = urlsplit(text)
    except ValueError:
        raise Invalid(expected)
    if parts.scheme not in schemes:
        raise Invalid(expected)
    if parts.scheme == "file" and not parts.path.startswith("/"):
        raise Invalid(expected)
    if parts.scheme != "file" and not parts.hostname:
        raise Invalid(expected)
    return text


def absolute_path(value, forbid=""):
    """An absolute, normalized path (no ``..``, ``.``, ``//`` or trailing ``/``) of printable ASCII."""
    expected = "an absolute path (normalized; %s%s)" % (NO_SPACE, "".join(", no %r" % ch for ch in forbid))
    text = _plain(value, expected, forbid)
    if not text.startswith("/") or text.startswith("//") or posixpath.normpath(text) != text:
        raise Invalid(expected)
    return text


version = _matching(
    _VERSION, "a version (ASCII letters, digits and . + ~ : _ -, starting with a letter or digit)",
    "A version string of ASCII letters, digits and ``. + ~ : _ -``, starting with a letter or digit.")
debian_package = _matching(
    _DEBIAN_PACKAGE, "a Debian package name (lower-case ASCII letters, digits and + . -, starting with a letter or digit)",
    "A Debian package name (policy 5.6.1: ``[a-z0-9][a-z0-9+.-]+``).")
debian_version = _matching(
    _DEBIAN_VERSION, "a Debian package version (ASCII letters, digits and . + ~ : -, starting with a digit)",
    "A Debian package version (policy 5.6.12: ``[epoch:]upstream[-revision]``, starting with a digit).")


def name(value, what="a name"):
    """A name that a command reads as one argument and never as an option: no whitespace, control
    characters or leading ``-``."""
    expected = "%s (%s, not starting with '-')" % (what, NO_SPACE)
    text = _text(value, expected)
    if not text or unsafe(text) or text.startswith("-"):
        raise Invalid(expected)
    return text


def release_name(value):
    """A Helm release name as helm itself takes it: lower-case DNS labels joined by ``.``, at most 53
    characters (so never an option: ``--post-renderer=...`` in its place runs a program on the control host)."""
    expected = "a Helm release name (lower-case ASCII letters, digits, '-' and '.', starting and ending with a letter or digit; " \
               "at most 53 characters)"
    text = _text(value, expected)
    if len(text) > 53 or not _RELEASE_NAME.fullmatch(text):
        raise Invalid(expected)
    return text


def chart_ref(value):
    """A chart as helm takes it in the place of its chart argument: a name, ``repo/name``, a path or a
    URL, of printable ASCII, never starting with ``-`` (helm would read it as an option)."""
    expected = "a chart reference (a chart name, repo/name, a path or a URL; %s, not starting with '-')" % NO_SPACE
    text = _plain(value, expected)
    if text.startswith("-"):
        raise Invalid(expected)
    return text


def file_mode(value, forbid=0o022):
    """A file mode (a number, or its octal digits as a string) without the bits of ``forbid``.

    A file that a root process reads as its configuration or runs must not be writable by the
    group or the world (0o022): anyone who may write it would run what it says as root.
    """
    expected = "a file mode (octal, e.g. 0644) that %s" % _mode_words(forbid)
    if isinstance(value, bool):
        raise Invalid(expected)
    if isinstance(value, str):
        if not _OCTAL.fullmatch(value):
            raise Invalid(expected)
        value = int(value[2:] if value.startswith("0o") else value, 8)
    if not isinstance(value, int) or not 0 <= value <= 0o7777 or value & forbid:
        raise Invalid(expected)
    return value


def _mode_words(forbid):
    who = [w for bit, w in ((0o020, "the group"), (0o002, "the world")) if forbid & bit]
    return "is not writable by %s" % " or ".join(who) if who else "has none of the bits %04o" % forbid


def boolean(value):
    if not isinstance(value, bool):
        raise Invalid("a boolean (true or false)")
    return value


def integer(minimum=None):
    """A validator of whole numbers of at least ``minimum``."""
    expected = "a whole number%s" % ("" if minimum is None else " (%d or more)" % minimum)

    def validate(value):
        if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
            raise Invalid(expected)
        return value

    return validate


def one_of(*choices):
    """A validator of the values ``choices``."""
    expected = "one of %s" % ", ".join(str(c) for c in choices)

    def validate(value):
        if value not in choices:
            raise Invalid(expected)
        return value

    return validate


def optional(validator):
    """``validator``, with the empty string also taken (an option left empty takes its default)."""

    def validate(value):
        return value if value == "" else validator(value)

    return validate


def expecting(validator, expected):
    """``validator``, saying ``expected`` when it refuses a value (an option's own words)."""

    def validate(value):
        try:
            return validator(value)
        except Invalid:
            raise Invalid(expected)

    return validate


# The path of an apt keyring, as ``signed-by`` takes it: an absolute path without ``,``, ``[`` or
# ``]``. In a one-line source the options end at the first space and ``]``, and ``signed-by`` reads
# a comma as the start of a second keyring.
keyring = expecting(functools.partial(absolute_path, forbid=",[]"),
                    "a keyring path (absolute, normalized; %s, no ',', '[' or ']')" % NO_SPACE)
# A chart on the control host (a ``.tgz`` archive or a folder): an absolute, normalized path, or empty (not set).
chart_path = optional(expecting(absolute_path, "a chart path on the control host (an absolute, normalized path of a .tgz "
                                               "or a chart folder; %s), or empty" % NO_SPACE))
# An RPM package name as dnf takes it on its command line, and an RPM ``[epoch:]version-release`` after it.
rpm_package = functools.partial(name, what="an RPM package name")
rpm_version = functools.partial(name, what="an RPM version")


# --- refusals ------------------------------------------------------------------------------------


def checked(label, validator, value, after=""):
    """``validator(value)``, or a GpuFleetError ``<label> <repr(value)> is not <expected><after>``."""
    try:
        return validator(value)
    except Invalid as exc:
        raise GpuFleetError("%s %r is not %s%s" % (label, value, exc.expected, after), value=value,
                            expected=exc.expected)


def check(owner, rules, params):
    """Every option of ``rules`` (``{option: validator}``, in order) that ``params`` sets, checked.

    Options that are None (not set) are left to the module. The first refusal is raised, as
    ``<owner>: <option> <repr(value)> is not <expected>``.
    """
    for option, validator in rules.items():
        value = params.get(option)
        if value is None:
            continue
        try:
            validator(value)
        except Invalid as exc:
            raise GpuFleetError("%s: %s %r is not %s" % (owner, option, value, exc.expected), option=option,
                                value=value, expected=exc.expected)
    return params
