"""Tests of the gpufleet.nvidia.host_validate module, replaying host captures."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.modules import host_validate
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.discovery.captures import CaptureHost
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.utils import AnsibleFailJson, run_module


@pytest.fixture
def replay(monkeypatch):
    """Make the module read the named capture instead of this machine."""
    seen = {}

    def use(name):
        def for_module(cls, module, root="/", timeout=None):
            seen["args"] = (root, timeout)
            seen["host"] = CaptureHost(name)
            return seen["host"]

        monkeypatch.setattr(common_host.Host, "for_module", classmethod(for_module))
        return seen

    return use


EXPECT = {"node": "gpu-a", "replicas": 4, "resource": "nvidia.com/gpu", "sharing_config": "ts-4", "labels": {"nvidia.com/gpu.present": "true"}}


@pytest.mark.parametrize("check_mode", [False, True])
def test_h200_is_validated_and_the_facts_refreshed(replay, check_mode):
    seen = replay("ubuntu2404-h200-preinstalled")
    result = run_module(
        host_validate,
        {"driver_version": "580", "driver_method": "preinstalled", "container_runtime": "none", "cluster_expect": EXPECT},
        check_mode=check_mode,
    )
    assert result["changed"] is False
    validation = result["validation"]
    assert validation["status"] == "ok"
    assert validation["cluster_expect"] == EXPECT
    # the facts once, as facts; the validation also as the module's result
    assert sorted(result) == ["ansible_facts", "changed", "validation"]
    assert result["ansible_facts"]["gpufleet_nvidia_validation"] == validation
    assert result["ansible_facts"]["gpufleet_nvidia"]["driver"]["version"] == "580.159.04"
    assert seen["args"] == ("/", 60)
    # one round trip, and the only command is nvidia-smi (no nvcc, no runtime declared)
    assert [c[0].rsplit("/", 1)[-1] for c in seen["host"].calls] == ["nvidia-smi"]


def test_failed_checks_do_not_fail_the_module(replay):
    replay("ubuntu2404-h200-smi-failing")
    result = run_module(host_validate, {"container_runtime": "none"})
    assert "failed" not in result
    assert result["validation"]["status"] == "failed"
    assert result["validation"]["failed"][0].startswith("nvidia-smi failed:")


def test_node_without_gpu(replay):
    replay("debian12-nogpu")
    result = run_module(host_validate, {})
    assert result["validation"]["status"] == "skipped"
    assert result["validation"]["not_checked"] == ["no GPU: nothing to validate"]


def test_timeouts_and_root_are_passed_on(replay):
    seen = replay("debian12-nogpu")
    run_module(host_validate, {"host_root": "/host", "command_timeout": 5, "cuda_test_timeout": 30})
    assert seen["args"] == ("/host", 5)


@pytest.mark.parametrize(
    "args, msg",
    [
        ({"driver_version": "five-eighty"}, "driver_version: version 'five-eighty' is not a driver version (expected e.g. 580 or 580.95.05)"),
        ({"cuda_test_timeout": 0}, "cuda_test_timeout: 0 is not a number of seconds (expected 1 or more)"),
        ({"gpu_count": -2}, "gpu_count: -2 is not a number of GPUs (expected 0 or more)"),
    ],
)
def test_bad_arguments_fail_cleanly(replay, args, msg):
    replay("ubuntu2404-h200-preinstalled")
    with pytest.raises(AnsibleFailJson) as err:
        run_module(host_validate, args)
    assert err.value.result["msg"] == msg


def test_bad_host_root_fails_cleanly(tmp_path):
    with pytest.raises(AnsibleFailJson) as err:
        run_module(host_validate, {"host_root": str(tmp_path / "absent")})
    assert err.value.result["msg"] == "host_root: '%s' is not a directory" % (tmp_path / "absent")
