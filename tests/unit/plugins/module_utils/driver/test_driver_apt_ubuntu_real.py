"""Tests of module_utils/driver/apt.py on Ubuntu 24.04 against the REAL apt, dpkg and apt-mark (tests/unit/fixtures/driver/ubuntu2404-standin).

Captured by tests/unit/fixtures/driver/capture-ubuntu.sh on the Ubuntu 24.04 stand-in node (a Debian 12
userland with the real apt 2.6, dpkg and apt-mark, Ubuntu 24.04's os-release) against the stand-in of
Ubuntu's archive of scripts/lab/build-fake-nvidia-repo.sh --ubuntu: every output below is the tools' own;
the archive's packages are test doubles under Canonical's names, versions and dependencies, the
precompiled modules built for the kernel of the capturing machine (host.json's).
"""

from __future__ import annotations

import pytest


from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_holds import PIN_FILE
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.driver.replay import Replay, install_argv, plan_of, run

PRISTINE = "ubuntu2404-standin/pristine"
INSTALLED = "ubuntu2404-standin/installed-550.163.01-proprietary-precompiled"
KERNEL = "6.18.44-fc-v1252"
V550 = "550.163.01-0ubuntu0.24.04.1"
V580 = "580.95.05-0ubuntu0.24.04.2"
MODULES = "linux-modules-nvidia-550-server-" + KERNEL
OBJECTS = "linux-objects-nvidia-550-server-" + KERNEL
CORE_550 = ["libnvidia-cfg1-550-server", "libnvidia-compute-550-server", "nvidia-compute-utils-550-server",
            "nvidia-headless-no-dkms-550-server", "nvidia-kernel-common-550-server", "nvidia-kernel-source-550-server",
            "nvidia-utils-550-server"]
OPEN_580 = ["libnvidia-cfg1-580-server", "libnvidia-compute-580-server", "nvidia-compute-utils-580-server",
            "nvidia-dkms-580-server-open", "nvidia-headless-no-dkms-580-server-open", "nvidia-kernel-common-580-server",
            "nvidia-kernel-source-580-server-open", "nvidia-utils-580-server"]
HELD_550 = sorted(CORE_550 + [MODULES])


def test_pristine_plan_adds_restricted_and_takes_the_precompiled_modules(tmp_path):
    replay = Replay(PRISTINE, tmp_path)
    result = run(replay, version="550", flavor="proprietary")
    assert result["available_versions"] == ["550.144.03", "550.163.01"]
    assert result["kernel_modules"] == "precompiled"
    assert result["packages"][MODULES] == "6.18.44-1.1+1"
    want = sorted(["%s=%s" % (n, V550) for n in CORE_550] + ["%s=6.18.44-1.1+1" % MODULES])
    assert plan_of(result)[:2] == ["update /etc/apt/sources.list.d/ubuntu.sources (add restricted to its noble entries)",
                                   "apt-get update -q"]
    assert install_argv(*want) in plan_of(result)
    assert "apt-mark hold " + " ".join(HELD_550) in plan_of(result)
    assert replay.mutations() == []


def test_pristine_580_open_has_no_precompiled_modules_and_takes_dkms(tmp_path):
    result = run(Replay(PRISTINE, tmp_path), version="580", flavor="open")
    assert result["kernel_modules"] == "dkms"
    assert result["version"] == "580.95.05"
    want = sorted(["%s=%s" % (n, V580) for n in OPEN_580] + ["linux-headers-%s=6.18.44-1.1" % KERNEL])
    assert install_argv(*want) in plan_of(result)


def test_pristine_unavailable_version_names_the_real_branches(tmp_path):
    replay = Replay(PRISTINE, tmp_path)
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version="575.51.03", flavor="proprietary")
    assert raised.value.details["available_branches"] == ["550", "570", "580"]
    assert replay.mutations() == []


def test_installed_is_idempotent(tmp_path):
    assert run(Replay(INSTALLED, tmp_path), version="550", flavor="proprietary")["plan"] == []


def test_installed_moves_to_580_open_with_the_modules_and_their_objects(tmp_path):
    result = run(Replay(INSTALLED, tmp_path), version="580", flavor="open")
    removals = sorted(CORE_550 + [MODULES, OBJECTS])
    assert plan_of(result)[0] == "apt-mark unhold " + " ".join(HELD_550)
    want = sorted(["%s=%s" % (n, V580) for n in OPEN_580] + ["linux-headers-%s=6.18.44-1.1" % KERNEL])
    assert install_argv(*(want + ["%s-" % n for n in removals]), purge=True) in plan_of(result)
    assert "apt-mark hold " + " ".join(OPEN_580) in plan_of(result)


def test_installed_absent_purges_the_driver_and_the_modules_objects(tmp_path):
    result = run(Replay(INSTALLED, tmp_path), state="absent")
    assert plan_of(result)[:2] == [
        "apt-mark unhold " + " ".join(HELD_550),
        "apt-get purge -y -q " + " ".join(sorted(CORE_550 + [MODULES, OBJECTS])),
    ]
    assert "remove %s (no driver to pin)" % PIN_FILE in plan_of(result)
