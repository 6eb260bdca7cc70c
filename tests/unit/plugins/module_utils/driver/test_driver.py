"""Tests of module_utils/driver.py and the Debian backend, replayed from the recorded hosts (see replay.py).

The Debian fixtures are real (captured in the lab containers with capture-debian.sh); the plans
asserted here are the ones the module carried out there.
"""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import install as driver
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.host_state import module_state
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.preinstalled import (
    declared_drift,
    preinstalled_module_state,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import apt
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_holds import (
    PIN_FILE,
    UU_FILE,
    render_pin,
    render_unattended,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_layouts import (
    DebianLayout,
    UbuntuLayout,
    packaged_driver,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import dnf
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import fabric_manager
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.driver.replay import (
    D12_INSTALLED,
    D12_PRISTINE,
    D13_INSTALLED,
    D13_PRISTINE,
    FIXTURES,
    FM_UNIT,
    HGX,
    Replay,
    install_argv,
    plan_of,
    run,
)

D12_COMMON = [
    "firmware-nvidia-gsp",
    "libcuda1",
    "libnvidia-cfg1",
    "libnvidia-ml1",
    "libnvidia-pkcs11-openssl3",
    "libnvidia-ptxjitcompiler1",
    "nvidia-alternative",
]
PROPRIETARY_HELD = D12_COMMON + ["nvidia-kernel-dkms", "nvidia-kernel-support", "nvidia-legacy-check"]


def versioned(names, version):
    return ["%s=%s" % (n, version) for n in names]


# --- Debian 12: the image as built (one-line sources.list, main only, no driver) -----------------


def test_d12_pristine_plan(tmp_path):
    replay = Replay(D12_PRISTINE, tmp_path)
    result = run(replay, version="535.261.03", flavor="proprietary")
    packages = versioned(PROPRIETARY_HELD, "535.261.03-1") + [
        "nvidia-modprobe=535.309.01-0+deb12u1",
        "nvidia-persistenced=535.171.04-1~deb12u1",
        "nvidia-smi=535.261.03-1",
    ]
    held = PROPRIETARY_HELD + ["nvidia-modprobe", "nvidia-persistenced", "nvidia-smi"]
    assert plan_of(result) == [
        "update /etc/apt/sources.list (add contrib non-free non-free-firmware to its bookworm entries)",
        "apt-get update -q",
        "create /etc/apt/preferences.d/gpufleet-nvidia-driver.pref (pin the driver's packages to their versions)",
        "create /etc/apt/apt.conf.d/51gpufleet-nvidia-driver (keep the driver out of unattended-upgrades)",
        install_argv(*packages),
        "apt-mark hold " + " ".join(held),
        "create /etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf (blacklist nouveau)",
    ]
    assert result["changed"] is True
    assert result["version"] == "535.261.03"
    assert result["available_versions"] == ["535.261.03", "535.309.01"]
    assert result["backend"] == "apt-debian"
    assert result["kernel_modules"] == "dkms"
    # the archive was read through a temporary configuration, the host's left alone
    assert replay.mutations() == []
    assert replay.read("/etc/apt/sources.list") == (
        "deb http://mirror.invalid/debian bookworm main\n"
        "deb http://mirror.invalid/debian bookworm-updates main\n"
        "deb http://mirror.invalid/debian-security bookworm-security main\n"
    )
    assert replay.temp_files["sources.list"] == (
        "deb http://mirror.invalid/debian bookworm main contrib non-free non-free-firmware\n"
        "deb http://mirror.invalid/debian bookworm-updates main contrib non-free non-free-firmware\n"
        "deb http://mirror.invalid/debian-security bookworm-security main contrib non-free non-free-firmware\n"
    )
    assert not os.listdir(replay.tmp)  # the temporary configuration is gone
    # a container: no module, and the reason says so
    assert result["reboot_required"] is True
    assert result["in_container"] is True and result["container"] == "podman"
    assert result["kernel_module"]["state"] == "not_loaded"
    assert result["reboot_reason"].startswith("module not loaded: this is a podman container")
    assert "linux-headers-6.18.44-fc-v595 is not in the repositories: DKMS cannot build" in " ".join(result["notes"])
    assert result["nouveau"]["initramfs"] == "not regenerated: update-initramfs is not installed (no initramfs tooling)"


def test_d12_branch_is_the_newest_release(tmp_path):
    result = run(Replay(D12_PRISTINE, tmp_path), version="535", flavor="proprietary")
    assert result["version"] == "535.309.01"
    assert result["version_requested"] == "535"
    assert result["packages"]["libcuda1"] == "535.309.01-0+deb12u1"
    assert result["packages"]["nvidia-persistenced"] == "535.171.04-1~deb12u1"
    assert install_argv(
        *(versioned(PROPRIETARY_HELD, "535.309.01-0+deb12u1") + [
            "nvidia-modprobe=535.309.01-0+deb12u1",
            "nvidia-persistenced=535.171.04-1~deb12u1",
            "nvidia-smi=535.309.01-0+deb12u1",
        ])
    ) in plan_of(result)


@pytest.mark.parametrize(
    "version, flavor, available",
    [
        ("535.309.01", "open", ["535.261.03"]),  # the open module is only in the point release
        ("999.1.2", "proprietary", ["535.261.03", "535.309.01"]),
        ("550", "proprietary", ["535.261.03", "535.309.01"]),
    ],
)
def test_d12_unavailable_version_fails_before_any_change(tmp_path, version, flavor, available):
    replay = Replay(D12_PRISTINE, tmp_path, overrides={})
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version=version, flavor=flavor)
    assert raised.value.msg == (
        "nvidia_driver: version %s (%s) is not available from Debian's non-free, contrib and non-free-firmware "
        "(debian 12); available: %s" % (version, flavor, ", ".join(available))
    )
    assert raised.value.details["available_versions"] == available
    assert replay.mutations() == []
    assert replay.read("/etc/apt/sources.list").count("non-free") == 0


@pytest.mark.parametrize("version", ["5x5", "580.95.05.1", "latest", ""])
def test_malformed_version_fails_before_reading_anything(tmp_path, version):
    replay = Replay(D12_PRISTINE, tmp_path)
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version=version)
    assert "nvidia_driver: version" in raised.value.msg
    assert replay.calls == []


def test_d12_execute_writes_and_runs_in_order(tmp_path):
    replay = Replay(D12_PRISTINE, tmp_path)
    result = run(replay, check_mode=False, version="535.261.03", flavor="proprietary")
    assert result["changed"] is True
    assert result["executed"][0] == "wrote /etc/apt/sources.list"
    mutations = [" ".join(c[:2]) for c in replay.mutations()]
    assert mutations == ["apt-get update", "apt-get install", "apt-mark hold"]
    assert replay.read("/etc/apt/sources.list").count("main contrib non-free non-free-firmware") == 3
    pin = replay.read(PIN_FILE)
    assert "Package: firmware-nvidia-gsp libcuda1 libnvidia-cfg1 libnvidia-ml1 libnvidia-pkcs11-openssl3 " \
        "libnvidia-ptxjitcompiler1 nvidia-alternative nvidia-kernel-dkms nvidia-kernel-support nvidia-legacy-check " \
        "nvidia-smi\nPin: version 535.261.03-1\nPin-Priority: 1001\n" in pin
    assert "Package: nvidia-persistenced\nPin: version 535.171.04-1~deb12u1\nPin-Priority: 1001\n" in pin
    assert '    "^libcuda1$";\n' in replay.read(UU_FILE)
    assert replay.read(driver.NOUVEAU_FILE) == driver.NOUVEAU_CONTENT


def test_d12_diff_shows_packages_and_files(tmp_path):
    result = run(Replay(D12_PRISTINE, tmp_path), diff_mode=True, version="535.261.03", flavor="proprietary")
    headers = [d["after_header"] for d in result["diff"]]
    assert headers == [
        "packages",
        "/etc/apt/sources.list",
        PIN_FILE,
        UU_FILE,
        driver.NOUVEAU_FILE,
    ]
    packages = result["diff"][0]
    assert packages["before"] == ""
    assert "libcuda1=535.261.03-1 (held)\n" in packages["after"]
    sources = result["diff"][1]
    assert sources["before"].endswith("bookworm-security main\n")
    assert sources["after"].endswith("bookworm-security main contrib non-free non-free-firmware\n")
    assert result["diff"][2]["before_header"] == PIN_FILE + " (absent)"


def test_d12_failure_says_what_was_done(tmp_path):
    replay = Replay(D12_PRISTINE, tmp_path)
    plan = run(replay, version="535.261.03", flavor="proprietary")["plan"]
    argv = [a.strip("'") for a in plan[4].split(" ")]
    replay = Replay(D12_PRISTINE, tmp_path / "again", overrides={tuple(argv): (100, "", "E: Unable to fetch some archives")})
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version="535.261.03", flavor="proprietary")
    assert "failed (exit 100): E: Unable to fetch some archives; done before it: wrote /etc/apt/sources.list; " \
        "apt-get update -q; wrote /etc/apt/preferences.d/gpufleet-nvidia-driver.pref" in raised.value.msg
    assert raised.value.details["rc"] == 100


