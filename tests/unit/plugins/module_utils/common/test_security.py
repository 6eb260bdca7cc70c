"""Tests of module_utils/common/security.py: the security floors on a given date, each finding naming
its bulletin and the version that fixes it."""

from __future__ import annotations

import datetime
import inspect

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import lifecycle, security as S, versions

TODAY = datetime.date(2026, 12, 3)


# The data-center Linux rows of NVIDIA's driver bulletins 5821 (May 2026) and 5861 (September 2026).
@pytest.mark.parametrize("driver, fixed, bulletins", [
    ("580.126.20", "580.178.04", ["nvidia-5821", "nvidia-5861"]),  # the 26.3.x operators', CNS 26.6.0's and DeepOps 26.07's default
    ("580.159.04", "580.178.04", ["nvidia-5861"]),
    ("580.173.02", "580.178.04", ["nvidia-5861"]),  # GPU Operator 26.7.0 ships it
    ("595.58.03", "595.91.07", ["nvidia-5821", "nvidia-5861"]),
    ("535.288.01", "535.309.01", ["nvidia-5821"]),
    ("610.43.01", "610.57.04", ["nvidia-5861"]),
    ("615.50.01", "615.71.09", ["nvidia-5861"]),
])
def test_a_driver_below_its_branch_floor_names_every_bulletin_and_the_fix(driver, fixed, bulletins):
    judged = S.judge(driver=driver, today=TODAY)
    (finding,) = judged["findings"]
    assert (judged["state"], finding["kind"], finding["fixed"], finding["bulletins"]) == ("below", "driver", fixed, bulletins)
    for bulletin in bulletins:
        assert S.BULLETINS[bulletin][0] in finding["text"]
    assert finding["text"].endswith("install %s or later of the branch" % fixed)


@pytest.mark.parametrize("driver", ["580.178.04", "580.182.01", "595.91.07", "620.10.02", "570.172.08", "580", "535.309.01"])
def test_a_driver_at_its_floor_a_branch_alone_or_a_branch_without_a_row_is_no_finding(driver):
    # 570: no bulletin row (past its end of life, driver_lifecycle's business); "580" installs the newest
    assert S.judge(driver=driver, today=TODAY)["findings"] == []


def test_a_bulletin_counts_from_its_day():
    assert S.judge(driver="580.159.04", today="2026-09-29")["state"] == "ok"
    assert S.judge(driver="580.159.04", today="2026-09-30")["bulletins"] == ["nvidia-5861"]
    assert S.judge(driver="580.126.20", today="2026-06-01")["findings"][0]["fixed"] == "580.159.03"
    # without a date every bulletin counts
    assert S.judge(driver="580.159.04")["bulletins"] == ["nvidia-5861"]


@pytest.mark.parametrize("toolkit, fixed, bulletins, mitigation", [
    ("1.17.7-1", "1.19.1", ["nvidia-5659", "nvidia-5850"], "disable-cuda-compat-lib-hook"),
    ("1.18.2-1", "1.19.1", ["nvidia-5850"], None),  # no 1.18.x fix
    ("1.19.0", "1.19.1", ["nvidia-5850"], None),
])
def test_a_toolkit_below_its_floor(toolkit, fixed, bulletins, mitigation):
    (finding,) = S.judge(toolkit=toolkit, today=TODAY)["findings"]
    assert (finding["fixed"], finding["bulletins"], finding["mitigation"]) == (fixed, bulletins, mitigation)
    assert "install %s or later" % fixed in finding["text"]
    assert "CVE-2026-24260" in finding["text"]
    assert ("disable-cuda-compat-lib-hook is the interim mitigation of bulletin 5659" in finding["text"]) == bool(mitigation)


def test_a_toolkit_before_the_june_2026_bulletin_has_only_the_july_2025_floor():
    (finding,) = S.judge(toolkit="1.17.7", today="2026-01-01")["findings"]
    assert (finding["fixed"], finding["bulletins"]) == ("1.17.8", ["nvidia-5659"])
    assert S.judge(toolkit="1.19.1-1", today=TODAY)["state"] == "ok"


