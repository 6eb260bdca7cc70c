# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA data-center driver branches: their type and end of life, the one table.

Discovery's preflight, the driver checks and the fleet report all read :data:`BRANCHES`
through :func:`judge`; a new branch or a new end of life is one row here.

"Today" is always an argument (a :class:`datetime.date` or ``YYYY-MM-DD``): the modules pass
the date of the host or controller they run on, the report the date it is generated, and the
tests a fixed one, so nothing here reads the clock.
"""

from __future__ import annotations

import datetime
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

__all__ = ["BRANCHES", "READ_ON", "SOURCES", "judge", "parse_today", "supported_branches"]

LONG_TERM = "long-term support branch"
PRODUCTION = "production branch"
NEW_FEATURE = "new-feature branch"

# When the table was last compared with its sources, and the sources.
READ_ON = "2026-12-03"
SOURCES = (
    # Table 2 "CUDA and Drivers": R580 LTSB June 2028, R595 production March 2027, R620 LTSB
    # September 2029; "New Feature Branches are short-lived and do not have an end-of-life date".
    "https://docs.nvidia.com/datacenter/tesla/drivers/620/supported-drivers-and-cuda-toolkit-versions.html",
    # The same table one release earlier: R535 LTSB June 2026 (CUDA 12 at most), R610 new-feature
    # August 2026.
    "https://docs.nvidia.com/datacenter/tesla/drivers/615/supported-drivers-and-cuda-toolkit-versions.html",
    # Branch types and the older pages' dates (R570 production February 2026, R580 August 2028),
    # and the branches whose end of life passed before these tables (R550, R560, R565, R575).
    "https://docs.nvidia.com/datacenter/tesla/drivers/index.html (Driver Lifecycle)",
    # R550 end of life June 2025: NVIDIA/gpu-driver-container#381 ("R550 has EOL'ed as of June
    # 2025", citing the table above), read 2026-12-03.
    "https://github.com/NVIDIA/gpu-driver-container/pull/381",
    # R615: its Linux data-center driver 615.71.09 in NVIDIA's September 2026 driver bulletin
    # (the Tesla rows of CVE-2026-47595), read 2026-12-03; new-feature branch per NVIDIA's
    # releases.json as quoted in NVIDIA/gpu-operator#2883 (not read here).
    "https://github.com/NVIDIA/product-security/tree/main/2026/5861",
)

# A branch whose end of life passed before the tables above, with no month recorded here.
PAST = "past"

# branch -> (type or None where not recorded, end of life (year, month) / PAST / None, note)
BRANCHES = {
    535: (LONG_TERM, (2026, 6), "CUDA 12 at most"),
    550: (None, (2025, 6), ""),
    560: (None, PAST, ""),
    565: (None, PAST, ""),
    570: (PRODUCTION, (2026, 2), ""),
    575: (None, PAST, ""),
    580: (LONG_TERM, (2028, 6), "CUDA 13; the last branch for Maxwell, Pascal and Volta; an older NVIDIA page gives August 2028"),
    590: (NEW_FEATURE, None, "short-lived"),
    595: (PRODUCTION, (2027, 3), ""),
    610: (NEW_FEATURE, (2026, 8), ""),
    615: (NEW_FEATURE, None, "short-lived; 615.71.09 released 2026-09-09"),
    620: (LONG_TERM, (2029, 9), ""),
}

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
_DATE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[T ].*)?$", re.ASCII)
TODAY_HINT = "expected a date as YYYY-MM-DD, e.g. 2026-12-01"


def parse_today(value):
    """``value`` as a :class:`datetime.date`: a date, a datetime, or text starting ``YYYY-MM-DD``."""
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    match = _DATE_RE.match(str(value).strip()) if isinstance(value, str) else None
    try:
        if match:
            return datetime.date(*(int(part) for part in match.groups()))
    except ValueError:
        pass
    raise GpuFleetError("today: '%s' is not a date (%s)" % (value, TODAY_HINT), value=value, expected=TODAY_HINT)


def _end_text(end):
    if end == PAST:
        return "passed"
    if end is None:
        return "none published"
    return "%s %d" % (MONTHS[end[1] - 1], end[0])


def _state(end, today):
    """``supported``, ``past``, ``no_end_date`` or ``not_compared`` (no date to compare with)."""
    if end == PAST:
        return "past"
    if end is None:
        return "no_end_date"
    if today is None:
        return "not_compared"
    return "past" if (today.year, today.month) > end else "supported"


def judge(branch, today):
    """What the table says of driver ``branch`` (an int) on ``today`` (a date, or None).

    Returns ``{branch, name, known, type, end_of_life, end_of_life_text, state, note, text}``;
    ``state`` is ``supported``, ``past``, ``no_end_date``, ``not_compared`` (``today`` None) or
    ``unknown`` (a branch the table does not have: nothing is guessed about it).
    """
    today = parse_today(today) if today is not None else None
    name = "R%d" % branch
    row = BRANCHES.get(branch)
    if row is None:
        return {
            "branch": branch, "name": name, "known": False, "type": None, "end_of_life": None,
            "end_of_life_text": None, "state": "unknown", "note": "",
            "text": "%s: not in the collection's driver lifecycle table (read %s): its support and end of life are unknown"
            % (name, READ_ON),
        }
    kind, end, note = row
    state = _state(end, today)
    return {
        "branch": branch,
        "name": name,
        "known": True,
        "type": kind,
        "end_of_life": "%04d-%02d" % end if isinstance(end, tuple) else end,
        "end_of_life_text": _end_text(end),
        "state": state,
        "note": note,
        "text": _text(name, kind, end, state, today, note),
    }


def _text(name, kind, end, state, today, note):
    """``R535: long-term support branch, end of life June 2026 (past on 2026-12-01); CUDA 12 at most``."""
    if end == PAST:
        when = "end of life passed"
    elif end is None:
        when = "no end of life published"
    else:
        when = "end of life %s" % _end_text(end)
    if state == "past" and today is not None and end != PAST:
        when += " (past on %s)" % today.isoformat()
    elif state == "supported":
        when += " (supported on %s)" % today.isoformat()
    return "%s: %s, %s%s" % (name, kind or "branch type not recorded", when, "; " + note if note else "")


def supported_branches(today, newest=None):
    """The branches supported on ``today`` (at most ``newest``), newest first, as ``R580 (... June 2028)``."""
    today = parse_today(today)
    found = []
    for branch in sorted(BRANCHES, reverse=True):
        kind, end = BRANCHES[branch][:2]
        if (newest is None or branch <= newest) and _state(end, today) == "supported":
            found.append("R%d (%s until %s)" % (branch, kind, _end_text(end)))
    return found