def test_failure_message_says_why_apt_refused(tmp_path):
    """apt-get prints the unmet dependency on stdout, only "held broken packages" on stderr: the message has both.

    The output is apt 2.6.1's, captured on the stand-in Ubuntu 24.04 node (scenario ubuntu2404).
    """
    captured = os.path.join(FIXTURES, "ubuntu2404-standin", "apt-get-install-unmet-dependencies")
    with open(os.path.join(captured, "stdout.txt")) as handle:
        out = handle.read()
    with open(os.path.join(captured, "stderr.txt")) as handle:
        err = handle.read()
    replay = Replay(D12_PRISTINE, tmp_path)
    plan = run(replay, version="535.261.03", flavor="proprietary")["plan"]
    argv = [a.strip("'") for a in plan[4].split(" ")]
    replay = Replay(D12_PRISTINE, tmp_path / "again", overrides={tuple(argv): (100, out, err)})
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version="535.261.03", flavor="proprietary")
    msg = raised.value.msg
    assert "failed (exit 100): E: Unable to correct problems, you have held broken packages." in msg
    assert "nvidia-compute-utils-570-server : Depends: gpufleet-missing-dependency but it is not installable" in msg
    assert msg.index("gpufleet-missing-dependency") < msg.index("; done before it: ")


# --- Debian 12 with 535.261.03 (proprietary) installed by the module --------------------------------


def test_d12_installed_same_version_changes_nothing(tmp_path):
    replay = Replay(D12_INSTALLED, tmp_path)
    for check_mode in (True, False):
        result = run(replay, check_mode=check_mode, version="535.261.03", flavor="proprietary")
        assert result["changed"] is False
        assert result["plan"] == []
    # check mode does not refresh the lists; a real run does, when they are stale (not a change)
    assert replay.mutations() == [["apt-get", "update", "-q"]]


def test_d12_move_to_the_security_release(tmp_path):
    result = run(Replay(D12_INSTALLED, tmp_path), version="535", flavor="proprietary")
    moved = PROPRIETARY_HELD + ["nvidia-smi"]
    assert plan_of(result) == [
        "apt-mark unhold " + " ".join(moved),
        "update /etc/apt/preferences.d/gpufleet-nvidia-driver.pref (pin the driver's packages to their versions)",
        "update /etc/apt/apt.conf.d/51gpufleet-nvidia-driver (keep the driver out of unattended-upgrades)",
        install_argv(*versioned(moved, "535.309.01-0+deb12u1")),
        "apt-mark hold " + " ".join(moved),
    ]
    assert result["package_changes"]["remove"] == []
    assert result["packages"]["nvidia-persistenced"] == "535.171.04-1~deb12u1"


