"""cluster.mig_fit: a MIG config against the GPUs nvidia-smi reports, parsed from captured answers.

The H200 answer is the capture of the lent H200 (tests/unit/fixtures/cdi/README.md: MIG capable,
MIG off, 143771 MiB); the L40S answer that of the two-L40S Debian 12 host
(tests/unit/fixtures/hosts/README.md), whose GPUs cannot do MIG (nvidia-smi says N/A).
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.nvidia_smi import parse_nvidia_smi_xml
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import mig_fit

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), "fixtures")


def _smi(path):
    with open(os.path.join(FIXTURES, path)) as f:
        return parse_nvidia_smi_xml(f.read())["gpus"]


H200 = "cdi/h200/nvidia-smi-q-x.xml"
L40S = "hosts/debian12-l40s-x2-package/commands/nvidia-smi-q-x.txt"


def test_the_captures_are_what_the_tests_say():
    assert [(g["mig_capable"], g["memory_total_mib"]) for g in _smi(H200)] == [(True, 143771)]
    assert [g["mig_capable"] for g in _smi(L40S)] == [False, False]


@pytest.mark.parametrize("profiles", [{"1g.18gb": 7}, {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}, {"7g.141gb": 1},
                                      {"1g.35gb": 4}, {"1g.18gb+me": 1}])
def test_h200_profiles_fit_an_h200(profiles):
    entries = [{"devices": "all", "mig-enabled": True, "mig-devices": profiles}]
    assert mig_fit.fit("c", entries, _smi(H200)) == []


@pytest.mark.parametrize("profiles,problem", [
    ({"1g.10gb": 7}, "profile 1g.10gb is not a profile of a GPU with 140 GiB (its profiles have 18, 35, 70, 140 GB)"),
    ({"3g.71gb": 3}, ["the profiles use 9 compute slices (a GPU has 7)", "the profiles use 213 GB of memory (the GPU has 140 GiB)"]),
    ({"1g.35gb": 5}, "the profiles use 175 GB of memory (the GPU has 140 GiB)"),
    ({"big": 1}, "profile big is not a MIG profile (expected <compute>g.<memory>gb, e.g. 1g.10gb)"),
])
def test_profiles_that_do_not_fit_an_h200_are_named(profiles, problem):
    entries = [{"devices": "all", "mig-enabled": True, "mig-devices": profiles}]
    problems = problem if isinstance(problem, list) else [problem]
    assert mig_fit.fit("c", entries, _smi(H200)) == ["MIG config 'c': GPU 0 (NVIDIA H200): " + p for p in problems]


def test_a_gpu_without_mig_and_a_missing_index_are_named():
    entries = [{"devices": [0, 5], "mig-enabled": True, "mig-devices": {"1g.10gb": 1}}]
    assert mig_fit.fit("x", entries, _smi(L40S)) == [
        "MIG config 'x': GPU index 5 does not exist (the node has 2 GPUs)",
        "MIG config 'x': GPU 0 (NVIDIA L40S) cannot do MIG (nvidia-smi reports its MIG mode as N/A)",
    ]
    # Disabling MIG fits any GPU.
    assert mig_fit.fit("off", [{"devices": "all", "mig-enabled": False}], _smi(L40S)) == []


def test_the_operator_default_configs_are_read_from_their_names():
    assert mig_fit.config_entries("all-1g.10gb", {}) == [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 1}}]
    assert mig_fit.config_entries("all-disabled", {})[0]["mig-enabled"] is False
    assert mig_fit.config_entries("custom", {"custom": [{"devices": "all"}]}) == [{"devices": "all"}]
    assert mig_fit.config_entries("unknown", {}) is None
    assert mig_fit.fit("all-1g.10gb", mig_fit.config_entries("all-1g.10gb", {}), _smi(H200))
