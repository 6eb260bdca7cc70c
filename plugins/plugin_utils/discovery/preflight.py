# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight judged on the control host, on facts already gathered.

Preflight is a pure function of the node's facts and the desired state: gpufleet.nvidia.preflight
given ``facts``, and gpufleet.nvidia.gpu_facts given ``preflight``, judge them here, with the
module's rules, message and failure, and cost the node no round trip.
"""

from __future__ import annotations

import datetime

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import preflight

#: What a blocked preflight returns besides ``failed`` and ``msg``.
FAILED_KEYS = ("ok", "blocking_count")


def judged(params):
    """Preflight's result for ``params`` (its options, ``facts`` given), judged here; never raises."""
    try:
        # the control host's date: what the driver branches' end of life is compared with
        result = preflight.run(params["facts"], params, datetime.datetime.now(datetime.timezone.utc).date())
    except GpuFleetError as exc:
        # Ansible prints a failed result whole: the message, which names each blocking problem
        # with its fix and the waiver, and the counts; not every check's outcome around it.
        failed = dict((key, exc.details[key]) for key in FAILED_KEYS if key in exc.details)
        failed.update(failed=True, msg=exc.msg)
        return failed
    lines = preflight.warning_lines(result)
    if lines:
        result["warnings"] = list(result.get("warnings") or []) + lines
    result["changed"] = False
    return result
