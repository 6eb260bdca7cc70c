"""Tests of module_utils/_driver.py and the Debian backend, replayed from the recorded hosts.

``Replay`` rebuilds one folder of ``tests/unit/fixtures/driver`` (see its README): ``root/`` is
the host's files, ``commands.json`` answers the read-only commands the module runs, and a command
that changes the host (apt-get install, apt-mark, dnf install ...) answers success without doing
anything, so that the plan can be executed against the replayed tree. Any other command fails the
test: the module may run nothing the fixture did not record.

The Debian fixtures are real (captured in the lab containers with capture-debian.sh); the plans
asserted here are the ones the module carried out there.
"""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _driver
from ansible_collections.gpufleet.nvidia.plugins.module_utils import _driver_apt as apt
from ansible_collections.gpufleet.nvidia.plugins.module_utils._errors import GpuFleetError

FIXTURES = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "driver"))
_TMP = re.compile(r"/(?:[^\s=/]+/)*gpufleet-apt-[^/\s]+")
# Commands that change the host: answered with success, never recorded in a fixture.
MUTATING = (
    ("apt-get", "install"),
    ("apt-get", "purge"),
    ("apt-get", "update", "-q"),
    ("apt-mark",),
    ("update-initramfs",),
    ("dracut",),
    ("dnf", "install"),
    ("dnf", "remove"),
    ("dnf", "module", "enable"),
    ("dnf", "module", "reset"),
    ("dnf", "versionlock", "add"),
    ("dnf", "versionlock", "delete"),
)


class Replay(object):
    """A host of tests/unit/fixtures/driver: its files under a temporary root, its commands replayed."""

    def __init__(self, name, tmp_path, overrides=None, files=None):
        self.name = name
        folder = os.path.join(FIXTURES, name)
        with open(os.path.join(folder, "host.json")) as handle:
            self.host = json.load(handle)
        self.root = str(tmp_path / "root")
        self.tmp = str(tmp_path / "tmp")
        os.makedirs(self.tmp)
        if os.path.isdir(os.path.join(folder, "root")):
            shutil.copytree(os.path.join(folder, "root"), self.root)
        else:
            os.makedirs(self.root)
        for path in self.host["executables"]:
            self.put(path, "#!/bin/sh\n", 0o755)
        for path, text in (files or {}).items():
            self.put(path, text)
        with open(os.path.join(folder, "commands.json")) as handle:
            records = json.load(handle)
        self.commands = {}
        for record in records:
            stdout = record["stdout"]
            if isinstance(stdout, dict):
                with open(os.path.join(folder, stdout["file"])) as handle:
                    stdout = handle.read()
            self.commands[json.dumps(record["argv"])] = (record["rc"], stdout, record["stderr"])
        self.overrides = dict((json.dumps(list(k)), v) for k, v in (overrides or {}).items())
        self.calls = []
        self.temp_files = {}

    def put(self, path, text, mode=0o644):
        local = os.path.join(self.root, path.lstrip("/"))
        os.makedirs(os.path.dirname(local), exist_ok=True)
        with open(local, "w") as handle:
            handle.write(text)
        os.chmod(local, mode)

    def read(self, path):
        local = os.path.join(self.root, path.lstrip("/"))
        if not os.path.exists(local):
            return None
        with open(local) as handle:
            return handle.read()

    def runner(self, argv, env=None):
        argv = [str(a) for a in argv]
        normal = [_TMP.sub("<tmp>", a) for a in argv]
        if "update" in argv and any("<tmp>" in a for a in normal):
            tmp = _TMP.search(" ".join(argv)).group(0)
            for dirpath, dummy, filenames in os.walk(tmp):
                for filename in filenames:
                    path = os.path.join(dirpath, filename)
                    with open(path) as handle:
                        self.temp_files[os.path.relpath(path, tmp)] = handle.read()
        self.calls.append(normal)
        key = json.dumps(normal)
        if key in self.overrides:
            return self.overrides[key]
        if key in self.commands:
            return self.commands[key]
        if any(tuple(normal[: len(prefix)]) == prefix for prefix in MUTATING):
            return 0, "", ""
        raise AssertionError("%s: command not recorded in the fixture: %s" % (self.name, " ".join(normal)))

    def system(self):
        return _driver.System(
            self.root, runner=self.runner, kernel_root=self.root, kernel_release=self.host["kernel"], path_env="",
            tmpdir=self.tmp,
        )

    def mutations(self):
        return [c for c in self.calls if any(tuple(c[: len(p)]) == p for p in MUTATING)]


def run(replay, check_mode=True, diff_mode=False, **params):
    return _driver.run(replay.system(), _driver.default_params(**params), check_mode=check_mode, diff_mode=diff_mode)


def plan_of(result):
    return result["plan"]


def install_argv(*packages, purge=False):
    return " ".join(apt.APT_GET_INSTALL + (["--purge"] if purge else []) + list(packages))


D12_PRISTINE = "debian12/pristine"
D12_INSTALLED = "debian12/installed-535.261.03-proprietary"
D13_PRISTINE = "debian13/pristine"
D13_INSTALLED = "debian13/installed-550.163.01-proprietary"

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
    pin = replay.read(apt.PIN_FILE)
    assert "Package: firmware-nvidia-gsp libcuda1 libnvidia-cfg1 libnvidia-ml1 libnvidia-pkcs11-openssl3 " \
        "libnvidia-ptxjitcompiler1 nvidia-alternative nvidia-kernel-dkms nvidia-kernel-support nvidia-legacy-check " \
        "nvidia-smi\nPin: version 535.261.03-1\nPin-Priority: 1001\n" in pin
    assert "Package: nvidia-persistenced\nPin: version 535.171.04-1~deb12u1\nPin-Priority: 1001\n" in pin
    assert '    "^libcuda1$";\n' in replay.read(apt.UU_FILE)
    assert replay.read(_driver.NOUVEAU_FILE) == _driver.NOUVEAU_CONTENT


def test_d12_diff_shows_packages_and_files(tmp_path):
    result = run(Replay(D12_PRISTINE, tmp_path), diff_mode=True, version="535.261.03", flavor="proprietary")
    headers = [d["after_header"] for d in result["diff"]]
    assert headers == [
        "packages",
        "/etc/apt/sources.list",
        apt.PIN_FILE,
        apt.UU_FILE,
        _driver.NOUVEAU_FILE,
    ]
    packages = result["diff"][0]
    assert packages["before"] == ""
    assert "libcuda1=535.261.03-1 (held)\n" in packages["after"]
    sources = result["diff"][1]
    assert sources["before"].endswith("bookworm-security main\n")
    assert sources["after"].endswith("bookworm-security main contrib non-free non-free-firmware\n")
    assert result["diff"][2]["before_header"] == apt.PIN_FILE + " (absent)"


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
    assert replay.read(apt.PIN_FILE) is None and replay.read(_driver.NOUVEAU_FILE) is None
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
    mstate, reboot, reason = _driver.module_state(base, desired, container, state)
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
    chosen, reason = _driver.resolve_flavor(system, "auto", _driver.versions.parse_driver_version(version))
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
    layout = apt.DebianLayout("6.18.44-fc-v595")
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