def test_d12_switch_to_the_open_flavour(tmp_path):
    result = run(Replay(D12_INSTALLED, tmp_path), version="535.261.03", flavor="open")
    assert plan_of(result) == [
        "apt-mark unhold nvidia-kernel-dkms nvidia-kernel-support",
        "update /etc/apt/preferences.d/gpufleet-nvidia-driver.pref (pin the driver's packages to their versions)",
        "update /etc/apt/apt.conf.d/51gpufleet-nvidia-driver (keep the driver out of unattended-upgrades)",
        install_argv(
            "nvidia-open-kernel-dkms=535.261.03-1",
            "nvidia-open-kernel-support=535.261.03-1",
            "nvidia-kernel-dkms-",
            "nvidia-kernel-support-",
            purge=True,
        ),
        "apt-mark hold nvidia-open-kernel-dkms nvidia-open-kernel-support",
    ]


def test_d12_absent_removes_everything_it_installed(tmp_path):
    replay = Replay(D12_INSTALLED, tmp_path)
    result = run(replay, check_mode=False, state="absent")
    every = PROPRIETARY_HELD + ["nvidia-modprobe", "nvidia-persistenced", "nvidia-smi"]
    assert plan_of(result) == [
        "apt-mark unhold " + " ".join(every),
        "apt-get purge -y -q " + " ".join(every),
        "remove /etc/apt/preferences.d/gpufleet-nvidia-driver.pref (no driver to pin)",
        "remove /etc/apt/apt.conf.d/51gpufleet-nvidia-driver (no driver to keep back)",
        "remove /etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf (nouveau no longer blacklisted by this module)",
    ]
    assert replay.read(PIN_FILE) is None and replay.read(driver.NOUVEAU_FILE) is None
    assert result["reboot_required"] is False  # nothing was loaded


# --- Debian 13: deb822 sources ----------------------------------------------------------------------


