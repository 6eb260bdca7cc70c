"""Hypothesis profiles of the property suite: ``ci`` (``make test``'s ``property`` stage: a fixed
seed and budget) and ``long`` (``make property-long``: twenty times the examples).

``HYPOTHESIS_PROFILE`` picks one (default ``ci``). No example database: a run never depends on an
earlier one; Hypothesis' caches go to .cache/hypothesis.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

# Hypothesis' own caches (no examples: database=None) go under .cache/, not into the tree.
set_hypothesis_home_dir(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))), ".cache", "hypothesis"))

CI_EXAMPLES = 60
_COMMON = dict(
    database=None,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.register_profile("ci", max_examples=CI_EXAMPLES, **_COMMON)
settings.register_profile("long", max_examples=20 * CI_EXAMPLES, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_terminal_summary(terminalreporter):
    from ansible_collections.gpufleet.nvidia.tests.property.tally import COUNTS

    if not COUNTS:
        return
    terminalreporter.section("property inputs (profile %s)" % settings().max_examples)
    for target in sorted(COUNTS):
        counts = COUNTS[target]
        terminalreporter.write_line(
            "%-22s %6d inputs  %s" % (target, sum(counts.values()), ", ".join("%s %d" % kv for kv in sorted(counts.items())))
        )
