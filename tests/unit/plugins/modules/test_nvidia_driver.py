"""Tests of the nvidia_driver module: check mode, real run, idempotence, diff, failures.

The host is a replayed fixture of tests/unit/fixtures/driver (``Replay`` in
replay.py); ``Host.for_module`` is patched to give it, whose atomic writes go under the replayed
root, so nothing on this machine is touched.
"""

from __future__ import annotations

import contextlib
from unittest import mock

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import install as driver_lib
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_holds import PIN_FILE, UU_FILE
from ansible_collections.gpufleet.nvidia.plugins.modules import nvidia_driver
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.driver.replay import (
    D12_INSTALLED,
    D12_PRISTINE,
    Replay,
    rocky_hgx,
)
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.utils import AnsibleFailJson, run_module

ARGS = {"version": "535.261.03", "flavor": "proprietary"}


@contextlib.contextmanager
def host(replay):
    system = replay.system()
    seen = []

    def for_module(cls, module, root="/", timeout=None):
        seen.append((root, timeout))
        return system

    with mock.patch.object(common_host.Host, "for_module", classmethod(for_module)):
        yield replay
    assert set(seen) <= {("/", driver_lib.COMMAND_TIMEOUT)}


def test_four_steps(tmp_path):
    """Check mode, real run, check mode again, real run again (community.crypto's sequence)."""
    pristine = Replay(D12_PRISTINE, tmp_path / "pristine")
    with host(pristine):
        first = run_module(nvidia_driver, ARGS, check_mode=True)
    assert first["changed"] is True and first["executed"] == []
    assert pristine.read(PIN_FILE) is None and pristine.mutations() == []

    with host(pristine):
        second = run_module(nvidia_driver, ARGS)
    assert second["changed"] is True and second["plan"] == first["plan"]
    assert second["executed"][-1] == "wrote /etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf"

    # The host after that run, as captured in the lab: the files this run wrote are the ones the
    # module wrote there, so the next runs start from exactly this state.
    installed = Replay(D12_INSTALLED, tmp_path / "installed")
    for path in ("/etc/apt/sources.list", PIN_FILE, UU_FILE, driver_lib.NOUVEAU_FILE):
        assert pristine.read(path) == installed.read(path), path
    with host(installed):
        third = run_module(nvidia_driver, ARGS, check_mode=True)
        fourth = run_module(nvidia_driver, ARGS)
    assert third["changed"] is False and fourth["changed"] is False
    assert third["plan"] == [] and fourth["executed"] == []


def test_diff(tmp_path):
    with host(Replay(D12_INSTALLED, tmp_path)):
        result = run_module(nvidia_driver, {"version": "535", "flavor": "proprietary"}, check_mode=True, diff=True)
    packages = result["diff"][0]
    assert "libcuda1=535.261.03-1 (held)\n" in packages["before"]
    assert "libcuda1=535.309.01-0+deb12u1 (held)\n" in packages["after"]
    pin = next(d for d in result["diff"] if d["after_header"] == PIN_FILE)
    assert "Pin: version 535.261.03-1\n" in pin["before"] and "Pin: version 535.309.01-0+deb12u1\n" in pin["after"]


def test_unavailable_version_fails_with_the_available_ones(tmp_path):
    replay = Replay(D12_PRISTINE, tmp_path)
    with host(replay), pytest.raises(AnsibleFailJson) as raised:
        run_module(nvidia_driver, {"version": "580", "flavor": "open"})
    result = raised.value.result
    assert result["msg"].startswith("nvidia_driver: version 580 (open) is not available from Debian's non-free")
    assert result["available_versions"] == ["535.261.03"]
    assert replay.mutations() == []


@pytest.mark.parametrize(
    "args, message",
    [
        ({}, "version is required with method package and state present"),
        ({"version": "5x5"}, "version '5x5' is not a driver version (expected e.g. 580 or 580.95.05)"),
        ({"method": "preinstalled", "state": "absent"}, "state absent with method preinstalled"),
    ],
)
def test_bad_parameters(tmp_path, args, message):
    replay = Replay(D12_PRISTINE, tmp_path)
    with host(replay), pytest.raises(AnsibleFailJson) as raised:
        run_module(nvidia_driver, args)
    assert message in raised.value.result["msg"]
    assert replay.calls == []


def test_preinstalled_never_changes(tmp_path):
    replay = Replay(D12_INSTALLED, tmp_path)
    with host(replay):
        result = run_module(nvidia_driver, {"method": "preinstalled", "version": "535.261.03"})
    assert result["changed"] is False
    assert result["version"] == "535.261.03" and result["drift"] is False
    assert replay.mutations() == []


# --- an HGX node (DERIVED, see tests/unit/fixtures/driver/hgx): the fabric manager with the driver ---

FM_ARGS = {"version": "570.172.08", "flavor": "proprietary"}


