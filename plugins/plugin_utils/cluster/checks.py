# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checks every cluster plan makes of what it is given, and where their problems go.

A role's settings are its variables without the role's prefix (``chart_version`` for
``gpu_operator_chart_version``). :class:`Settings` holds them with the prefix and the problems
found so far: each step of a plan reads its settings there and records its problems there.
Problems are collected, not raised, so that a role can stop before anything is applied and show
all of them at once; each names the variable, the bad value and what would be accepted.
"""

from __future__ import annotations

import re

from ansible.module_utils.parsing.convert_bool import boolean as _ansible_boolean

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import plain


DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
CHART_VERSION = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+$")
_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$")


def quoted(value):
    """A value as it appears in a message: strings quoted, the rest as YAML would show them."""
    if isinstance(value, str):
        return repr(value)  # a newline or an escape shows as \n, \x1b
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def one_of(choices):
    return "one of: " + ", ".join(c if c else "''" for c in choices)


def to_bool(value, var, problems):
    """``value`` as a bool, the way Ansible reads yes/no/true/1; a problem when it is not one."""
    if isinstance(value, bool):
        return value
    try:
        return _ansible_boolean(value, strict=True)
    except TypeError:
        problems.append("%s: %s is not a boolean (expected true or false)" % (var, quoted(value)))
        return False


def check_name(value, var, pattern, what, problems):
    """Whether ``value`` is a name ``pattern`` takes (at most 253 characters); a problem when not."""
    if not isinstance(value, str) or not value or not pattern.fullmatch(value) or len(value) > 253:
        problems.append("%s: %s is not %s" % (var, quoted(value), what))
        return False
    return True


def check_input(value, var, validator, problems):
    """``validator`` of common/inputs on ``value``; its refusal as a problem of ``var``."""
    try:
        validator(value)
    except inputs.Invalid as exc:
        problems.append("%s: %s is not %s" % (var, quoted(value), exc.expected))


def check_namespace(value, var, problems):
    if not isinstance(value, str) or len(value) > 63 or not DNS_LABEL.fullmatch(value):
        problems.append(
            "%s: %s is not a namespace name (expected a DNS label: lower-case alphanumerics and "
            "'-', at most 63 characters)" % (var, quoted(value))
        )


def check_duration(value, var, problems):
    if not isinstance(value, str) or not _DURATION.fullmatch(value):
        problems.append("%s: %s is not a duration (expected e.g. 10m or 900s)" % (var, quoted(value)))


def check_label_value(value, var, problems):
    if value and (not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.fullmatch(value)):
        problems.append(
            "%s %s is not a label value (expected at most 63 alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric)" % (var, quoted(value))
        )


class Settings:
    """A role's settings (``values``, its variables without ``prefix``) and the problems found so far."""

    def __init__(self, values, prefix, problems=None):
        self.values = plain(values or {})
        self.prefix = prefix
        self.problems = [] if problems is None else problems

    def get(self, key, default=None):
        return self.values.get(key, default)

    def flag(self, key, default):
        """The setting ``key`` as a bool (``default`` when it is not set); a problem when it is not one."""
        return to_bool(self.values.get(key, default), "%s_%s" % (self.prefix, key), self.problems)

    def under(self, prefix, **values):
        """The same settings (``values`` put over them) named with another prefix; their problems go to the same list."""
        return Settings(dict(self.values, **values) if values else self.values, prefix, self.problems)
