"""Tests of module_utils/common/versions.py."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions as v
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


@pytest.mark.parametrize(
    "text, parts, is_branch",
    [
        ("580", (580,), True),
        ("580.95", (580, 95), False),
        ("580.95.05", (580, 95, 5), False),
        ("570.26", (570, 26), False),
        (" 450.80.02 ", (450, 80, 2), False),
        (580, (580,), True),
    ],
)
def test_parse_driver_version(text, parts, is_branch):
    parsed = v.parse_driver_version(text)
    assert parsed.parts == parts
    assert parsed.is_branch is is_branch
    assert parsed.branch == parts[0]


@pytest.mark.parametrize("text", ["5x5", "", "580.", "580.95.05.1", "r580", "5", "580-1", "latest", None])
def test_parse_driver_version_rejects(text):
    with pytest.raises(GpuFleetError) as exc:
        v.parse_driver_version(text)
    assert exc.value.msg == "version '%s' is not a driver version (expected e.g. 580 or 580.95.05)" % text
    assert exc.value.details["expected"] == "expected e.g. 580 or 580.95.05"


def test_the_style_guide_example_message():
    with pytest.raises(GpuFleetError) as exc:
        v.parse_driver_version("5x5")
    assert exc.value.msg == "version '5x5' is not a driver version (expected e.g. 580 or 580.95.05)"


def test_try_parse_driver_version():
    assert v.try_parse_driver_version("nonsense") is None
    assert v.try_parse_driver_version(None) is None
    assert v.try_parse_driver_version("580.65.06") == v.parse_driver_version("580.65.06")


@pytest.mark.parametrize(
    "version, minimum, expected",
    [
        ("580", "580.65.06", True),  # a branch means its newest release
        ("580", "590.44.01", False),
        ("590", "580.65.06", True),
        ("580.65.06", "580.65.06", True),
        ("580.65.05", "580.65.06", False),
        ("580.95", "580.82.07", True),
        ("570.26", "570.26", True),
        ("570.124.06", "570.26", True),
        ("525.60.13", "525", True),
        ("520.61.05", "525", False),
        ("450.80.02", "450.80.02", True),
        ("450.51.05", "450.80.02", False),
        ("450", "450.80.02", True),
    ],
)
def test_satisfies(version, minimum, expected):
    assert v.satisfies(version, minimum) is expected


@pytest.mark.parametrize(
    "declared, actual, expected",
    [
        ("580", "580.159.04", True),
        ("570", "580.159.04", False),
        ("580.159", "580.159.04", True),
        ("580.95", "580.159.04", False),
        ("580.159.04", "580.159.04", True),
        ("580.159.05", "580.159.04", False),
    ],
)
def test_matches(declared, actual, expected):
    assert v.matches(declared, actual) is expected


@pytest.mark.parametrize(
    "text, release",
    [("12.4", (12, 4, 0)), ("12.4.1", (12, 4, 1)), ("13.0", (13, 0, 0)), (" 11.8 ", (11, 8, 0))],
)
def test_parse_cuda_version(text, release):
    assert v.parse_cuda_version(text) == release


@pytest.mark.parametrize("text", ["12", "12.x", "cuda12.4", "12.4.1.1", ""])
def test_parse_cuda_version_rejects(text):
    with pytest.raises(GpuFleetError) as exc:
        v.parse_cuda_version(text)
    assert exc.value.msg == "version '%s' is not a CUDA version (expected e.g. 12.4, 12.4.1 or 13.0)" % text


@pytest.mark.parametrize(
    "cuda, minimum, family, exact",
    [
        ("13.0", "580.65.06", "580", True),
        ("13.0.2", "580.95.05", "580", True),
        ("12.4", "550.54.14", "525", True),
        ("12.4.1", "550.54.15", "525", True),
        ("12.8", "570.26", "525", True),
        ("12.8.2", "570.124.06", "525", False),  # nearest older update of 12.8
        ("11.0", "450.51.05", "450.80.02", True),
        ("11.3", None, "450.80.02", False),  # not in the release notes' table
        ("14.0", None, None, False),
    ],
)
def test_cuda_requirement(cuda, minimum, family, exact):
    req = v.cuda_requirement(cuda)
    assert (req["minimum"], req["family_minimum"], req["exact"]) == (minimum, family, exact)


@pytest.mark.parametrize(
    "driver, cuda, outcome",
    [
        ("580", "13.0", "ok"),
        ("580.65.06", "13.0", "ok"),
        ("580.65.06", "13.0.2", "minor_version_compat"),
        ("580", "13.1", "minor_version_compat"),
        ("570", "13.0", "too_old"),
        ("550", "12.8", "minor_version_compat"),
        ("550.54.14", "12.4.1", "minor_version_compat"),
        ("570.26", "12.8", "ok"),
        ("525.60.13", "12.0", "ok"),
        ("520", "12.0", "too_old"),
        ("450.80.02", "11.8", "minor_version_compat"),
        ("450.51.05", "11.0", "ok"),
        ("450.51.05", "11.1", "too_old"),
        ("470", "11.3", "unknown"),
        ("595", "14.0", "unknown"),
    ],
)
def test_check_cuda(driver, cuda, outcome):
    assert v.check_cuda(driver, cuda)["outcome"] == outcome


def test_table_rows_are_consistent():
    for release, minimum in v.CUDA_MIN_DRIVER.items():
        if release == (11, 0, 0):
            continue  # 11.0 GA shipped with 450.51.05, before the 11.x floor (450.80.02) existed
        assert v.satisfies(minimum, v.CUDA_FAMILY_MIN_DRIVER[release[0]]), release
    ordered = sorted(v.CUDA_MIN_DRIVER)
    for older, newer in zip(ordered, ordered[1:]):
        assert v.satisfies(v.CUDA_MIN_DRIVER[newer], v.CUDA_MIN_DRIVER[older]), (older, newer)


def test_driver_version_object():
    a = v.parse_driver_version("580.95.05")
    assert str(a) == "580.95.05" and repr(a) == "DriverVersion('580.95.05')"
    assert a == v.parse_driver_version("580.95.5")
    assert hash(a) == hash(v.parse_driver_version("580.95.5"))
    assert a.key() == (580, 95, 5) and v.parse_driver_version("580").key() == (580, 0, 0)