def test_d13_pristine_edits_deb822(tmp_path):
    replay = Replay(D13_PRISTINE, tmp_path)
    result = run(replay, check_mode=False, version="550", flavor="proprietary")
    assert result["version"] == "550.163.01"
    assert replay.read("/etc/apt/sources.list.d/debian.sources") == (
        "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: trixie trixie-updates\n"
        "Components: main contrib non-free non-free-firmware\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        "Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: trixie-security\n"
        "Components: main contrib non-free non-free-firmware\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
    assert replay.temp_files["sources.list.d/gpufleet.sources"] == (
        "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: trixie trixie-updates\n"
        "Components: main contrib non-free non-free-firmware\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        "Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: trixie-security\n"
        "Components: main contrib non-free non-free-firmware\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
    assert result["packages"]["nvidia-modprobe"] == "570.133.07-1"
    assert result["packages"]["nvidia-persistenced"] == "550.163.01-1"


def test_d13_has_one_release_only(tmp_path):
    with pytest.raises(GpuFleetError) as raised:
        run(Replay(D13_PRISTINE, tmp_path), version="580", flavor="open")
    assert raised.value.details["available_versions"] == ["550.163.01"]


def test_d13_switch_flavour(tmp_path):
    result = run(Replay(D13_INSTALLED, tmp_path), version="550", flavor="open")
    assert install_argv(
        "nvidia-open-kernel-dkms=550.163.01-2",
        "nvidia-open-kernel-support=550.163.01-2",
        "nvidia-kernel-dkms-",
        "nvidia-kernel-support-",
        purge=True,
    ) in plan_of(result)
    assert result["packages"]["nvidia-open-kernel-dkms"] == "550.163.01-2"
    assert "nvidia-kernel-dkms" not in result["packages"]


# --- kernel module, flavour, pre-installed -----------------------------------------------------------


@pytest.mark.parametrize(
    "kmod, desired, container, state, expected",
    [
        ({"loaded": True, "loaded_version": "535.261.03"}, "535.261.03", None, "present", ("current", False)),
        ({"loaded": True, "loaded_version": "535.261.03"}, "535.309.01", None, "present", ("outdated", True)),
        ({"loaded": False, "installed_version": "535.309.01"}, "535.309.01", None, "present", ("not_loaded", True)),
        ({"loaded": False}, "535.309.01", "podman", "present", ("not_loaded", True)),
        ({"loaded": True, "loaded_version": "535.261.03"}, None, None, "absent", ("loaded_removed", True)),
        ({"loaded": False}, None, None, "absent", ("absent", False)),
    ],
)
def test_module_state(kmod, desired, container, state, expected):
    base = {"loaded": False, "loaded_version": None, "installed_version": None, "proc_modules": True}
    base.update(kmod)
    mstate, reboot, reason = module_state(base, desired, container, state)
    assert (mstate, reboot) == expected
    if expected[0] == "not_loaded":
        assert reason.startswith("module not loaded")
    if container:
        assert "podman container" in reason


def test_loaded_module_is_read(tmp_path):
    replay = Replay(
        D12_INSTALLED,
        tmp_path,
        files={
            "/proc/modules": "nvidia_uvm 1437696 0 - Live 0x0000000000000000 (POE)\nnvidia 56655872 1 nvidia_uvm, Live 0x0000000000000000 (POE)\n",
            "/proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03  Wed Jun 25 "
            "19:52:15 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n",
            "/sys/module/nvidia/version": "535.261.03\n",
        },
    )
    os.remove(os.path.join(replay.root, "run/systemd/container"))
    os.remove(os.path.join(replay.root, "run/.containerenv"))
    current = run(replay, version="535.261.03", flavor="proprietary")
    assert current["kernel_module"]["state"] == "current" and current["reboot_required"] is False
    moved = run(replay, version="535", flavor="proprietary")
    assert moved["kernel_module"]["state"] == "outdated" and moved["reboot_required"] is True
    assert "driver/library version mismatch" in moved["reboot_reason"]


@pytest.mark.parametrize("version, flavor", [("535", "proprietary"), ("550.163.01", "proprietary"),
                                             ("560", "open"), ("580.95.05", "open")])
def test_flavor_auto_without_gpus_follows_nvidias_default(tmp_path, version, flavor):
    system = Replay(D12_PRISTINE, tmp_path).system()
    chosen, reason = driver.resolve_flavor(system, "auto", driver.versions.parse_driver_version(version))
    assert chosen == flavor and reason.startswith("flavor auto")


def test_preinstalled_reports_drift_and_changes_nothing(tmp_path):
    # nvidia-smi is there and fails (no module in a container), modinfo finds nothing: the version
    # comes from the packages (recorded in the lab)
    replay = Replay(D12_INSTALLED, tmp_path)
    result = run(replay, check_mode=False, method="preinstalled", version="535.309.01", flavor="open")
    assert result["changed"] is False
    assert result["version"] == "535.261.03"
    assert result["version_source"] == "package libcuda1"
    assert result["flavor"] == "proprietary"
    assert result["drift"] is True
    assert result["drift_detail"] == ["version 535.261.03, declared 535.309.01", "flavour proprietary, declared open"]
    assert result["plan"] == [] and replay.mutations() == []
    same = run(replay, method="preinstalled", version="535", flavor="proprietary")
    assert same["drift"] is False and same["drift_detail"] == []


def test_preinstalled_without_a_driver_fails(tmp_path):
    replay = Replay(D12_PRISTINE, tmp_path)
    with pytest.raises(GpuFleetError) as raised:
        run(replay, method="preinstalled", version="535")
    assert raised.value.msg.startswith("method preinstalled: no NVIDIA driver on this host")
    assert replay.mutations() == []


@pytest.mark.parametrize(
    "params, version, flavor, drift",
    [
        ({"version": "535", "flavor": "proprietary"}, "535.261.03", "proprietary", []),
        ({"version": "535.309.01", "flavor": "auto"}, "535.261.03", "open", ["version 535.261.03, declared 535.309.01"]),
        ({"version": "580"}, None, None,
         ["the installed driver's version could not be read (no loaded module, nvidia-smi or modinfo)"]),
        ({"version": None, "flavor": "open"}, "535.261.03", "proprietary", ["flavour proprietary, declared open"]),
        ({"version": None, "flavor": "open"}, None, None, []),
    ],
)
def test_declared_drift(params, version, flavor, drift):
    parsed = driver.versions.parse_driver_version(version) if version else None
    assert declared_drift(params, parsed, flavor) == drift


@pytest.mark.parametrize(
    "kmod, expected",
    [
        ({"loaded": True, "loaded_version": "535.261.03", "installed_version": "535.309.01"},
         ("outdated", True, "the loaded nvidia module is 535.261.03, the installed one 535.309.01: reboot to load it")),
        ({"loaded": True, "loaded_version": "535.261.03", "installed_version": "535.261.03"},
         ("current", False, "the nvidia module 535.261.03 is loaded")),
    ],
)
def test_preinstalled_module_state(kmod, expected):
    version = driver.versions.parse_driver_version("535.261.03")
    assert preinstalled_module_state(kmod, version, None) == expected


class Answers(object):
    """A host whose commands answer from a table, ``{argv tuple: (rc, stdout, stderr)}``."""

    def __init__(self, answers):
        self.answers = answers

    def run(self, argv, env=None):
        return self.answers[tuple(argv)]


@pytest.mark.parametrize(
    "lines, expected",
    [
        (["libcuda1\t535.261.03-1\thi", "nvidia-kernel-dkms\t535.261.03-1\tii"],
         {"name": "libcuda1", "version": "535.261.03-1", "flavor": "proprietary"}),
        (["libnvidia-compute-580-server\t580.95.05-0ubuntu1\tii",
          "linux-modules-nvidia-580-server-open-6.8.0-48-generic\t6.8.0-48.48+1\tii"],
         {"name": "libnvidia-compute-580-server", "version": "580.95.05-0ubuntu1", "flavor": "open"}),
        (["nvidia-open-kernel-dkms\t550.163.01-2\tii"], {"name": "nvidia-open-kernel-dkms", "version": None, "flavor": "open"}),
        (["nvidia-smi\t535.261.03-1\tii", "libcuda1\t535.261.03-1\tun"], None),
    ],
)
def test_packaged_driver_from_dpkg(lines, expected):
    host = Answers({tuple(apt.DPKG_QUERY): (0, "".join(line + "\n" for line in lines), "")})
    assert packaged_driver(host) == expected


@pytest.mark.parametrize(
    "out, expected",
    [
        ("nvidia-driver-cuda\t3:570.172.08-1.el9\nkmod-nvidia-open-dkms\t3:570.172.08-1.el9\n",
         {"name": "nvidia-driver-cuda", "version": "3:570.172.08-1.el9", "flavor": "open"}),
        ("package nvidia-driver-cuda is not installed\nkmod-nvidia-latest-dkms\t3:570.172.08-1.el9\n",
         {"name": "kmod-nvidia-latest-dkms", "version": "3:570.172.08-1.el9", "flavor": "proprietary"}),
        ("package nvidia-driver-cuda is not installed\n", None),
    ],
)
def test_packaged_driver_from_rpm(out, expected):
    host = Answers({tuple(["rpm", "-q", "--qf", dnf.RPM_QF] + dnf.DRIVER_RPMS): (1, out, "")})
    assert dnf.packaged_driver(host) == expected


@pytest.mark.parametrize(
    "params, message",
    [
        ({"version": None}, "version is required with method package and state present"),
        ({"method": "preinstalled", "state": "absent"}, "state absent with method preinstalled"),
    ],
)
def test_parameter_rules(tmp_path, params, message):
    replay = Replay(D12_PRISTINE, tmp_path)
    with pytest.raises(GpuFleetError) as raised:
        run(replay, **params)
    assert message in raised.value.msg
    assert replay.calls == []


def test_unsupported_os_for_the_package_method(tmp_path):
    replay = Replay(D12_PRISTINE, tmp_path, files={"/etc/os-release": 'ID=fedora\nVERSION_ID="41"\n'})
    with pytest.raises(GpuFleetError) as raised:
        run(replay, version="580")
    assert "method package does not support fedora 41" in raised.value.msg
    assert "use method preinstalled" in raised.value.msg


def test_initramfs_regenerated_when_the_host_has_one(tmp_path):
    replay = Replay(D12_PRISTINE, tmp_path, files={"/boot/initrd.img-6.18.44-fc-v595": "",
                                                   "/usr/sbin/update-initramfs": "#!/bin/sh\n"})
    os.chmod(os.path.join(replay.root, "usr/sbin/update-initramfs"), 0o755)
    result = run(replay, version="535.261.03", flavor="proprietary")
    assert result["plan"][-1] == "update-initramfs -u -k 6.18.44-fc-v595"
    assert result["nouveau"]["initramfs"] == "regenerated: update-initramfs -u -k 6.18.44-fc-v595"


def test_no_nouveau_blacklist_when_asked(tmp_path):
    result = run(Replay(D12_INSTALLED, tmp_path), version="535.261.03", flavor="proprietary", blacklist_nouveau=False)
    assert result["plan"] == [
        "remove /etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf (nouveau no longer blacklisted by this module)"
    ]


def test_d12_without_a_debian_entry_says_why_nothing_is_available(tmp_path):
    layout = DebianLayout("6.18.44-fc-v595")
    names = sorted(layout.core(535, "proprietary", "dkms") + layout.headers())
    replay = Replay(
        D12_PRISTINE,
        tmp_path,
        files={"/etc/apt/sources.list": "deb http://mirror.invalid/local-mirror stable main\n"},
        overrides={
            tuple(["apt-cache", "madison"] + names): (0, "", "N: Unable to locate package nvidia-smi\n"),
            ("apt-cache", "policy", "nvidia-persistenced", "nvidia-modprobe"): (0, "", ""),
        },
    )
    with pytest.raises(GpuFleetError) as raised:
        run(replay, version="535", flavor="proprietary")
    assert raised.value.msg.endswith(
        "available: none (none at all: no bookworm entry with main in the apt sources gets contrib non-free "
        "non-free-firmware from this module; add the components to the entries that hold Debian's archive)"
    )
    assert replay.read("/etc/apt/sources.list") == "deb http://mirror.invalid/local-mirror stable main\n"


# --- the fabric manager on Debian: not in Debian's archive (DERIVED hosts, see fixtures/driver/hgx) ---

D12_FM = ["libnvidia-nscq-535", "nvidia-fabricmanager-535"]
DEBIAN_FM_MESSAGE = (
    "nvidia_driver: fabric_manager: this host has 4 NVSwitches, and NVIDIA's fabric manager must run at exactly the "
    "driver's version, but Debian's archive does not package the fabric manager and no apt source read has "
    "libnvidia-nscq-535 / nvidia-fabricmanager-535%s; nothing was changed. Add NVIDIA's CUDA repository for "
    "Debian (https://developer.download.nvidia.com/compute/cuda/repos/) to the apt sources and choose a driver "
    "version it carries, use method preinstalled for a driver installed with its fabric manager by other means, "
    "or set fabric_manager to never to install the driver alone"
)


@pytest.mark.parametrize(
    "names, expected",
    [
        (("ubuntu", 535), ["libnvidia-nscq-535", "nvidia-fabricmanager-535"]),
        (("ubuntu", 580), ["libnvidia-nscq-580", "nvidia-fabricmanager-580"]),  # Canonical keeps the branch
        (("cuda-apt", 570), ["libnvidia-nscq-570", "nvidia-fabricmanager-570"]),
        (("cuda-apt", 580), ["libnvidia-nscq", "nvidia-fabricmanager"]),  # NVIDIA dropped it at R580
        (("cuda-rpm", 535), ["libnvidia-nscq-535", "nvidia-fabric-manager"]),
        (("cuda-rpm", 575), ["libnvidia-nscq-575", "nvidia-fabric-manager"]),
        (("cuda-rpm", 590), ["libnvidia-nscq", "nvidia-fabricmanager"]),
    ],
)
def test_fabric_manager_package_names(names, expected):
    assert fabric_manager.packages(*names) == expected


@pytest.mark.parametrize(
    "name, family",
    [
        ("nvidia-fabricmanager-535", True), ("nvidia-fabricmanager", True), ("nvidia-fabricmanager-dev-580", True),
        ("nvidia-fabric-manager", True), ("nvidia-fabric-manager-devel", True), ("libnvidia-nscq-570", True),
        ("libnvidia-nscq", True), ("cuda-drivers-fabricmanager-535", True),
        ("nvidia-smi", False), ("libnvidia-compute-580-server", False), ("nvidia-fabricmanager-tools", False),
    ],
)
def test_fabric_manager_family(name, family):
    assert bool(fabric_manager.FAMILY.match(name)) is family


@pytest.mark.parametrize(
    "mode, nvswitches, required, reason",
    [
        ("auto", ["0000:05:00.0", "0000:06:00.0"], True, "this host has 2 NVSwitches"),
        ("auto", [], False, "no NVSwitch on this host"),
        ("always", [], True, "fabric_manager is always"),
        ("never", ["0000:05:00.0"], False, "fabric_manager is never (the host has 1 NVSwitch)"),
    ],
)
def test_fabric_manager_need(mode, nvswitches, required, reason):
    need = fabric_manager.Need(mode, nvswitches)
    assert (need.required, need.reason) == (required, reason)


def test_nvswitches_are_read_from_sysfs(tmp_path):
    replay = Replay(D12_INSTALLED, tmp_path).add_nvswitches()
    need = fabric_manager.read_need(replay.system(), "auto")
    assert need.nvswitches == ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"]
    assert need.required is True
    assert replay.calls == []  # sysfs only, no command


def test_d12_fabric_manager_fails_before_any_change_from_debians_archive(tmp_path):
    replay = Replay(D12_PRISTINE, tmp_path).add_nvswitches().answer_fabric_manager(D12_FM)
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version="535", flavor="proprietary")
    assert raised.value.msg == DEBIAN_FM_MESSAGE % (
        " (the sources lack contrib non-free non-free-firmware, so only Debian's entries were read, through a "
        "temporary configuration)"
    )
    assert raised.value.details["fabric_manager_packages"] == D12_FM
    assert replay.mutations() == []
    assert "non-free" not in replay.read("/etc/apt/sources.list")
    assert not os.listdir(replay.tmp)


def test_d12_fabric_manager_missing_with_complete_sources(tmp_path):
    replay = Replay(D12_INSTALLED, tmp_path).add_nvswitches().answer_fabric_manager(D12_FM)
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version="535.261.03", flavor="proprietary")
    assert raised.value.msg == DEBIAN_FM_MESSAGE % ""
    assert replay.mutations() == [["apt-get", "update", "-q"]]  # the lists only, as without a fabric manager
    assert replay.read(PIN_FILE) == Replay(D12_INSTALLED, tmp_path / "again").read(PIN_FILE)


