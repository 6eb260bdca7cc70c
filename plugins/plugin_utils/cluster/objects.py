# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which of the objects a plan applies beside a chart differ from what the cluster holds.

kubernetes.core.k8s with ``state: present`` sends a PATCH for every object it is given, also
when the object already matches: a write request in the API server's audit log each run (a
namespace and every CRD of the chart). Only the objects that differ are handed to it: one
differs when it is missing, or when any field it sets has another value in the live object.
Fields the server adds (defaults, ``metadata.uid``, ``status``) are not differences; a list
must match element by element, as a merge patch replaces lists whole.
"""

from __future__ import annotations

__all__ = ["contained", "objects_to_write"]


def contained(desired, live):
    """Whether every field ``desired`` sets has the same value in ``live`` (``status`` aside)."""
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return False
        return all(key in live and contained(value, live[key]) for key, value in desired.items())
    if isinstance(desired, list):
        return isinstance(live, list) and len(desired) == len(live) and all(contained(d, l) for d, l in zip(desired, live))
    if isinstance(desired, bool) or isinstance(live, bool):
        return desired is live
    return desired == live


def _key(obj):
    meta = obj.get("metadata") or {}
    return (obj.get("apiVersion"), obj.get("kind"), meta.get("namespace") or "", meta.get("name"))


def objects_to_write(desired, live):
    """The objects of ``desired`` that are missing from ``live`` or differ from it.

    ``live`` is every object the cluster returned for them (kubernetes.core.k8s_info's
    ``resources``, flattened); objects are matched by apiVersion, kind, namespace and name."""
    found = dict((_key(obj), obj) for obj in live or [] if isinstance(obj, dict))
    changed = []
    for obj in desired or []:
        current = found.get(_key(obj))
        wanted = dict((k, v) for k, v in obj.items() if k != "status")
        # One being deleted (a namespace that is terminating) is not there: writing it says so.
        if current is None or (current.get("metadata") or {}).get("deletionTimestamp") or not contained(wanted, current):
            changed.append(obj)
    return changed
