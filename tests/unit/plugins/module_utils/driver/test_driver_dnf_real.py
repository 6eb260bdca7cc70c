"""Tests of module_utils/driver/dnf.py against the REAL dnf 4 and rpm (tests/unit/fixtures/driver/el9-standin, el10-standin).

Captured by tests/unit/fixtures/driver/capture-el.sh on the EL 9 and EL 10 stand-in nodes (a Debian 12
userland with the real dnf 4.14, its versionlock plugin and rpm 4.18, Rocky Linux 9's or 10's os-release)
against the stand-in repositories of scripts/lab/build-fake-el-repos.sh: every output below is the
tools' own; the repositories' packages are test doubles under NVIDIA's names and streams.
"""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import dnf
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.driver.replay import FIXTURES, Replay, plan_of, run

PRISTINE = "el9-standin/pristine"
INSTALLED = "el9-standin/installed-550.163.01-proprietary"
UNREACHABLE = "el9-standin/installed-550.163.01-proprietary-unreachable-repo"
BASEURL = "http://127.0.0.1:8088/compute/cuda/repos/rhel9/x86_64"
EL10_PRISTINE = "el10-standin/pristine"
EL10_INSTALLED = "el10-standin/installed-580.105.08-open"
EL10_BASEURL = "http://127.0.0.1:8088/compute/cuda/repos/rhel10/x86_64"
NAMES = ["nvidia-driver-cuda", "nvidia-driver-cuda-libs", "nvidia-kmod-common", "nvidia-modprobe", "nvidia-persistenced"]
AVAILABLE = ["550.163.01", "570.172.08", "580.95.05", "580.105.08"]


def specs(names, evr):
    return ["%s-%s" % (n, evr) for n in sorted(names)]


def real_answers(name):
    """``{argv: (rc, stdout, stderr)}`` of the commands recorded in the fixture's also.json."""
    with open(os.path.join(FIXTURES, name, "also.json")) as handle:
        return dict((tuple(r["argv"]), (r["rc"], r["stdout"], r["stderr"])) for r in json.load(handle))


def test_module_list_of_the_real_dnf():
    with open(os.path.join(FIXTURES, INSTALLED, "out", "02-dnf-module-list.txt")) as handle:
        streams = dnf.parse_module_list(handle.read())
    assert streams["550-dkms"] == {"e"}
    assert sorted(streams) == ["550-dkms", "550-open", "570-dkms", "570-open", "580-dkms", "580-open", "latest-dkms",
                               "open-dkms"]


def test_pristine_plan_from_the_real_dnf(tmp_path):
    result = run(Replay(PRISTINE, tmp_path), version="550", flavor="proprietary", cuda_repo_baseurl=BASEURL)
    evr = "3:550.163.01-1.el9"
    names = NAMES + ["kmod-nvidia-latest-dkms"]
    assert result["available_versions"] == AVAILABLE
    assert plan_of(result) == [
        "create /etc/yum.repos.d/cuda-rhel9.repo (add NVIDIA's CUDA repository)",
        "dnf install -y python3-dnf-plugin-versionlock",
        "dnf module enable -y nvidia-driver:550-dkms",
        " ".join(["dnf", "install", "-y", "--allowerasing"] + specs(names, evr)),
        " ".join(["dnf", "versionlock", "add"] + specs(names, evr)),
        "create /etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf (blacklist nouveau)",
    ]
    # the container's kernel has no kernel-devel in any repository: said, not installed
    assert any(n.startswith("kernel-devel-") and "is not in the repositories" in n for n in result["notes"])


def test_pristine_unavailable_version_lists_the_real_versions(tmp_path):
    replay = Replay(PRISTINE, tmp_path)
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version="575.51.03", flavor="proprietary", cuda_repo_baseurl=BASEURL)
    assert raised.value.details["available_versions"] == AVAILABLE
    assert replay.mutations() == []


