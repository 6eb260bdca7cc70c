"""Counts of what the properties saw (inputs tried, refusals), printed at the end of the run."""

from __future__ import annotations

import collections

COUNTS = collections.defaultdict(collections.Counter)


def tally(target, outcome):
    COUNTS[target][outcome] += 1