def test_d12_unavailable_driver_still_says_so_first(tmp_path):
    # (from R580 on, NVIDIA's repository names them without the branch)
    replay = Replay(D12_INSTALLED, tmp_path).add_nvswitches()
    replay.answer_fabric_manager(["libnvidia-nscq", "nvidia-fabricmanager"])
    with pytest.raises(GpuFleetError) as raised:
        run(replay, version="580", flavor="proprietary")
    assert raised.value.msg.startswith("nvidia_driver: version 580 (proprietary) is not available from Debian's")


def test_d12_fabric_manager_from_nvidias_repository_is_pinned_with_the_driver(tmp_path):
    replay = Replay(D12_INSTALLED, tmp_path).add_nvswitches()
    replay.answer_fabric_manager(D12_FM, "madison-debian12-cuda-repository.txt")
    result = run(replay, check_mode=False, version="535.261.03", flavor="proprietary")
    assert plan_of(result) == [
        "update /etc/apt/preferences.d/gpufleet-nvidia-driver.pref (pin the driver's packages to their versions)",
        "update /etc/apt/apt.conf.d/51gpufleet-nvidia-driver (keep the driver out of unattended-upgrades)",
        install_argv("libnvidia-nscq-535=535.261.03-1", "nvidia-fabricmanager-535=535.261.03-1"),
        "apt-mark hold libnvidia-nscq-535 nvidia-fabricmanager-535",
    ]
    pin = replay.read(PIN_FILE)
    # the fabric manager in the driver's own stanza: the same package version
    assert "Package: firmware-nvidia-gsp libcuda1 libnvidia-cfg1 libnvidia-ml1 libnvidia-nscq-535 " \
        "libnvidia-pkcs11-openssl3 libnvidia-ptxjitcompiler1 nvidia-alternative nvidia-fabricmanager-535 " \
        "nvidia-kernel-dkms nvidia-kernel-support nvidia-legacy-check nvidia-smi\nPin: version 535.261.03-1\n" in pin
    assert '    "^nvidia-fabricmanager-535$";\n' in replay.read(UU_FILE)
    fm = result["fabric_manager"]
    assert fm["packages"] == {"libnvidia-nscq-535": "535.261.03-1", "nvidia-fabricmanager-535": "535.261.03-1"}
    assert (fm["required"], fm["wanted_version"], fm["installed_version"]) == (True, "535.261.03", None)
    # a podman container: no systemd to run the service, and the result says so
    assert fm["service"]["managed"] is False
    assert fm["action"] == "install"
    assert fm["detail"] == (
        "this host has 4 NVSwitches: fabric manager 535.261.03 installed and pinned; nvidia-fabricmanager not "
        "managed: this is a podman container, where no systemd runs the host's services: enable and start "
        "nvidia-fabricmanager on the host"
    )
    assert "nvidia-fabricmanager is not enabled or started by this module: this is a podman container" in " ".join(
        result["notes"])
    assert not any(c[0] == "systemctl" for c in replay.calls)


