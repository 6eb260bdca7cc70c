"""The GPU Operator release table, the plan's release checks (support, values a release does not
read, the NRI plugin) and the helm_release module's rule of one release line at a time."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.cluster import helm as H
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import operator_releases as R
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import fleets as F


def test_the_default_is_the_newest_supported_release_and_the_lines_are_in_order():
    assert R.DEFAULT == "v26.7.0" == R.newest_of_line(R.LINES[-1])
    assert R.release(R.DEFAULT)["supported"] is True
    assert R.release("v25.10.0")["supported"] is False and "end of support" in R.release("v25.10.0")["support"]
    assert [R.parse(R.newest_of_line(line))[:2] for line in R.LINES] == sorted(R.parse(R.newest_of_line(line))[:2] for line in R.LINES)
    assert R.release("v24.9.2") is None and R.release("latest") is None
    assert R.line_of("26.3.3") == "26.3" and R.parse("v26.3.3") == (26, 3, 3)


def _plan(fleet="all-prepared", **extra):
    return F.plan(F.load(fleet), "gpu_operator", dict(("gpu_operator_" + k, v) for k, v in extra.items()))


def test_an_end_of_support_release_is_planned_with_a_warning():
    planned = _plan(chart_version="v25.10.0")
    assert planned["problems"] == []
    assert planned["warnings"] == [
        "gpu_operator_chart_version: v25.10.0 is of the 25.10 line: end of support (NVIDIA supports only the 26.x line); "
        "upgrade to v26.7.0, one release line at a time",
        "gpu_operator_chart_version: GPU Operator v25.10.0 is below its security floor 26.3.2: NVIDIA security bulletin 5850 "
        "(Container Toolkit, June 2026: CVE-2026-24260); plan 26.3.2 or later"]
    assert planned["summary"]["release"]["line"] == "25.10"


def test_a_release_of_an_unknown_line_is_refused_by_the_plan():
    planned = _plan(chart_version="v24.9.2")
    assert planned["problems"] == [
        "gpu_operator_chart_version: 'v24.9.2' is not a GPU Operator release this collection knows (release lines 25.10, 26.3, "
        "26.7; expected e.g. v26.7.0, or v25.10.1, v26.3.3, v26.7.0)"]


def test_a_value_a_release_does_not_read_is_refused_by_name():
    planned = _plan(chart_version="v26.3.3", values_overrides={"gpuCluster": {"deployCR": True}})
    assert planned["problems"] == [
        "gpu_operator: gpuCluster is read from GPU Operator 26.7 on; the planned v26.3.3 does not know it (expected "
        "gpu_operator_chart_version v26.7.0 or later, or no gpuCluster)"]


def _facts(runtime, version):
    return {"container": {runtime: {"version": version}}}


def _nri_fleet(runtime, version):
    fleet = F.load("none-prepared")
    for host in fleet["hosts"]:
        fleet["hosts"][host] = dict(fleet["hosts"][host], container_toolkit_runtime=runtime,
                                    ansible_facts={"gpufleet_nvidia": _facts(runtime, version)})
    return fleet


@pytest.mark.parametrize("runtime, version, release, problem", [
    ("containerd", "2.1.1", "v26.7.0", None),
    ("containerd", "1.7.30", "v26.3.0", None),
    ("containerd", "2.1.4~ds1", "v26.7.0", None),  # Debian's containerd says its version so
    ("containerd", "1.7.24", "v26.7.0", "containerd 1.7.24 has no NRI plugin support (expected 1.7.30 or later, or 2.1 or later)"),
    ("containerd", "2.0.5", "v26.7.0", "containerd 2.0.5 has no NRI plugin support (expected 1.7.30 or later, or 2.1 or later)"),
    ("crio", "1.34.1", "v26.3.2", None),
    ("crio", "1.34.1", "v26.3.1", "CRI-O needs GPU Operator v26.3.2 or later for the NRI plugin (planned v26.3.1)"),
    ("crio", "1.33.4", "v26.7.0", "CRI-O 1.33.4 has no NRI plugin support (expected 1.34 or later)"),
    ("containerd", None, "v26.7.0", "discovery found no containerd version on it (the NRI plugin needs a known version)"),
])
def test_the_nri_plugin_needs_a_runtime_with_nri_on_every_node_the_operator_runs_the_toolkit(runtime, version, release, problem):
    fleet = _nri_fleet(runtime, version)
    planned = F.plan(fleet, "gpu_operator", {"gpu_operator_chart_version": release, "gpu_operator_cdi_nri_plugin_enabled": True})
    if problem is None:
        assert planned["problems"] == []
        assert planned["chart_values"]["cdi"] == {"enabled": True, "nriPluginEnabled": True}
    else:
        assert planned["problems"] and all(problem in p for p in planned["problems"]), planned["problems"]
        assert len(planned["problems"]) == len(fleet["hosts"])


def test_the_nri_plugin_is_refused_before_26_3_without_cdi_and_where_every_host_has_its_toolkit():
    planned = F.plan(_nri_fleet("containerd", "2.1.1"), "gpu_operator", {
        "gpu_operator_chart_version": "v25.10.0", "gpu_operator_cdi_nri_plugin_enabled": True, "gpu_operator_cdi_enabled": False})
    assert planned["problems"][0].startswith("gpu_operator: cdi.nriPluginEnabled is read from GPU Operator 26.3 on")
    assert any("gpu_operator_cdi_enabled is false" in p for p in planned["problems"])
    planned = F.plan(F.load("all-prepared"), "gpu_operator", {"gpu_operator_cdi_nri_plugin_enabled": True})
    assert any("every node has its toolkit from the host" in p for p in planned["problems"])
    assert "nriPluginEnabled" not in F.plan(F.load("all-prepared"), "gpu_operator")["chart_values"]["cdi"]


LINES = R.chart_lines()


def _installed(version):
    return {"chart_version": version, "status": "deployed"}


@pytest.mark.parametrize("installed, planned", [
    (None, "v26.7.0"),  # a new install
    ("v26.7.0", "v26.7.0"),
    ("v26.3.0", "v26.3.3"),  # a patch release of the same line
    ("v25.10.0", "v26.3.3"),  # the next line
    ("26.3.3", "v26.7.0"),
])
def test_one_release_line_at_a_time_passes(installed, planned):
    H.check_release_line(LINES, _installed(installed) if installed else None, planned, "gpu-operator")


def test_a_skipped_line_is_refused_with_the_path():
    with pytest.raises(GpuFleetError) as exc:
        H.check_release_line(LINES, _installed("v25.10.1"), "v26.7.0", "gpu-operator")
    assert exc.value.msg == (
        "helm: release gpu-operator has chart v25.10.1 (release line 25.10), the plan v26.7.0 (line 26.7): upgrades go one "
        "release line at a time (25.10 -> 26.3 -> 26.7); nothing was changed (expected the chart version v26.3.3 first: run "
        "with it, then v26.7.0)")
    assert exc.value.details["path"] == ["v26.3.3", "v26.7.0"]


def test_an_older_line_and_an_unknown_line_are_refused():
    with pytest.raises(GpuFleetError, match="goes back to an older release line.*expected v26.7.0 or later"):
        H.check_release_line(LINES, _installed("v26.7.0"), "v26.3.3", "gpu-operator")
    with pytest.raises(GpuFleetError, match="24.9 is not one of the release lines 25.10, 26.3, 26.7"):
        H.check_release_line(LINES, _installed("v24.9.2"), "v26.7.0", "gpu-operator")
    H.check_release_line([], _installed("v24.9.2"), "v26.7.0", "gpu-operator")  # no rule: the device plugin


@pytest.mark.parametrize("version, floor", [("v26.3.1", True), ("v26.3.3", False)])
def test_the_26_3_line_is_deprecated_and_below_26_3_2_under_the_toolkit_bulletins_floor(version, floor):
    warnings = _plan(chart_version=version)["warnings"]
    assert warnings[0] == ("gpu_operator_chart_version: %s is of the 26.3 line: deprecated (maintenance only since 26.7: "
                           "critical bug and CVE fixes); upgrade to v26.7.0, one release line at a time" % version)
    assert any("NVIDIA security bulletin 5850" in w and "plan 26.3.2 or later" in w for w in warnings) == floor
    assert _plan(chart_version="v26.7.0")["warnings"] == []