@pytest.mark.parametrize("containerd, today, line_end, move_to", [
    ("1.6.20~ds1", TODAY, "2025-08-23", "2.0"),  # Debian 12's
    ("1.7.24~ds1", TODAY, "2026-09", "2.0"),
    ("v2.1.3", TODAY, "2026-07-03", "2.0"),
    ("2.2.1", TODAY, "2026-11-06", "2.0"),
    ("2.0.5", "2027-04-01", "2027-03", "2.3"),
])
def test_a_containerd_line_past_its_end_of_life(containerd, today, line_end, move_to):
    (finding,) = [f for f in S.judge(containerd=containerd, today=today)["findings"] if f["kind"] == "runtime"]
    assert finding["bulletins"] == ["containerd-eol"] and finding["fixed"] == move_to
    assert "end of life was %s (containerd's support horizon (RELEASES.md, containerd#13739))" % line_end in finding["text"]
    assert finding["text"].endswith("move to %s or later" % move_to)


@pytest.mark.parametrize("containerd, today", [
    ("1.7.30", "2026-09-30"), ("2.2.1", "2026-11-06"), ("2.3.4", TODAY), ("2.4.0", TODAY), ("1.7.30", None)])
def test_a_supported_line_a_line_not_in_the_table_or_no_date_is_no_end_of_life_finding(containerd, today):
    assert S.judge(containerd=containerd, today=today)["findings"] == []


@pytest.mark.parametrize("containerd, kubernetes, found", [
    ("1.7.30", "v1.36.2", True), ("1.7.30", "1.37.0", True), ("1.7.30", "1.35.4", False),
    ("2.0.0", "1.36.0", False), ("2.3.4", "1.37.1", False), ("1.7.30", None, False)])
def test_containerd_1_is_refused_from_kubernetes_1_36(containerd, kubernetes, found):
    pairing = [f for f in S.judge(containerd=containerd, kubernetes=kubernetes, today="2026-09-01")["findings"]
               if f["kind"] == "pairing"]
    assert bool(pairing) == found
    if found:
        assert pairing[0]["text"] == (
            "containerd %s cannot serve Kubernetes %s: Kubernetes v1.35's deprecation of containerd 1.x (removed from "
            "v1.36); Kubernetes 1.36 and later need containerd 2.0 or later" % (containerd, kubernetes))


def test_the_states_and_the_label_value():
    assert S.judge(today=TODAY) == {"state": "not_judged", "findings": [], "bulletins": [], "text": "no version to judge"}
    ok = S.judge(driver="580.178.04", toolkit="1.20.0-1", containerd="2.3.4", today=TODAY)
    assert (ok["state"], ok["text"]) == ("ok", "at or above every security floor (table read 2026-12-03)")
    worst = S.judge(driver="580.126.20", toolkit="1.17.7-1", containerd="1.7.24~ds1", kubernetes="1.36.2", today=TODAY)
    assert worst["bulletins"] == ["nvidia-5821", "nvidia-5861", "nvidia-5659", "nvidia-5850", "containerd-eol", "k8s-containerd"]
    assert S.label_value(worst) == "5821.5861.5659.5850.containerd-eol.k8s-containerd"
    assert len(S.label_value(worst)) <= 63
    assert (S.label_value(ok), S.label_value(S.judge(today=TODAY))) == ("ok", "none")


def test_the_table_is_well_formed_and_cites_its_sources():
    assert lifecycle.parse_today(S.READ_ON)
    for bulletin, (title, published, url) in S.BULLETINS.items():
        assert lifecycle.parse_today(published) and url.startswith("https://") and title, bulletin
    for branch, fixed, bulletin in S.DRIVER_FLOORS:
        assert versions.parse_driver_version(fixed).branch == branch and bulletin in S.BULLETINS
    for fixed, bulletin, dummy in S.TOOLKIT_FLOORS:
        assert versions.version_tuple(fixed) and bulletin in S.BULLETINS
    assert all(len(end) in (2, 3) for end in S.CONTAINERD_LINES.values())
    assert S.KUBERNETES_CONTAINERD[2] in S.BULLETINS


def test_nothing_reads_the_clock():
    source = inspect.getsource(S)
    assert "now(" not in source and "today()" not in source and "time.time" not in source


@pytest.mark.parametrize("version, fixed, bulletins", [
    ("v25.3.1", "26.3.2", ["nvidia-5659", "nvidia-5850"]), ("v25.10.1", "26.3.2", ["nvidia-5850"]),
    ("26.3.1", "26.3.2", ["nvidia-5850"]), ("v26.3.2", None, None), ("v26.7.0", None, None)])
def test_the_gpu_operator_releases_below_the_toolkit_bulletins_floor(version, fixed, bulletins):
    finding = S.operator_floor(version, TODAY)
    assert (finding["fixed"], finding["bulletins"]) == (fixed, bulletins) if fixed else finding is None
    assert S.operator_floor("v25.10.1", "2026-06-29") is None  # before bulletin 5850