def test_d12_fabric_manager_newest_release_with_one(tmp_path):
    # NVIDIA's repository has the fabric manager at 535.261.03, not at the newer 535.309.01 of
    # bookworm-security: the branch resolves to the newest release with a fabric manager.
    replay = Replay(D12_INSTALLED, tmp_path).add_nvswitches()
    replay.answer_fabric_manager(D12_FM, "madison-debian12-cuda-repository.txt")
    result = run(replay, version="535", flavor="proprietary")
    assert result["version"] == "535.261.03"
    assert result["available_versions"] == ["535.261.03", "535.309.01"]
    assert (
        "fabric manager: the configured apt sources (debian 12) has no libnvidia-nscq-535 / nvidia-fabricmanager-535 "
        "at 535.309.01; 535.261.03 is the newest release of 535 with one" in result["notes"]
    )
    with pytest.raises(GpuFleetError) as raised:
        run(replay, version="535.309.01", flavor="proprietary")
    assert raised.value.msg == (
        "nvidia_driver: fabric_manager: this host has 4 NVSwitches, and NVIDIA's fabric manager must run at exactly "
        "the driver's version, but the configured apt sources (debian 12) has no libnvidia-nscq-535 / "
        "nvidia-fabricmanager-535 at 535.309.01 (fabric manager versions there: 535.247.01, 535.261.03); choose a "
        "driver version that has one, or set fabric_manager to never to install the driver alone"
    )
    assert raised.value.details["fabric_manager_versions"] == ["535.247.01", "535.261.03"]


def test_fabric_manager_never_leaves_it_alone_and_says_so(tmp_path):
    replay = Replay(D12_INSTALLED, tmp_path).add_nvswitches()
    result = run(replay, version="535.261.03", flavor="proprietary", fabric_manager="never")
    assert result["changed"] is False and result["plan"] == []
    assert result["fabric_manager"]["required"] is False
    assert result["fabric_manager"]["action"] == "none"
    assert (
        "fabric_manager is never: the fabric manager is not installed or checked, although the host has 4 NVSwitches "
        "(CUDA fails on its GPUs until a fabric manager of the driver's version runs)"
    ) in result["notes"]
    assert result["msg"] == "NVIDIA driver 535.261.03 (proprietary) installed and pinned, nothing to change; " \
        "reboot required: " + result["reboot_reason"]


def test_without_nvswitches_nothing_about_the_fabric_manager(tmp_path):
    replay = Replay(D12_INSTALLED, tmp_path)
    result = run(replay, version="535.261.03", flavor="proprietary")
    assert result["fabric_manager"] == {
        "mode": "auto",
        "required": False,
        "reason": "no NVSwitch on this host",
        "nvswitch_count": 0,
        "packages": {},
        "installed_version": None,
        "wanted_version": None,
        "service": None,
        "action": "none",
        "detail": "no NVSwitch on this host: not managed",
    }
    assert not any(c[0] == "systemctl" for c in replay.calls)


