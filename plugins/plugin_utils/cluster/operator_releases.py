# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU Operator releases the collection knows: their release lines, NVIDIA's support of each,
the order upgrades must take, and the values that only some releases read.

Sources, read 2026-12-01: NVIDIA GPU Operator release notes and life-cycle policy ("only the
current major release line is supported"; "upgrade one release line at a time"), the charts'
values.yaml at the tags v25.10.0, v26.3.3 and v26.7.0 (the three releases the unit tests check
the role's values against, from the reference charts beside the checkout). Read 2026-12-03: the
releases below the toolkit bulletins' floor (common/security.py, OPERATOR_FLOORS) are planned
with a warning naming the bulletin.

Known but not verified here, so not in the table: v26.7.1 (October 2026) and v26.7.2 exist (built
by third-party distributions from NVIDIA's source on 2026-10-09 and 2026-10-21), but neither their
release notes nor their charts could be read; NVIDIA's git mirror beside the checkout stops at
v26.7.0. The 26.7 platform matrix's Kubernetes 1.37 is likewise not read here.

A new release is one entry of RELEASES (and of LINES for a new line).
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import security
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.versions import version_tuple

# Release lines in upgrade order: an installed release moves one line at a time.
LINES = ("25.10", "26.3", "26.7")

# line -> (released, NVIDIA's support of the line as of the date above)
LINE_SUPPORT = {
    "25.10": ("2025-10", "end of support (NVIDIA supports only the 26.x line)"),
    # NVIDIA's life-cycle policy: once a major version is out, the previous one is in maintenance
    # (critical bug and CVE fixes only); its page lists 26.3.x as Deprecated (read for the
    # collection's facts 2026-12-01; the stored copy read 2026-12-03 was older).
    "26.3": ("2026-03", "deprecated (maintenance only since 26.7: critical bug and CVE fixes)"),
    "26.7": ("2026-08", "supported"),
}

# Every release of the lines above; the newest of a line is where an upgrade through it stops.
RELEASES = (
    "v25.10.0", "v25.10.1",
    "v26.3.0", "v26.3.1", "v26.3.2", "v26.3.3",
    "v26.7.0",
)

DEFAULT = "v26.7.0"

# The custom resource the chart's component values become (templates/clusterpolicy.yaml): its
# spec schema names and types them (helm_release's check_values).
VALUES_CRD = "clusterpolicies.nvidia.com"

# Values that a release line first reads: set for an older release, the chart ignores them.
# value path -> first line that reads it
VALUE_SINCE = {
    "cdi.nriPluginEnabled": "26.3",
    "clusterPolicy": "26.7",
    "gpuCluster": "26.7",
    "draDriver": "26.7",
}

# The NRI plugin (cdi.nriPluginEnabled): the runtimes that have the NRI API it needs.
# containerd 1.7.30+ or 2.1+; CRI-O 1.34+ from operator 26.3.2 on.
NRI_CONTAINERD_MIN = ((1, 7, 30), (2, 1, 0))
NRI_CRIO_MIN = (1, 34, 0)
NRI_CRIO_SINCE = (26, 3, 2)

_VERSION = re.compile(r"^v?([0-9]+)\.([0-9]+)\.([0-9]+)$", re.ASCII)


def parse(version):
    """``(26, 3, 3)`` of ``v26.3.3`` or ``26.3.3``; None for anything else."""
    match = _VERSION.match(str(version or ""))
    return tuple(int(p) for p in match.groups()) if match else None


def line_of(version):
    """``26.3`` of ``v26.3.3``; None when it is not a version."""
    parts = parse(version)
    return "%d.%d" % parts[:2] if parts else None


def newest_of_line(line):
    """The newest release the table has of a line."""
    known = [r for r in RELEASES if line_of(r) == line]
    return max(known, key=parse) if known else None


def release(version):
    """``{version, line, released, support, supported, lines}`` of a known line; None otherwise."""
    line = line_of(version)
    if line not in LINE_SUPPORT:
        return None
    released, support = LINE_SUPPORT[line]
    return {
        "version": version,
        "line": line,
        "released": released,
        "support": support,
        "supported": support == "supported",
        "known_release": any(parse(r) == parse(version) for r in RELEASES),
    }


def release_problem(version, var):
    """Why ``version`` is not a release the collection can plan for, or None."""
    if release(version) is not None:
        return None
    return (
        "%s: %r is not a GPU Operator release this collection knows (release lines %s; "
        "expected e.g. %s, or %s)" % (var, version, ", ".join(LINES), DEFAULT, ", ".join(newest_of_line(line) for line in LINES))
    )


def chart_lines():
    """The release lines in upgrade order with the newest release of each, ``[{line, newest}]``:
    what the helm_release module needs to refuse an upgrade that skips a line."""
    return [{"line": line, "newest": newest_of_line(line)} for line in LINES]


def values_too_new(values, version):
    """The value paths of ``values`` that the release ``version`` does not read (VALUE_SINCE)."""
    parts = parse(version)
    if parts is None:
        return []
    found = []
    for path, since in sorted(VALUE_SINCE.items()):
        node = values
        for key in path.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None and parts[:2] < parse(since + ".0")[:2]:
            found.append((path, since))
    return found


def nri_runtime_problem(runtime, version_text, operator_version):
    """Why a node's runtime cannot run the NRI plugin, or None. ``runtime`` is the node's runtime
    family (containerd, crio, ...) and ``version_text`` the version discovery found (or None)."""
    if runtime not in ("containerd", "k3s", "rke2", "crio"):
        return "its runtime %s has no NRI (expected containerd or CRI-O)" % runtime
    found = version_tuple(version_text)
    if found is None:
        return "discovery found no %s version on it (the NRI plugin needs a known version)" % runtime
    if runtime == "crio":
        if parse(operator_version) < NRI_CRIO_SINCE:
            return "CRI-O needs GPU Operator v26.3.2 or later for the NRI plugin (planned %s)" % operator_version
        if found < NRI_CRIO_MIN:
            return "CRI-O %s has no NRI plugin support (expected 1.34 or later)" % version_text
        return None
    if found[:2] == (1, 7) and found >= NRI_CONTAINERD_MIN[0] or found >= NRI_CONTAINERD_MIN[1]:
        return None
    return "containerd %s has no NRI plugin support (expected 1.7.30 or later, or 2.1 or later)" % version_text


# --- The release of a GPU Operator plan ---------------------------------------------------------
def plan_release(s, toolkit_nodes, values):
    """Check the planned release against the table and return its summary entry.

    ``s`` are the role's settings (:class:`cluster.checks.Settings`, where the problems go);
    ``toolkit_nodes`` the nodes where the operator deploys the toolkit (the NRI plugin runs in its
    container); ``values`` the values as the plan builds them (overrides included). A chart
    from a path has its version in the chart: the table is not consulted and the helm_release
    module's check of the values against the chart stands alone.
    """
    if s.get("chart_path"):
        return {"version": None, "source": "chart path %s" % s.get("chart_path"), "warnings": []}
    version = s.get("chart_version")
    if parse(version) is None:
        return None  # not a version at all: the plan's chart check says so
    problem = release_problem(version, "gpu_operator_chart_version")
    if problem:
        s.problems.append(problem)
        return None
    entry = release(version)
    warnings = []
    if not entry["supported"]:
        warnings.append("gpu_operator_chart_version: %s is of the %s line: %s; upgrade to %s, one release line at a time"
                        % (version, entry["line"], entry["support"], DEFAULT))
    floor = security.operator_floor(version)
    if floor:
        warnings.append("gpu_operator_chart_version: %s" % floor["text"])
    if not entry["known_release"]:
        warnings.append("gpu_operator_chart_version: %s is not a release this collection was tested with (the %s line's newest "
                        "known is %s)" % (version, entry["line"], newest_of_line(entry["line"])))
    for path, since in values_too_new(values, version):
        s.problems.append("gpu_operator: %s is read from GPU Operator %s on; the planned %s does not know it (expected "
                          "gpu_operator_chart_version %s or later, or no %s)" % (path, since, version, newest_of_line(since), path))
    _check_nri(values, version, toolkit_nodes, s.problems)
    return dict(entry, warnings=warnings)


def _check_nri(values, version, toolkit_nodes, problems):
    """``cdi.nriPluginEnabled``: the release, CDI, and the runtime of every node it would run on."""
    cdi = values.get("cdi") if isinstance(values.get("cdi"), dict) else {}
    if cdi.get("nriPluginEnabled") is not True:
        return
    where = "gpu_operator_cdi_nri_plugin_enabled"
    if cdi.get("enabled") is False:
        problems.append("%s: the NRI plugin injects devices through CDI, and gpu_operator_cdi_enabled is false (expected true)" % where)
    if not toolkit_nodes:
        problems.append("%s: the NRI plugin runs in the operator's toolkit container, and every node has its toolkit from the "
                        "host (container_toolkit_enabled), so nothing would run it (expected false here; the host toolkit "
                        "configures the runtime itself)" % where)
    for node in toolkit_nodes:
        reason = nri_runtime_problem(node.get("runtime"), node.get("runtime_version"), version)
        if reason:
            problems.append("%s: host %r cannot use the NRI plugin: %s (expected false, or the node on a runtime with NRI)"
                            % (where, node["host"], reason))
