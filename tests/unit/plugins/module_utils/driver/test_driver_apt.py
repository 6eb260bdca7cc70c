"""Tests of module_utils/driver/apt.py: apt's answers parsed, the sources edited, and Ubuntu's plans.

The parsers run on the real Debian outputs of tests/unit/fixtures/driver; the Ubuntu hosts there
are BUILT from Canonical's documentation and package pages (see the fixtures' README), so the
Ubuntu plans below are checked against documented outputs, not observed ones.
"""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import apt

from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_archive import (

    Request,

    parse_madison,

    parse_policy,

    parse_show_depends,

)

from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_holds import PIN_FILE, render_pin

from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_layouts import DebianLayout

from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_sources import (

    edit_deb822,

    edit_oneline,

    query_deb822,

)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.driver.replay import (
    FIXTURES,
    Replay,
    install_argv,
    plan_of,
    run,
)


def fixture_text(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return handle.read()


# --- parsers on the recorded Debian outputs ---------------------------------------------------------


def test_parse_dpkg_query_keeps_installed_and_held():
    installed = apt.parse_dpkg_query(fixture_text("debian12", "installed-535.261.03-proprietary", "out", "00-dpkg-query.txt"))
    assert installed["libcuda1"] == {"version": "535.261.03-1", "status": "hi", "held": True}
    assert installed["nvidia-kernel-common"]["held"] is False
    assert "libcuda-12.2-1" not in installed  # "un": known to dpkg, not installed
    assert sorted(n for n, i in installed.items() if i["held"]) == [
        "firmware-nvidia-gsp", "libcuda1", "libnvidia-cfg1", "libnvidia-ml1", "libnvidia-pkcs11-openssl3",
        "libnvidia-ptxjitcompiler1", "nvidia-alternative", "nvidia-kernel-dkms", "nvidia-kernel-support",
        "nvidia-legacy-check", "nvidia-modprobe", "nvidia-persistenced", "nvidia-smi",
    ]


def test_parse_madison_newest_first():
    found = parse_madison(fixture_text("debian12", "pristine", "out", "02-apt-cache-madison-firmware-nvidia-gsp.txt"))
    assert found["libcuda1"] == ["535.309.01-0+deb12u1", "535.261.03-1"]
    assert "linux-headers-6.18.44-fc-v595" not in found


def test_parse_policy():
    found = parse_policy(fixture_text("debian12", "installed-535.261.03-proprietary", "out",
                                      "02-apt-cache-policy-nvidia-persistenced.txt"))
    assert found["nvidia-persistenced"] == {"installed": "535.171.04-1~deb12u1", "candidate": "535.171.04-1~deb12u1"}
    assert found["nvidia-modprobe"]["candidate"] == "535.309.01-0+deb12u1"
    pristine = parse_policy(fixture_text("debian12", "pristine", "out", "03-apt-cache-policy-nvidia-persistenced.txt"))
    assert pristine["nvidia-persistenced"]["installed"] is None


def test_parse_show_depends_reads_the_precompiled_driver():
    text = fixture_text("ubuntu2404", "pristine", "out",
                        "03-apt-cache-show-linux-modules-nvidia-580-server-open-6.8.0-90-generic.txt")
    assert parse_show_depends(text, 580) == {"6.8.0-90.91+2": "580.173.02", "6.8.0-90.91+1": "580.159.03"}


# --- sources ---------------------------------------------------------------------------------------

BOOKWORM = ["bookworm", "bookworm-updates", "bookworm-security"]
DEBIAN = DebianLayout.components


@pytest.mark.parametrize(
    "before, after",
    [
        ("deb http://m/debian bookworm main\n", "deb http://m/debian bookworm main contrib non-free non-free-firmware\n"),
        # options, a trailing comment and the components present already are kept
        (
            "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://m/debian bookworm main "
            "contrib  # the archive\n",
            "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://m/debian bookworm main "
            "contrib non-free non-free-firmware  # the archive\n",
        ),
        # complete already: untouched
        (
            "deb http://m/debian bookworm main non-free-firmware non-free contrib\n",
            "deb http://m/debian bookworm main non-free-firmware non-free contrib\n",
        ),
        # deb-src, comments, backports, other suites, third-party entries without main: untouched
        (
            "# deb http://m/debian bookworm main\ndeb-src http://m/debian bookworm main\n"
            "deb http://m/debian bookworm-backports main\ndeb https://download.docker.com/linux/debian bookworm stable\n"
            "deb http://m/debian trixie main\n",
            "# deb http://m/debian bookworm main\ndeb-src http://m/debian bookworm main\n"
            "deb http://m/debian bookworm-backports main\ndeb https://download.docker.com/linux/debian bookworm stable\n"
            "deb http://m/debian trixie main\n",
        ),
    ],
)
def test_edit_oneline(before, after):
    new, dummy = edit_oneline(before, BOOKWORM, DEBIAN)
    assert new == after


DEB822 = """# Debian's archive
Types: deb deb-src
URIs: http://m/debian
Suites: trixie trixie-updates
Components: main # the main archive
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mQINBGOaGuwBEADQ
 -----END PGP PUBLIC KEY BLOCK-----

Types: deb
URIs: http://m/debian-security
Suites: trixie-security
Components: main contrib
Enabled: no

Types: deb
URIs: http://m/debian
Suites: trixie-backports
Components: main
"""


def test_edit_deb822_keeps_everything_else():
    new, entries = edit_deb822(DEB822, ["trixie", "trixie-updates", "trixie-security"], DEBIAN)
    assert new == DEB822.replace(
        "Components: main # the main archive", "Components: main contrib non-free non-free-firmware # the main archive"
    )
    assert [e.suites for e in entries] == [["trixie", "trixie-updates"]]


def test_deb822_query_file_is_binary_only_and_keeps_the_key():
    new, dummy = edit_deb822(DEB822, ["trixie", "trixie-updates", "trixie-security"], DEBIAN)
    query = query_deb822(new, ["trixie", "trixie-updates", "trixie-security"])
    assert query == (
        "Types: deb\nURIs: http://m/debian\nSuites: trixie trixie-updates\n"
        "Components: main contrib non-free non-free-firmware # the main archive\n"
        "Signed-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n mQINBGOaGuwBEADQ\n -----END PGP PUBLIC KEY BLOCK-----"
    )


def test_package_changes_move_release_and_hold():
    installed = {
        "libcuda1": {"version": "535.261.03-1", "held": True},
        "nvidia-smi": {"version": "535.309.01-0+deb12u1", "held": True},
        "nvidia-persistenced": {"version": "535.171.04-1~deb12u1", "held": False},
        "libnvidia-encode1": {"version": "535.261.03-1", "held": True},
    }
    want = {"libcuda1": "535.309.01-0+deb12u1", "nvidia-smi": "535.309.01-0+deb12u1",
            "nvidia-persistenced": "535.171.04-1~deb12u1"}
    install, hold, unhold = apt.package_changes(installed, want, ["libnvidia-encode1"],
                                                {"linux-headers-amd64": "6.1.140-1"})
    assert install == {"libcuda1": "535.309.01-0+deb12u1", "linux-headers-amd64": "6.1.140-1"}
    assert unhold == ["libcuda1", "libnvidia-encode1"]
    assert hold == ["libcuda1", "nvidia-persistenced"]


def test_request_asks_about_the_carried_extras_headers_and_other_fabric_managers():
    request = Request({"libcuda1", "nvidia-smi"}, None, [], ["nvidia-fabricmanager-535"],
                      {"libnvidia-encode1": "libnvidia-encode1", "nvidia-driver-535": None}, ["linux-headers-6.1.0-37-amd64"])
    assert request.query() == ["libcuda1", "libnvidia-encode1", "linux-headers-6.1.0-37-amd64", "nvidia-fabricmanager-535",
                               "nvidia-smi"]


def test_render_pin_groups_by_version():
    text = render_pin({"libcuda1": "1-1", "nvidia-smi": "1-1", "nvidia-persistenced": "2-1"}, "535.1.2", "open")
    assert text == (
        "Explanation: Managed by gpufleet.nvidia.nvidia_driver: pinned with the NVIDIA driver 535.1.2 (open)\n"
        "Package: libcuda1 nvidia-smi\nPin: version 1-1\nPin-Priority: 1001\n\n"
        "Explanation: Managed by gpufleet.nvidia.nvidia_driver: pinned with the NVIDIA driver 535.1.2 (open)\n"
        "Package: nvidia-persistenced\nPin: version 2-1\nPin-Priority: 1001\n"
    )


# --- Ubuntu 24.04 (documented): restricted present, precompiled modules for the running kernel -----

NOBLE = "ubuntu2404/pristine"
N580 = "580.173.02-0ubuntu0.24.04.1"
N580_OLD = "580.159.03-0ubuntu0.24.04.1"
NOBLE_SET = [
    "libnvidia-cfg1-580-server",
    "libnvidia-compute-580-server",
    "nvidia-compute-utils-580-server",
    "nvidia-headless-no-dkms-580-server-open",
    "nvidia-kernel-common-580-server",
    "nvidia-kernel-source-580-server-open",
    "nvidia-utils-580-server",
]


def test_noble_branch_takes_the_precompiled_signed_modules(tmp_path):
    replay = Replay(NOBLE, tmp_path)
    result = run(replay, version="580", flavor="open")
    packages = sorted(["%s=%s" % (n, N580) for n in NOBLE_SET]
                      + ["linux-modules-nvidia-580-server-open-6.8.0-90-generic=6.8.0-90.91+2"])
    assert plan_of(result) == [
        "create /etc/apt/preferences.d/gpufleet-nvidia-driver.pref (pin the driver's packages to their versions)",
        "create /etc/apt/apt.conf.d/51gpufleet-nvidia-driver (keep the driver out of unattended-upgrades)",
        install_argv(*packages),
        "apt-mark hold " + " ".join(sorted(NOBLE_SET + ["linux-modules-nvidia-580-server-open-6.8.0-90-generic"])),
        "create /etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf (blacklist nouveau)",
    ]
    assert result["backend"] == "apt-ubuntu"
    assert result["kernel_modules"] == "precompiled"
    assert result["version"] == "580.173.02"
    assert result["available_versions"] == ["580.159.03", "580.173.02"]
    assert replay.mutations() == []  # check mode: the lists are not refreshed either


def test_noble_precompiled_module_matching_an_older_release(tmp_path):
    result = run(Replay(NOBLE, tmp_path), version="580.159.03", flavor="open")
    assert result["kernel_modules"] == "precompiled"
    assert result["packages"]["linux-modules-nvidia-580-server-open-6.8.0-90-generic"] == "6.8.0-90.91+1"
    assert result["packages"]["nvidia-utils-580-server"] == N580_OLD


def test_noble_proprietary_without_precompiled_modules_uses_dkms(tmp_path):
    result = run(Replay(NOBLE, tmp_path), version="580", flavor="proprietary")
    assert result["kernel_modules"] == "dkms"
    assert result["packages"]["nvidia-dkms-580-server"] == N580
    assert "nvidia-headless-no-dkms-580-server" in result["packages"]
    assert "linux-headers-6.8.0-90-generic=6.8.0-90.91" in result["package_changes"]["install"]
    assert "linux-headers-6.8.0-90-generic" not in result["packages"]  # not pinned: the kernel's


def test_noble_dkms_when_asked(tmp_path):
    result = run(Replay(NOBLE, tmp_path), version="580", flavor="open", kernel_modules="dkms")
    assert result["kernel_modules"] == "dkms"
    assert result["packages"]["nvidia-dkms-580-server-open"] == N580
    assert not any(n.startswith("linux-modules-nvidia") for n in result["packages"])


def test_noble_precompiled_refused_when_it_carries_another_version(tmp_path):
    with pytest.raises(GpuFleetError) as raised:
        run(Replay(NOBLE, tmp_path), version="580.150.01", flavor="open", kernel_modules="precompiled")
    assert raised.value.msg == (
        "nvidia_driver: kernel_modules precompiled: linux-modules-nvidia-580-server-open-6.8.0-90-generic carries "
        "driver 580.159.03, 580.173.02 for the running kernel 6.8.0-90-generic, not 580.150.01; use kernel_modules "
        "auto or dkms, or a version the precompiled modules carry"
    )


def test_noble_unknown_branch_lists_the_branches(tmp_path):
    with pytest.raises(GpuFleetError) as raised:
        run(Replay(NOBLE, tmp_path), version="575", flavor="open")
    assert raised.value.msg.endswith("available: none; branches with -server packages: 535, 550, 570, 580")
    assert raised.value.details["available_branches"] == ["535", "550", "570", "580"]


def test_noble_not_in_a_container(tmp_path):
    result = run(Replay(NOBLE, tmp_path), version="580", flavor="open")
    assert result["in_container"] is False
    assert result["reboot_reason"] == (
        "module not loaded: the running kernel has no loadable modules (/proc/modules does not exist)"
    )


# --- Ubuntu 22.04 (documented): no restricted, 535-server held, move to 580-server-open ------------

JAMMY = "ubuntu2204/installed-535.247.01-proprietary-precompiled"
J580 = "580.173.02-0ubuntu0.22.04.1"


def test_jammy_branch_move(tmp_path):
    replay = Replay(JAMMY, tmp_path)
    result = run(replay, version="580", flavor="open")
    old_held = [
        "libnvidia-cfg1-535-server",
        "libnvidia-compute-535-server",
        "linux-modules-nvidia-535-server-5.15.0-160-generic",
        "nvidia-compute-utils-535-server",
        "nvidia-headless-no-dkms-535-server",
        "nvidia-kernel-common-535-server",
        "nvidia-kernel-source-535-server",
        "nvidia-utils-535-server",
    ]
    new = [
        "libnvidia-cfg1-580-server",
        "libnvidia-compute-580-server",
        "libnvidia-encode-580-server",
        "nvidia-compute-utils-580-server",
        "nvidia-headless-no-dkms-580-server-open",
        "nvidia-kernel-common-580-server",
        "nvidia-kernel-source-580-server-open",
        "nvidia-utils-580-server",
    ]
    removed = [
        "libnvidia-encode-535-server",  # carried along as libnvidia-encode-580-server
        "nvidia-firmware-535-server-535.247.01",  # no such package for 580: the new one comes as a dependency
        "libnvidia-cfg1-535-server",
        "libnvidia-compute-535-server",
        "linux-modules-nvidia-535-server-5.15.0-156-generic",
        "linux-modules-nvidia-535-server-5.15.0-160-generic",
        "linux-objects-nvidia-535-server-5.15.0-160-generic",  # with its modules (apt installed it as their dependency)
        "nvidia-compute-utils-535-server",
        "nvidia-headless-no-dkms-535-server",
        "nvidia-kernel-common-535-server",
        "nvidia-kernel-source-535-server",
        "nvidia-utils-535-server",
    ]
    installs = sorted(["%s=%s" % (n, J580) for n in new]
                      + ["linux-modules-nvidia-580-server-open-5.15.0-160-generic=5.15.0-160.170+1"])
    assert plan_of(result) == [
        "update /etc/apt/sources.list (add restricted to its jammy entries)",
        "apt-get update -q",
        "apt-mark unhold " + " ".join(old_held),
        "create /etc/apt/preferences.d/gpufleet-nvidia-driver.pref (pin the driver's packages to their versions)",
        "create /etc/apt/apt.conf.d/51gpufleet-nvidia-driver (keep the driver out of unattended-upgrades)",
        install_argv(*(installs + ["%s-" % n for n in removed]), purge=True),
        "apt-mark hold " + " ".join(sorted(new + ["linux-modules-nvidia-580-server-open-5.15.0-160-generic"])),
        "create /etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf (blacklist nouveau)",
    ]
    # the toolkit's packages are not the driver's
    assert "nvidia-container-toolkit" not in " ".join(plan_of(result))
    # restricted added to the three distribution lines, nothing else touched
    assert replay.temp_files["sources.list"] == (
        "deb http://mirror.invalid/ubuntu jammy main universe restricted\n"
        "deb http://mirror.invalid/ubuntu jammy-updates main universe restricted\n"
        "deb http://mirror.invalid/ubuntu jammy-security main universe restricted # security\n"
    )
    # the loaded 535 module stays until the reboot
    assert result["reboot_required"] is True


def test_jammy_sources_edit_keeps_the_rest(tmp_path):
    replay = Replay(JAMMY, tmp_path)
    run(replay, check_mode=False, version="580", flavor="open")
    text = replay.read("/etc/apt/sources.list")
    assert "# deb-src http://mirror.invalid/ubuntu jammy main universe\n" in text
    assert "download.docker.example/linux/ubuntu jammy stable\n" in text
    assert text.startswith("# See http://help.ubuntu.com/community/UpgradeNotes")
    assert text.count(" restricted") == 3


# --- the fabric manager on Ubuntu: Canonical's multiverse (DERIVED hosts, see fixtures/driver/hgx) ----

NOBLE_FM = ["libnvidia-nscq-580", "nvidia-fabricmanager-580"]


def noble_hgx(tmp_path, drop=None, **systemd):
    replay = Replay(NOBLE, tmp_path).add_nvswitches().systemd(**systemd)
    replay.answer_fabric_manager(NOBLE_FM, "madison-ubuntu2404-multiverse.txt")
    if drop:  # a fabric manager release the archive does not have (yet)
        for key, (rc, out, err) in list(replay.overrides.items()):
            kept = [line for line in out.splitlines(True)
                    if not (drop in line and ("nscq" in line or "fabric" in line))]
            replay.overrides[key] = (rc, "".join(kept), err)
    return replay


def test_noble_fabric_manager_joins_the_driver(tmp_path):
    replay = noble_hgx(tmp_path)
    result = run(replay, version="580", flavor="open")
    precompiled = "linux-modules-nvidia-580-server-open-6.8.0-90-generic"
    packages = sorted(["%s=%s" % (n, N580) for n in NOBLE_SET + NOBLE_FM] + [precompiled + "=6.8.0-90.91+2"])
    assert plan_of(result) == [
        "create /etc/apt/preferences.d/gpufleet-nvidia-driver.pref (pin the driver's packages to their versions)",
        "create /etc/apt/apt.conf.d/51gpufleet-nvidia-driver (keep the driver out of unattended-upgrades)",
        install_argv(*packages),
        "apt-mark hold " + " ".join(sorted(NOBLE_SET + NOBLE_FM + [precompiled])),
        "create /etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf (blacklist nouveau)",
        "systemctl enable nvidia-fabricmanager",  # no module loaded: it starts at the next boot
    ]
    assert result["packages"]["nvidia-fabricmanager-580"] == N580
    pin = next(d for d in run(noble_hgx(tmp_path / "again"), diff_mode=True, version="580", flavor="open")["diff"]
               if d["after_header"] == PIN_FILE)["after"]
    assert "libnvidia-nscq-580 " in pin.split("Pin: version %s" % N580)[0]
    fm = result["fabric_manager"]
    assert fm["packages"] == {"libnvidia-nscq-580": N580, "nvidia-fabricmanager-580": N580}
    assert fm["action"] == "install, enable"
    assert fm["service"]["enabled"] == "not-found" and fm["service"]["managed"] is True
    assert fm["detail"] == (
        "this host has 4 NVSwitches: fabric manager 580.173.02 would be installed and pinned, enabled "
        "(nvidia-fabricmanager now not-found, inactive); it starts at the next boot, with the driver of its version "
        "loaded"
    )
    assert replay.mutations() == []  # check mode: no systemctl enable either


def test_noble_fabric_manager_started_with_the_driver_loaded(tmp_path):
    replay = noble_hgx(tmp_path).load_driver("580.173.02")
    result = run(replay, check_mode=False, version="580", flavor="open")
    assert plan_of(result)[-2:] == ["systemctl enable nvidia-fabricmanager", "systemctl start nvidia-fabricmanager"]
    assert result["fabric_manager"]["service"]["active"] == "active"
    assert result["kernel_module"]["state"] == "current"


def test_noble_branch_takes_the_newest_release_with_a_fabric_manager(tmp_path):
    result = run(noble_hgx(tmp_path, drop="580.173.02"), version="580", flavor="open")
    assert result["version"] == "580.159.03"
    assert result["kernel_modules"] == "precompiled"
    assert result["packages"]["linux-modules-nvidia-580-server-open-6.8.0-90-generic"] == "6.8.0-90.91+1"
    assert result["packages"]["nvidia-fabricmanager-580"] == N580_OLD
    assert result["available_versions"] == ["580.159.03", "580.173.02"]
    assert (
        "fabric manager: Ubuntu's multiverse (ubuntu 24.04) has no libnvidia-nscq-580 / nvidia-fabricmanager-580 at "
        "580.173.02; 580.159.03 is the newest release of 580 with one" in result["notes"]
    )


def test_noble_release_without_a_fabric_manager_fails_before_any_change(tmp_path):
    replay = noble_hgx(tmp_path, drop="580.173.02")
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version="580.173.02", flavor="open")
    assert raised.value.msg == (
        "nvidia_driver: fabric_manager: this host has 4 NVSwitches, and NVIDIA's fabric manager must run at exactly "
        "the driver's version, but Ubuntu's multiverse (ubuntu 24.04) has no libnvidia-nscq-580 / "
        "nvidia-fabricmanager-580 at 580.173.02 (fabric manager versions there: 580.159.03); choose a driver version "
        "that has one, or set fabric_manager to never to install the driver alone"
    )
    assert [c for c in replay.mutations() if c[:2] != ["apt-get", "update"]] == []
    assert replay.read(PIN_FILE) is None


