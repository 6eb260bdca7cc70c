"""Tests of module_utils/driver/dnf.py: RHEL-family plans against DOCUMENTED outputs.

NVIDIA's CUDA repository cannot be reached from the development machine: the Rocky Linux 9 hosts
of tests/unit/fixtures/driver are built from NVIDIA's driver installation guide and issue threads
(see the fixtures' README), in the formats of rpm, dnf module list, dnf repoquery and dnf
versionlock. The plans below follow that documentation; none was run on a RHEL host.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import dnf
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import packages
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.driver.replay import (
    FM_570,
    FM_580,
    RPM_QA_FM,
    Replay,
    plan_of,
    rocky_hgx,
    run,
)
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.driver.replay import ROCKY9_INSTALLED as INSTALLED

PRISTINE = "rocky9/pristine"
KERNEL = "5.14.0-503.14.1.el9_5.x86_64"
COMMON = ["nvidia-driver-cuda", "nvidia-driver-cuda-libs", "nvidia-kmod-common", "nvidia-modprobe", "nvidia-persistenced"]
FROMPATH = ["--repofrompath=cuda-rhel9-x86_64,https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64",
            "--setopt=cuda-rhel9-x86_64.gpgcheck=0"]
REPOQUERY = ["repoquery", "--disable-modular-filtering", "--showduplicates", "--qf",
             "%{name}\\t%{epoch}:%{version}-%{release}", "kmod-nvidia-latest-dkms", "kmod-nvidia-open-dkms",
             "nvidia-driver-cuda", "nvidia-driver-cuda-libs", "nvidia-kmod-common", "nvidia-modprobe",
             "nvidia-persistenced", "dkms", "kernel-devel-" + KERNEL]


def specs(names, evr):
    return ["%s-%s" % (n, evr) for n in names]


# --- parsers ---------------------------------------------------------------------------------------


def test_parse_module_list_flags():
    streams = dnf.parse_module_list(
        "cuda-rhel9-x86_64\nName          Stream             Profiles       Summary\n"
        "nvidia-driver 570-dkms [e]       default [d] [i], fm, ks   Nvidia driver for 570-dkms branch\n"
        "nvidia-driver latest-dkms [d]    default [d], fm, ks       Nvidia driver for latest-dkms branch\n"
        "nvidia-driver open-dkms          default [d], fm, ks, src  Nvidia driver for open-dkms branch\n"
        "\nHint: [d]efault, [e]nabled, [x]disabled, [i]nstalled\n"
    )
    assert streams == {"570-dkms": {"e"}, "latest-dkms": {"d"}, "open-dkms": set()}


def test_parse_rpm_q_and_versionlock():
    assert dnf.parse_rpm_q("dkms\t(none):3.2.1-1.el9\npackage kmod-nvidia-open-dkms is not installed\n"
                           "nvidia-driver-cuda\t3:570.172.08-1.el9\n") == {
        "dkms": "0:3.2.1-1.el9", "nvidia-driver-cuda": "3:570.172.08-1.el9"}
    assert dnf.parse_versionlock("kmod-nvidia-latest-dkms-3:570.172.08-1.el9.*\n!nvidia-driver-3:1.0-1.el9.*\n") == {
        "kmod-nvidia-latest-dkms": "3:570.172.08-1.el9"}


def test_parse_repoquery_sorts_newest_first():
    found = dnf.parse_repoquery("nvidia-driver-cuda\t3:570.172.08-1.el9\nnvidia-driver-cuda\t3:580.95.05-1.el9\n"
                                "nvidia-driver-cuda\t3:580.82.07-1.el9\n")
    assert found["nvidia-driver-cuda"] == ["3:580.95.05-1.el9", "3:580.82.07-1.el9", "3:570.172.08-1.el9"]


# --- the planner's steps ---------------------------------------------------------------------------


def test_common_upstreams_are_those_every_package_has():
    found = {"a": ["3:580.95.05-1.el9", "3:570.172.08-1.el9"], "b": ["3:570.172.08-1.el9", "3:535.261.03-1.el9"]}
    assert packages.common_upstreams(found, ["a", "b"]) == ["570.172.08"]
    assert packages.common_upstreams(found, ["a", "missing"]) == []
    assert packages.version_at(found, "a", "570.172.08") == "3:570.172.08-1.el9"


def test_specs_and_lock_changes():
    assert dnf._specs({"nvidia-driver-cuda": "3:580.95.05-1.el9", "kernel-devel-" + KERNEL: None}) == [
        "kernel-devel-" + KERNEL, "nvidia-driver-cuda-3:580.95.05-1.el9"]
    locks = {"nvidia-driver-cuda": "3:570.172.08-1.el9", "nvidia-modprobe": "3:580.95.05-1.el9", "other": "0:1-1"}
    want = {"nvidia-driver-cuda": "3:580.95.05-1.el9", "nvidia-modprobe": "3:580.95.05-1.el9"}
    assert dnf._lock_changes(locks, want, {"nvidia-driver-cuda", "nvidia-modprobe"}) == (
        ["nvidia-driver-cuda"], ["nvidia-driver-cuda"])


# --- plans -----------------------------------------------------------------------------------------


def test_rocky9_pristine_open_580(tmp_path):
    replay = Replay(PRISTINE, tmp_path)
    result = run(replay, version="580", flavor="open")
    evr = "3:580.95.05-1.el9"
    names = sorted(COMMON + ["kmod-nvidia-open-dkms"])
    assert plan_of(result) == [
        "create /etc/yum.repos.d/cuda-rhel9.repo (add NVIDIA's CUDA repository)",
        "dnf install -y python3-dnf-plugin-versionlock",
        "dnf module enable -y nvidia-driver:580-open",
        " ".join(["dnf", "install", "-y", "--allowerasing", "kernel-devel-" + KERNEL] + specs(names, evr)),
        " ".join(["dnf", "versionlock", "add"] + specs(names, evr)),
        "create /etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf (blacklist nouveau)",
    ]
    assert result["backend"] == "dnf"
    assert result["version"] == "580.95.05"
    assert result["available_versions"] == ["550.163.01", "570.172.08", "570.195.03", "580.82.07", "580.95.05"]
    assert result["nouveau"]["initramfs"].startswith("not regenerated: /boot/initramfs-%s.img does not exist" % KERNEL)
    # read through --repofrompath before the repository file exists
    assert ["dnf", "-q"] + FROMPATH + ["module", "list", "nvidia-driver"] in replay.calls
    assert replay.mutations() == []


def test_rocky9_repo_file(tmp_path):
    replay = Replay(PRISTINE, tmp_path)
    run(replay, check_mode=False, version="580.82.07", flavor="proprietary")
    assert replay.read("/etc/yum.repos.d/cuda-rhel9.repo") == (
        "# Managed by gpufleet.nvidia.nvidia_driver: NVIDIA's CUDA repository, for the NVIDIA driver.\n"
        "[cuda-rhel9-x86_64]\nname=cuda-rhel9-x86_64\n"
        "baseurl=https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64\nenabled=1\ngpgcheck=1\n"
        "gpgkey=https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/D42D0685.pub\n"
    )
    assert ["dnf", "module", "enable", "-y", "nvidia-driver:580-dkms"] in replay.mutations()


@pytest.mark.parametrize(
    "version, flavor, available",
    [
        ("535", "open", ["550.163.01", "570.172.08", "570.195.03", "580.82.07", "580.95.05"]),
        ("999", "proprietary", ["535.274.02", "550.163.01", "570.172.08", "570.195.03", "580.82.07", "580.95.05"]),
    ],
)
def test_rocky9_unavailable_versions(tmp_path, version, flavor, available):
    replay = Replay(PRISTINE, tmp_path)
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version=version, flavor=flavor)
    assert raised.value.details["available_versions"] == available
    assert "is not available from NVIDIA's CUDA repository" in raised.value.msg
    assert replay.mutations() == [] and replay.read("/etc/yum.repos.d/cuda-rhel9.repo") is None


def test_rocky9_without_epel_fails_before_any_change(tmp_path):
    replay = Replay(PRISTINE, tmp_path)
    key = tuple(["dnf", "-q"] + FROMPATH + REPOQUERY)
    rc, out, err = replay.commands[__import__("json").dumps(list(key))]
    replay = Replay(PRISTINE, tmp_path / "again", overrides={key: (rc, out.replace("dkms\t0:3.2.1-1.el9\n", ""), err)})
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version="580", flavor="open")
    assert "dkms is neither installed nor available" in raised.value.msg and "EPEL" in raised.value.msg
    assert replay.mutations() == []


def test_rocky9_installed_same_version(tmp_path):
    result = run(Replay(INSTALLED, tmp_path), version="570.172.08", flavor="proprietary")
    assert result["changed"] is False and result["plan"] == []


def test_rocky9_move_to_580_open(tmp_path):
    result = run(Replay(INSTALLED, tmp_path), version="580", flavor="open")
    old = "3:570.172.08-1.el9"
    new = "3:580.95.05-1.el9"
    locked = sorted(COMMON + ["kmod-nvidia-latest-dkms"])
    names = sorted(COMMON + ["kmod-nvidia-open-dkms"])
    assert plan_of(result) == [
        " ".join(["dnf", "'--disablerepo=*'", "versionlock", "delete"] + specs(locked, old)),
        "dnf module reset -y nvidia-driver",
        "dnf module enable -y nvidia-driver:580-open",
        " ".join(["dnf", "install", "-y", "--allowerasing"] + specs(names, new)),
        " ".join(["dnf", "versionlock", "add"] + specs(names, new)),
    ]
    assert result["package_changes"]["remove"] == ["kmod-nvidia-latest-dkms"]
    assert "kmod-nvidia-latest-dkms (the other flavour) is replaced through --allowerasing" in result["notes"]
    assert result["reboot_required"] is True


def test_rocky9_update_within_the_branch(tmp_path):
    result = run(Replay(INSTALLED, tmp_path), version="570", flavor="proprietary")
    assert result["version"] == "570.195.03"
    assert "dnf module enable -y nvidia-driver:570-dkms" not in result["plan"]  # the stream is enabled already


def test_rocky9_absent(tmp_path):
    result = run(Replay(INSTALLED, tmp_path), state="absent")
    names = sorted(COMMON + ["kmod-nvidia-latest-dkms"])
    assert plan_of(result) == [
        " ".join(["dnf", "'--disablerepo=*'", "versionlock", "delete"] + specs(names, "3:570.172.08-1.el9")),
        " ".join(["dnf", "remove", "-y"] + names),
        "dnf '--disablerepo=*' module reset -y nvidia-driver",
        "remove /etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf (nouveau no longer blacklisted by this module)",
    ]
    assert result["reboot_required"] is False


# --- the fabric manager from NVIDIA's CUDA repository (DERIVED hosts, see fixtures/driver/hgx) -------


def test_rocky9_fabric_manager_installed_and_locked_with_the_driver(tmp_path):
    replay = rocky_hgx(tmp_path)
    result = run(replay, check_mode=False, version="570.172.08", flavor="proprietary")
    fm = specs(FM_570, "0:570.172.08-1")
    assert plan_of(result) == [
        " ".join(["dnf", "install", "-y", "--allowerasing"] + fm),
        " ".join(["dnf", "versionlock", "add"] + fm),
        "systemctl enable nvidia-fabricmanager",
        "systemctl start nvidia-fabricmanager",
    ]
    assert result["packages"]["nvidia-fabric-manager"] == "0:570.172.08-1"
    assert result["fabric_manager"]["action"] == "install, enable, start"
    assert result["fabric_manager"]["service"]["active"] == "active"
    assert RPM_QA_FM in [json.dumps(c) for c in replay.calls]


def test_rocky9_fabric_manager_idempotent(tmp_path):
    replay = rocky_hgx(tmp_path, {"libnvidia-nscq-570": "0:570.172.08-1", "nvidia-fabric-manager": "0:570.172.08-1"},
                       enabled="enabled", active="active")
    for check_mode in (True, False):
        result = run(replay, check_mode=check_mode, version="570.172.08", flavor="proprietary")
        assert result["changed"] is False and result["plan"] == []
    assert result["fabric_manager"]["installed_version"] == "570.172.08"
    assert replay.mutations() == []


def test_rocky9_branch_whose_newest_driver_has_no_fabric_manager(tmp_path):
    result = run(rocky_hgx(tmp_path), version="570", flavor="proprietary")
    assert result["version"] == "570.172.08"  # not 570.195.03: no fabric manager at that version
    assert "570.195.03" in result["available_versions"]
    with pytest.raises(GpuFleetError) as raised:
        run(rocky_hgx(tmp_path / "again"), version="570.195.03", flavor="proprietary")
    assert raised.value.msg == (
        "nvidia_driver: fabric_manager: this host has 4 NVSwitches, and NVIDIA's fabric manager must run at exactly "
        "the driver's version, but NVIDIA's CUDA repository "
        "(https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64) has no libnvidia-nscq-570 / "
        "nvidia-fabric-manager at 570.195.03 (fabric manager versions there: 570.133.20, 570.172.08); choose a driver "
        "version that has one, or set fabric_manager to never to install the driver alone"
    )


def test_rocky9_move_to_580_renames_the_fabric_manager(tmp_path):
    old = {"libnvidia-nscq-570": "0:570.172.08-1", "nvidia-fabric-manager": "0:570.172.08-1"}
    replay = rocky_hgx(tmp_path, old, fm_names=FM_580, enabled="enabled", active="active")
    result = run(replay, version="580", flavor="open")
    locked = sorted(COMMON + ["kmod-nvidia-latest-dkms"] + FM_570)
    names = sorted(COMMON + ["kmod-nvidia-open-dkms"])
    assert plan_of(result) == [
        " ".join(["dnf", "'--disablerepo=*'", "versionlock", "delete"] + sorted(
            specs(sorted(COMMON + ["kmod-nvidia-latest-dkms"]), "3:570.172.08-1.el9") + specs(FM_570, "0:570.172.08-1"))),
        "dnf module reset -y nvidia-driver",
        "dnf module enable -y nvidia-driver:580-open",
        "dnf remove -y libnvidia-nscq-570 nvidia-fabric-manager",
        " ".join(["dnf", "install", "-y", "--allowerasing"] + sorted(
            specs(names, "3:580.95.05-1.el9") + specs(FM_580, "0:580.95.05-1"))),
        " ".join(["dnf", "versionlock", "add"] + sorted(specs(names, "3:580.95.05-1.el9") + specs(FM_580, "0:580.95.05-1"))),
    ]
    assert sorted(result["package_changes"]["unlock"]) == locked
    assert result["package_changes"]["remove"] == ["kmod-nvidia-latest-dkms"] + FM_570
    # the 570 module is loaded: the new fabric manager starts with 580 after the reboot
    assert result["reboot_required"] is True
    assert result["fabric_manager"]["action"] == "remove, install"


def test_rocky9_absent_removes_the_fabric_manager(tmp_path):
    old = {"libnvidia-nscq-570": "0:570.172.08-1", "nvidia-fabric-manager": "0:570.172.08-1"}
    result = run(rocky_hgx(tmp_path, old), state="absent")
    names = sorted(COMMON + ["kmod-nvidia-latest-dkms"] + FM_570)
    assert plan_of(result)[:2] == [
        " ".join(["dnf", "'--disablerepo=*'", "versionlock", "delete"]
                 + ["%s-%s" % (n, "0:570.172.08-1" if n in FM_570 else "3:570.172.08-1.el9") for n in names]),
        " ".join(["dnf", "remove", "-y"] + names),
    ]
    assert result["fabric_manager"]["action"] == "remove"
