# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible's variables as plain data, read on the control host by the filters and the report.

:func:`host_data` reads only the named variables of each host from ``hostvars``, as plain data
(``common/data.py``'s :func:`plain`, anything not builtin as its text, so that it always serialises).
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import data as common_data

__all__ = ["SHARED", "host_data"]

#: The validate role's cluster verdict: one object, set on every host of the play by a run_once
#: task, holding one node verdict per host.
SHARED = "validate_cluster_verdict"


def _stored(hostvars, host, key):
    """The mapping stored as ``key`` for ``host``, untemplated; None when it is not one or cannot be read."""
    try:
        raw_get = getattr(hostvars, "raw_get", None)  # Ansible's HostVars: the variables as stored
        stored = (raw_get(host) if raw_get is not None else hostvars[host])[key]
    except Exception:  # pylint: disable=broad-except
        return None
    return stored if isinstance(stored, Mapping) else None


def host_data(hosts, hostvars, keys):
    """``{host: {var: value}}`` with only ``keys``, as plain data, from ``hostvars``.

    The cluster verdict (:data:`SHARED`) is read once per verdict, not once per host: every host of
    a play carries the same verdict (one object, whose node verdicts cover the whole play), and
    reading it on every host would copy the fleet once per host, a cost that grows with the square
    of the fleet (7 s of CPU at 256 nodes, 136 s at 1,024, 574 s at 2,048; now 0.2, 0.7 and 1.4 s). A
    host whose verdict is one already read is left without it here; the report merges the node
    verdicts of the verdicts read. Verdicts that differ (the batches of a play with ``serial``) are
    each read. An undefined or broken variable is left out.
    """
    data = {}
    read = {}  # id -> the stored verdicts already read (kept, so that their ids stay theirs)
    for host in hosts or []:
        host = str(host)
        try:
            hv = hostvars[host]
        except KeyError:
            data[host] = {}
            continue
        entry = {}
        for key in keys:
            try:
                if key in common_data.FACT_NAMES:
                    fact = common_data.host_fact(hv, key)
                    if fact is not None:
                        entry[key] = common_data.plain(fact, unknown=str)
                elif key in hv:
                    stored = _stored(hostvars, host, key) if key == SHARED else None
                    if stored is not None and read.get(id(stored)) is stored:
                        continue
                    entry[key] = common_data.plain(hv[key], unknown=str)
                    if stored is not None:
                        read[id(stored)] = stored
            except Exception:  # pylint: disable=broad-except
                continue
        data[host] = entry
    return data
