"""Tests of the gpufleet.nvidia.gpu_facts module, replaying host captures."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _gpu_facts
from ansible_collections.gpufleet.nvidia.plugins.modules import gpu_facts
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.test_gpu_facts import CaptureHost
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.utils import AnsibleFailJson, run_module


@pytest.fixture
def replay(monkeypatch):
    """Make the module read the named capture instead of this machine."""
    seen = {}

    def use(name):
        def make_host(host_root="/", timeout=60):
            seen["args"] = (host_root, timeout)
            seen["host"] = CaptureHost(name)
            return seen["host"]

        monkeypatch.setattr(_gpu_facts, "make_host", make_host)
        return seen

    return use


@pytest.mark.parametrize("check_mode", [False, True])
def test_h200_capture(replay, check_mode):
    seen = replay("ubuntu2404-h200-preinstalled")
    result = run_module(gpu_facts, {}, check_mode=check_mode)
    assert result["changed"] is False
    facts = result["gpufleet_nvidia"]
    assert result["ansible_facts"] == {"gpufleet_nvidia": facts}
    assert seen["args"] == ("/", 60)
    assert facts["gpu_count"] == 1
    assert facts["gpus"][0]["name"] == "GH100 [H200 SXM 141GB]"
    assert facts["driver"]["version"] == "580.159.04"
    assert facts["driver"]["flavor"] == "open"
    assert facts["driver"]["source"] == "preinstalled"
    assert facts["driver"]["nvidia_smi"]["cuda_version"] == "13.0"
    assert facts["probes"]["nvidia_smi"]["state"] == "ok"


def test_nvidia_smi_failure_does_not_fail_the_module(replay):
    replay("ubuntu2404-h200-smi-failing")
    result = run_module(gpu_facts, {"host_root": "/", "command_timeout": 10})
    assert "failed" not in result
    assert result["gpufleet_nvidia"]["probes"]["nvidia_smi"]["state"] == "error"


def test_host_root_and_timeout_are_passed_on(replay):
    seen = replay("debian12-nogpu")
    run_module(gpu_facts, {"host_root": "/host", "command_timeout": 5})
    assert seen["args"] == ("/host", 5)


def test_bad_host_root_fails_cleanly(tmp_path):
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(gpu_facts, {"host_root": str(tmp_path / "nope")})
    assert exc.value.result["msg"] == "host_root: '%s' is not a directory" % (tmp_path / "nope")
    assert exc.value.result["host_root"] == str(tmp_path / "nope")


def test_this_machine():
    """No mock at all: gathering on whatever runs the tests ends in facts."""
    result = run_module(gpu_facts, {})
    assert result["changed"] is False
    assert "probes" in result["gpufleet_nvidia"]