def test_fabric_manager_always_without_nvswitches(tmp_path):
    replay = Replay(D12_INSTALLED, tmp_path).answer_fabric_manager(D12_FM, "madison-debian12-cuda-repository.txt")
    result = run(replay, version="535.261.03", flavor="proprietary", fabric_manager="always")
    assert result["fabric_manager"]["reason"] == "fabric_manager is always"
    assert "nvidia-fabricmanager-535=535.261.03-1" in result["package_changes"]["install"]


def test_d12_absent_purges_the_fabric_manager(tmp_path):
    replay = Replay(D12_INSTALLED, tmp_path).add_nvswitches()
    dpkg = replay.commands[json.dumps(apt.DPKG_QUERY)]
    replay.overrides[json.dumps(apt.DPKG_QUERY)] = (
        dpkg[0], dpkg[1] + "nvidia-fabricmanager-535\t535.261.03-1\thi \nlibnvidia-nscq-535\t535.261.03-1\thi \n", dpkg[2])
    result = run(replay, state="absent")
    every = sorted(PROPRIETARY_HELD + ["nvidia-modprobe", "nvidia-persistenced", "nvidia-smi"] + D12_FM)
    assert plan_of(result)[:2] == ["apt-mark unhold " + " ".join(every), "apt-get purge -y -q " + " ".join(every)]
    assert result["fabric_manager"]["action"] == "remove"
    assert result["fabric_manager"]["installed_version"] == "535.261.03"
    assert result["fabric_manager"]["detail"] == (
        "this host has 4 NVSwitches: the fabric manager's packages would be removed with the driver"
    )


# --- the fabric manager's service --------------------------------------------------------------------


def d12_with_fabric_manager(tmp_path, loaded="535.261.03", **systemd):
    """Debian 12 with 535.261.03 installed, on a machine with NVSwitches, NVIDIA's repository in the sources."""
    replay = Replay(D12_INSTALLED, tmp_path).add_nvswitches().not_in_a_container().systemd(**systemd)
    replay.answer_fabric_manager(D12_FM, "madison-debian12-cuda-repository.txt")
    if loaded:
        replay.load_driver(loaded)
    return replay


def test_service_enabled_and_started_with_the_driver_loaded(tmp_path):
    replay = d12_with_fabric_manager(tmp_path)
    result = run(replay, check_mode=False, version="535.261.03", flavor="proprietary")
    assert plan_of(result)[-2:] == ["systemctl enable nvidia-fabricmanager", "systemctl start nvidia-fabricmanager"]
    assert replay.mutations()[-2:] == [["systemctl", "enable", FM_UNIT], ["systemctl", "start", FM_UNIT]]
    fm = result["fabric_manager"]
    assert fm["action"] == "install, enable, start"
    assert fm["service"] == {"name": FM_UNIT, "managed": True, "enabled": "enabled", "active": "active",
                             "detail": "enabled, active"}
    assert fm["detail"] == (
        "this host has 4 NVSwitches: fabric manager 535.261.03 installed and pinned, enabled, started "
        "(nvidia-fabricmanager now enabled, active)"
    )
    assert result["msg"] == "NVIDIA driver 535.261.03 (proprietary) installed and pinned; " + fm["detail"]


def test_service_waits_for_the_reboot_when_another_driver_is_loaded(tmp_path):
    replay = d12_with_fabric_manager(tmp_path, loaded="535.247.01")
    result = run(replay, check_mode=False, version="535.261.03", flavor="proprietary")
    assert plan_of(result)[-1] == "systemctl enable nvidia-fabricmanager"
    assert ["systemctl", "start", FM_UNIT] not in replay.calls
    assert (
        "nvidia-fabricmanager starts at the next boot, with the driver 535.261.03 loaded (it refuses to run with a "
        "driver of another version; now: the loaded nvidia module is 535.247.01, the installed driver 535.261.03: "
        "reboot to load it (until then nvidia-smi and CUDA fail with 'driver/library version mismatch'))"
    ) in result["notes"]
    assert result["fabric_manager"]["detail"].endswith(
        "(nvidia-fabricmanager now enabled, inactive); it starts at the next boot, with the driver of its version loaded")
    assert result["reboot_required"] is True


def test_service_that_does_not_start_fails_the_run(tmp_path):
    replay = d12_with_fabric_manager(tmp_path, starts_as="failed")
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version="535.261.03", flavor="proprietary")
    assert raised.value.msg.startswith(
        "nvidia_driver: nvidia-fabricmanager is failed after `systemctl start nvidia-fabricmanager` (the fabric "
        "manager exits when the loaded driver is not its version, or when it cannot configure the NVSwitches): see "
        "`journalctl -u nvidia-fabricmanager`; done: wrote /etc/apt/preferences.d/gpufleet-nvidia-driver.pref;"
    )
    assert raised.value.details["service"]["active"] == "failed"


def test_masked_service_fails_before_any_change(tmp_path):
    replay = d12_with_fabric_manager(tmp_path, enabled="masked")
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version="535.261.03", flavor="proprietary")
    assert raised.value.msg == (
        "nvidia_driver: fabric_manager: this host has 4 NVSwitches, and nvidia-fabricmanager is masked, so it could "
        "never start; unmask it (systemctl unmask nvidia-fabricmanager) or set fabric_manager to never"
    )
    assert [c for c in replay.mutations() if c[0] != "apt-get"] == []


def test_service_running_at_its_version_is_left_alone(tmp_path):
    replay = d12_with_fabric_manager(tmp_path, enabled="enabled", active="active")
    dpkg = replay.commands[json.dumps(apt.DPKG_QUERY)]
    replay.overrides[json.dumps(apt.DPKG_QUERY)] = (
        dpkg[0], dpkg[1] + "nvidia-fabricmanager-535\t535.261.03-1\thi \nlibnvidia-nscq-535\t535.261.03-1\thi \n", dpkg[2])
    installed = dict(apt.parse_dpkg_query(replay.overrides[json.dumps(apt.DPKG_QUERY)][1]))
    pinned = dict((n, i["version"]) for n, i in installed.items() if i["held"])
    replay.put(PIN_FILE, render_pin(pinned, "535.261.03", "proprietary"))
    replay.put(UU_FILE, render_unattended(pinned, "535.261.03"))
    for check_mode in (True, False):
        result = run(replay, check_mode=check_mode, version="535.261.03", flavor="proprietary")
        assert result["changed"] is False and result["plan"] == []
        assert result["fabric_manager"]["action"] == "none"
        assert result["fabric_manager"]["installed_version"] == "535.261.03"
    assert result["fabric_manager"]["detail"] == (
        "this host has 4 NVSwitches: fabric manager 535.261.03 installed and pinned, nothing to change "
        "(nvidia-fabricmanager now enabled, active)"
    )
    assert not any(c[:2] in (["systemctl", "start"], ["systemctl", "enable"]) for c in replay.calls)