def test_fabric_manager_four_steps(tmp_path):
    """Check mode, real run, then check mode and real run on the host as the run left it: no change."""
    before = rocky_hgx(tmp_path / "before")
    with host(before):
        first = run_module(nvidia_driver, FM_ARGS, check_mode=True)
    assert first["changed"] is True and first["executed"] == [] and before.mutations() == []
    assert first["plan"][-2:] == ["systemctl enable nvidia-fabricmanager", "systemctl start nvidia-fabricmanager"]
    assert first["fabric_manager"]["service"]["active"] == "inactive"

    with host(before):
        second = run_module(nvidia_driver, FM_ARGS)
    assert second["changed"] is True and second["plan"] == first["plan"]
    assert second["executed"][-2:] == ["systemctl enable nvidia-fabricmanager", "systemctl start nvidia-fabricmanager"]
    assert second["fabric_manager"]["service"]["active"] == "active"

    installed = {"libnvidia-nscq-570": "0:570.172.08-1", "nvidia-fabric-manager": "0:570.172.08-1"}
    after = rocky_hgx(tmp_path / "after", installed, enabled="enabled", active="active")
    with host(after):
        third = run_module(nvidia_driver, FM_ARGS, check_mode=True)
        fourth = run_module(nvidia_driver, FM_ARGS)
    assert third["changed"] is False and fourth["changed"] is False
    assert third["plan"] == [] and fourth["executed"] == [] and after.mutations() == []
    assert fourth["fabric_manager"]["action"] == "none"


def test_fabric_manager_option_is_checked(tmp_path):
    replay = Replay(D12_PRISTINE, tmp_path)
    with host(replay), pytest.raises(AnsibleFailJson) as raised:
        run_module(nvidia_driver, dict(ARGS, fabric_manager="yes"))
    assert "fabric_manager" in raised.value.result["msg"] and "auto, always, never" in raised.value.result["msg"]
    assert replay.calls == []


def test_preinstalled_fabric_manager_drift_through_the_module(tmp_path):
    replay = Replay(D12_INSTALLED, tmp_path).add_nvswitches()
    with host(replay):
        result = run_module(nvidia_driver, {"method": "preinstalled", "version": "535.261.03"})
    assert result["changed"] is False and result["drift"] is True
    assert result["drift_detail"] == [
        "fabric manager not installed (this host has 4 NVSwitches; CUDA fails on its GPUs until one of the driver's "
        "version runs)"
    ]
    assert result["fabric_manager"]["required"] is True
    assert replay.mutations() == []


# --- malformed options and failed runs, as the user sees them (issue: no input and no interruption breaks a node) ---


@pytest.mark.parametrize("check_mode", [True, False])
def test_malformed_option_is_a_clean_refusal_before_anything_is_read(tmp_path, check_mode):
    replay = Replay(D12_PRISTINE, tmp_path)
    args = dict(ARGS, cuda_repo_baseurl="https://mirror.invalid/cuda\n[evil]\ngpgcheck=0")
    with host(replay), pytest.raises(AnsibleFailJson) as raised:
        run_module(nvidia_driver, args, check_mode=check_mode)
    assert raised.value.result["msg"] == (
        "nvidia_driver: cuda_repo_baseurl 'https://mirror.invalid/cuda\\n[evil]\\ngpgcheck=0' is not a URL (http, https, "
        "file; no whitespace or control characters, no ',')"
    )
    assert raised.value.result["option"] == "cuda_repo_baseurl"
    assert replay.calls == []


def test_full_width_version_is_refused(tmp_path):
    replay = Replay(D12_PRISTINE, tmp_path)
    with host(replay), pytest.raises(AnsibleFailJson) as raised:
        run_module(nvidia_driver, {"version": "\uff15\uff18\uff10"}, check_mode=True)
    assert raised.value.result["msg"].startswith("nvidia_driver: version '\uff15\uff18\uff10' is not a driver version (ASCII")
    assert replay.calls == []


def test_failed_install_fails_the_task_with_the_files_put_back(tmp_path):
    replay = Replay(D12_PRISTINE, tmp_path)
    plan = run_module_plan(replay)
    argv = [a.strip("'") for a in plan[4].split(" ")]
    replay = Replay(D12_PRISTINE, tmp_path / "again", overrides={tuple(argv): (100, "", "E: Unable to fetch some archives")})
    sources = replay.read("/etc/apt/sources.list")
    with host(replay), pytest.raises(AnsibleFailJson) as raised:
        run_module(nvidia_driver, ARGS)
    result = raised.value.result
    assert result["rc"] == 100 and "; put back as they were: " in result["msg"]
    assert result["restored"] == [UU_FILE, PIN_FILE, "/etc/apt/sources.list"]
    assert replay.read("/etc/apt/sources.list") == sources
    assert replay.read(PIN_FILE) is None and replay.read(UU_FILE) is None


def run_module_plan(replay):
    with host(replay):
        return run_module(nvidia_driver, ARGS, check_mode=True)["plan"]