def test_installed_is_idempotent_and_moves_to_580_open(tmp_path):
    assert run(Replay(INSTALLED, tmp_path / "a"), version="550", flavor="proprietary", cuda_repo_baseurl=BASEURL)["plan"] == []
    result = run(Replay(INSTALLED, tmp_path / "b"), version="580", flavor="open", cuda_repo_baseurl=BASEURL)
    new = "3:580.105.08-1.el9"
    assert plan_of(result) == [
        " ".join(["dnf", "'--disablerepo=*'", "versionlock", "delete"]
                 + specs(NAMES + ["kmod-nvidia-latest-dkms"], "3:550.163.01-1.el9")),
        "dnf module reset -y nvidia-driver",
        "dnf module enable -y nvidia-driver:580-open",
        " ".join(["dnf", "install", "-y", "--allowerasing"] + specs(NAMES + ["kmod-nvidia-open-dkms"], new)),
        " ".join(["dnf", "versionlock", "add"] + specs(NAMES + ["kmod-nvidia-open-dkms"], new)),
    ]


def test_absent_where_a_repository_cannot_be_reached(tmp_path):
    """dnf 4 loads every enabled repository before `versionlock list`, `versionlock delete` and
    `module reset`, and fails on one it cannot reach (also.json: the real answers); `dnf remove`
    does not. State absent failed at its first read there; with --disablerepo it removes the driver."""
    answers = real_answers(UNREACHABLE)
    assert all(rc == 1 and "Failed to download metadata for repo 'unreachable'" in err for rc, dummy, err in answers.values())
    replay = Replay(UNREACHABLE, tmp_path, overrides=answers)
    result = run(replay, check_mode=False, state="absent")
    assert result["changed"]
    assert [c[:4] for c in replay.mutations()] == [
        ["dnf", "--disablerepo=*", "versionlock", "delete"],
        ["dnf", "remove", "-y", "kmod-nvidia-latest-dkms"],
        ["dnf", "--disablerepo=*", "module", "reset"],
    ]


def test_present_where_a_repository_cannot_be_reached_names_it(tmp_path):
    with pytest.raises(GpuFleetError) as raised:
        run(Replay(UNREACHABLE, tmp_path), version="550", flavor="proprietary", cuda_repo_baseurl=BASEURL)
    assert "could not list the nvidia-driver streams" in raised.value.msg
    assert "Failed to download metadata for repo 'unreachable'" in raised.value.msg


# --- EL 10: NVIDIA's repository without the nvidia-driver module ------------------------------------


def test_el10_pristine_installs_and_locks_without_a_stream(tmp_path):
    """On RHEL 10 `dnf module list nvidia-driver` exits 1, "No matching Modules to list" (also.json,
    the real answer): the planner asked for the streams first and failed on every RHEL 10 node."""
    answers = real_answers(EL10_PRISTINE)
    assert [(rc, err.strip()) for rc, dummy, err in answers.values()] == [(1, "Error: No matching Modules to list")]
    replay = Replay(EL10_PRISTINE, tmp_path, overrides=answers)
    result = run(replay, version="580", flavor="open", cuda_repo_baseurl=EL10_BASEURL)
    evr = "3:580.105.08-1.el10"
    names = NAMES + ["kmod-nvidia-open-dkms"]
    assert plan_of(result) == [
        "create /etc/yum.repos.d/cuda-rhel10.repo (add NVIDIA's CUDA repository)",
        "dnf install -y python3-dnf-plugin-versionlock",
        " ".join(["dnf", "install", "-y", "--allowerasing"] + specs(names, evr)),
        " ".join(["dnf", "versionlock", "add"] + specs(names, evr)),
        "create /etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf (blacklist nouveau)",
    ]
    assert result["available_versions"] == AVAILABLE
    assert not [c for c in replay.calls if "module" in c]


def test_el10_installed_is_idempotent_moves_and_goes_without_a_stream(tmp_path):
    assert run(Replay(EL10_INSTALLED, tmp_path / "a"), version="580", flavor="open",
               cuda_repo_baseurl=EL10_BASEURL)["plan"] == []
    moved = run(Replay(EL10_INSTALLED, tmp_path / "b"), version="550", flavor="proprietary", cuda_repo_baseurl=EL10_BASEURL)
    assert [line.split()[1] for line in moved["plan"]] == ["'--disablerepo=*'", "install", "versionlock"]
    absent = run(Replay(EL10_INSTALLED, tmp_path / "c"), state="absent")
    assert [line.split(" ", 3)[:3] for line in absent["plan"][:2]] == [
        ["dnf", "'--disablerepo=*'", "versionlock"], ["dnf", "remove", "-y"]]
    assert not [line for line in absent["plan"] if " module " in line]
