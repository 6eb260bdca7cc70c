# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each node's verdict: its host checks and its node's cluster checks together, and whether
``validate_fail_on`` fails it (the validate role's assert on one node, and its ``fleet`` entry
point once for every node)."""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import worst

FAIL_ON = ("never", "failed", "drift")
#: What fails a node, by validate_fail_on.
FAILING = {"never": (), "failed": ("failed",), "drift": ("failed", "drift")}
#: A node without a validation of this run (site.yml leaves none in the fleet play): said, not a crash.
NOT_VALIDATED = {"status": "skipped", "failed": [], "drifted": [], "not_checked": ["not validated in this run"]}


def verdict(host, validation, cnode, fail_on):
    """``{status, lines, msg, fails}`` of one node: its host ``validation`` and its cluster verdict ``cnode``."""
    validation = validation or NOT_VALIDATED
    cnode = cnode or {}
    status = worst([validation.get("status"), cnode.get("status")])
    failed = list(validation.get("failed") or []) + list(cnode.get("failed") or [])
    drifted = list(validation.get("drifted") or []) + list(cnode.get("drifted") or [])
    not_checked = list(validation.get("not_checked") or []) + list(cnode.get("not_checked") or [])
    if fail_on not in FAIL_ON:
        raise ValueError("validate_fail_on: %r is not one of %s" % (fail_on, ", ".join(FAIL_ON)))
    return {
        "status": status,
        "lines": ["%s: %s" % (host, status)] + failed + drifted + not_checked,
        "msg": "%s: validation %s: %s" % (host, status, "; ".join(failed + drifted)),
        "fails": status in FAILING[fail_on],
    }


def verdicts(data, cnodes, fail_on):
    """``{host: verdict}`` in the order of ``data`` (``{host: {gpufleet_nvidia_validation, validate_fail_on}}``).

    ``cnodes`` holds each host's node verdict of the cluster checks; ``fail_on`` is the
    validate_fail_on of a host that sets none in ``data``.
    """
    return dict(
        (host, verdict(host, entry.get("gpufleet_nvidia_validation"), cnodes.get(host), entry.get("validate_fail_on") or fail_on))
        for host, entry in data.items()
    )