# --- the pre-installed fabric manager ----------------------------------------------------------------


def preinstalled_hgx(tmp_path, fm_version="535.261.03", loaded="535.261.03", **systemd):
    replay = Replay(D12_INSTALLED, tmp_path).add_nvswitches().load_driver(loaded).systemd(**systemd)
    if fm_version:
        replay.put("/usr/bin/nv-fabricmanager", "#!/bin/sh\n", 0o755)
        replay.overrides[json.dumps(["/usr/bin/nv-fabricmanager", "--version"])] = (
            0, "Fabric Manager version is : %s\n" % fm_version, "")
    return replay


def test_preinstalled_fabric_manager_at_the_drivers_version(tmp_path):
    replay = preinstalled_hgx(tmp_path, enabled="enabled", active="active")
    with open(os.path.join(HGX, "nv-fabricmanager-version-535.261.03.txt")) as handle:
        assert replay.overrides[json.dumps(["/usr/bin/nv-fabricmanager", "--version"])][1] == handle.read()
    result = run(replay, check_mode=False, method="preinstalled", version="535.261.03")
    assert result["drift"] is False and result["drift_detail"] == []
    fm = result["fabric_manager"]
    assert (fm["required"], fm["installed_version"], fm["wanted_version"], fm["action"]) == (
        True, "535.261.03", "535.261.03", "verify")
    assert fm["detail"] == (
        "this host has 4 NVSwitches: fabric manager 535.261.03 at the driver's version, nvidia-fabricmanager "
        "enabled, active"
    )
    assert replay.mutations() == []


def test_preinstalled_fabric_manager_drift(tmp_path):
    replay = preinstalled_hgx(tmp_path, fm_version="535.247.01", enabled="disabled", active="failed")
    result = run(replay, method="preinstalled", version="535.261.03")
    assert result["drift"] is True
    assert result["drift_detail"] == [
        "fabric manager 535.247.01, the driver 535.261.03 (they must be the same version)",
        "fabric manager service nvidia-fabricmanager is failed",
        "fabric manager service nvidia-fabricmanager is disabled (it does not start at boot)",
    ]
    assert result["msg"].startswith("pre-installed driver 535.261.03 (proprietary, preinstalled): drifted: fabric "
                                    "manager 535.247.01, the driver 535.261.03")
    assert replay.mutations() == [] and result["changed"] is False


def test_preinstalled_fabric_manager_missing(tmp_path):
    replay = preinstalled_hgx(tmp_path, fm_version=None)
    result = run(replay, method="preinstalled", version="535.261.03")
    assert result["drift_detail"] == [
        "fabric manager not installed (this host has 4 NVSwitches; CUDA fails on its GPUs until one of the driver's "
        "version runs)"
    ]
    assert result["fabric_manager"]["service"] is None
    assert not any(c[0] == "systemctl" for c in replay.calls)


def test_preinstalled_fabric_manager_in_a_container_is_not_checked_for_its_service(tmp_path):
    replay = Replay(D12_INSTALLED, tmp_path).add_nvswitches()
    replay.put("/usr/bin/nv-fabricmanager", "#!/bin/sh\n", 0o755)
    replay.overrides[json.dumps(["/usr/bin/nv-fabricmanager", "--version"])] = (
        0, "Fabric Manager version is : 535.261.03\n", "")
    result = run(replay, method="preinstalled", version="535.261.03")
    assert result["drift"] is False
    assert result["notes"] == [
        "nvidia-fabricmanager not checked: this is a podman container, where no systemd runs the host's services: "
        "enable and start nvidia-fabricmanager on the host"
    ]


def test_preinstalled_without_nvswitches_checks_nothing(tmp_path):
    replay = Replay(D12_INSTALLED, tmp_path)
    result = run(replay, method="preinstalled", version="535.261.03")
    assert result["fabric_manager"]["required"] is False
    assert result["fabric_manager"]["detail"] == "no NVSwitch on this host: not checked"
    assert result["notes"] == []


# --- Ubuntu: the precompiled modules' objects go with the modules ---------------------------------


def test_ubuntu_objects_of_stale_precompiled_modules_go_with_them():
    """apt installs linux-objects-nvidia-* as a dependency of linux-modules-nvidia-* (scenario ubuntu2404):
    they are stale when the modules are, and kept when the modules are wanted or kept."""
    layout = UbuntuLayout("6.8.0-90-generic")
    kernel = "6.8.0-90-generic"
    # the move from 550 precompiled to 580 open with DKMS: both of 550 go
    dkms_580 = dict((n, "580.95.05-0ubuntu0.24.04.2") for n in layout.core(580, "open", "dkms"))
    assert layout.stale_module_package("linux-modules-nvidia-550-server-" + kernel, dkms_580)
    assert layout.stale_module_package("linux-objects-nvidia-550-server-" + kernel, dkms_580)
    # state absent: nothing is wanted
    assert layout.stale_module_package("linux-objects-nvidia-550-server-" + kernel, {})
    # 550 precompiled wanted for this kernel: its objects stay, as do another kernel's of the same branch
    want = dict((n, "550.163.01-0ubuntu0.24.04.1") for n in layout.core(550, "proprietary", "precompiled"))
    want["linux-modules-nvidia-550-server-" + kernel] = "6.8.0-90.91+1"
    assert not layout.stale_module_package("linux-objects-nvidia-550-server-" + kernel, want)
    assert not layout.stale_module_package("linux-objects-nvidia-550-server-6.8.0-88-generic", want)
    assert not layout.stale_module_package("linux-signatures-nvidia-" + kernel, want)