def test_jammy_fabric_manager_adds_multiverse_and_moves_off_the_old_branch(tmp_path):
    replay = Replay(JAMMY, tmp_path).add_nvswitches().systemd(enabled="enabled", active="active")
    dpkg = replay.commands[json.dumps(apt.DPKG_QUERY)]
    old_fm = ["libnvidia-nscq-535", "nvidia-fabricmanager-535"]
    replay.overrides[json.dumps(apt.DPKG_QUERY)] = (
        dpkg[0], dpkg[1] + "".join("%s\t535.247.01-0ubuntu0.22.04.1\thi \n" % n for n in old_fm), dpkg[2])
    replay.answer_fabric_manager(NOBLE_FM, "madison-ubuntu2204-multiverse.txt", installed=old_fm)
    result = run(replay, version="580", flavor="open")
    plan = plan_of(result)
    assert plan[0] == "update /etc/apt/sources.list (add multiverse restricted to its jammy entries)"
    assert replay.temp_files["sources.list"] == (
        "deb http://mirror.invalid/ubuntu jammy main universe restricted multiverse\n"
        "deb http://mirror.invalid/ubuntu jammy-updates main universe restricted multiverse\n"
        "deb http://mirror.invalid/ubuntu jammy-security main universe restricted multiverse # security\n"
    )
    unhold = plan[2].split(" ")[2:]
    assert "libnvidia-nscq-535" in unhold and "nvidia-fabricmanager-535" in unhold
    install = plan[5]
    assert "nvidia-fabricmanager-580=580.173.02-0ubuntu0.22.04.1" in install.split(" ")
    assert "libnvidia-nscq-580=580.173.02-0ubuntu0.22.04.1" in install.split(" ")
    assert "nvidia-fabricmanager-535-" in install.split(" ") and "libnvidia-nscq-535-" in install.split(" ")
    assert plan[6].startswith("apt-mark hold ") and "nvidia-fabricmanager-580" in plan[6].split(" ")
    # enabled and running (535): it moves, and starts with the 580 module after the reboot
    assert not any(p.startswith("systemctl") for p in plan)
    assert result["fabric_manager"]["installed_version"] == "535.247.01"
    assert result["fabric_manager"]["action"] == "remove, install"
    assert any(n.startswith("nvidia-fabricmanager starts at the next boot, with the driver 580.173.02 loaded")
               for n in result["notes"])
