# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plain data from what Ansible hands a filter.

Inventory values reach the filters as ansible-core's tagged subclasses of str, dict and list,
which ``yaml.safe_dump`` refuses and ``json`` may not round-trip; the plans and the report are
built from plain copies.
"""

from __future__ import annotations

import copy


def plain(value, unknown=None):
    """``value`` rebuilt from builtin types only (dict keys as strings).

    A value of another type is returned as is, or passed through ``unknown`` (``str`` for the
    report, which must always serialise).
    """
    if isinstance(value, dict):
        return dict((str(k), plain(v, unknown)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v, unknown) for v in value]
    for kind in (bool, int, float, str):  # bool first: it is an int
        if isinstance(value, kind):
            return kind(value)
    if value is None or unknown is None:
        return value
    return unknown(value)


def dig(data, *keys):
    """``data[k1][k2]...``, or None where a level is missing or not a table."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def plural(count, word):
    """``1 GPU``, ``2 GPUs``."""
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


def deep_merge(base, extra):
    """A new dict: ``extra`` merged into ``base``, tables (dicts) by key, anything else replaced.

    Nothing of either argument is shared with the result: dicts are rebuilt as plain dicts,
    other values are copied. The runtime editors, the host validation and the cluster planner
    merge configuration trees and chart values with it.
    """
    merged = {}
    for key, value in base.items():
        merged[key] = deep_merge(value, {}) if isinstance(value, dict) else copy.deepcopy(value)
    for key, value in extra.items():
        if isinstance(value, dict):
            merged[key] = deep_merge(merged[key] if isinstance(merged.get(key), dict) else {}, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


# The facts the collection's modules return (gpu_facts, host_validate): Ansible keeps them under
# each host's ``ansible_facts``. Reading them there, not as top-level variables, is what
# ansible-core 2.21 asks (INJECT_FACTS_AS_VARS is deprecated) and works with injection off.
FACT_NAMES = ("gpufleet_nvidia", "gpufleet_nvidia_validation")


def host_fact(hostvars_of_host, name):
    """The fact ``name`` of one host's variables: from its ``ansible_facts``, else (a variable
    set by hand, or a fact injected as a top-level variable) the variable itself; None without."""
    facts = hostvars_of_host.get("ansible_facts") if hasattr(hostvars_of_host, "get") else None
    if hasattr(facts, "get"):
        value = facts.get(name)
        if value is not None:
            return value
    return hostvars_of_host.get(name) if hasattr(hostvars_of_host, "get") else None
