"""The driver tests' replayed hosts: ``Replay``, ``run``, ``plan_of``, ``install_argv`` and the fixture names.

``Replay`` rebuilds one folder of ``tests/unit/fixtures/driver`` (see its README): ``root/`` is
the host's files, ``commands.json`` answers the read-only commands the module runs, and a command
that changes the host (apt-get install, apt-mark, dnf install ...) answers success without doing
anything, so that the plan can be executed against the replayed tree. Any other command fails the
test: the module may run nothing the fixture did not record.

Hosts with NVSwitches are DERIVED (tests/unit/fixtures/driver/hgx, see its README): the recorded
hosts get the NVSwitches of a derived HGX H100 host in sysfs (``Replay.add_nvswitches``), their
package queries answer the fabric manager's packages from documented repository lines
(``Replay.answer_fabric_manager``), and ``Replay.systemd`` simulates systemctl.
"""

from __future__ import annotations

import json
import os
import re
import shutil

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import install as driver
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import apt, dnf
from ansible_collections.gpufleet.nvidia.tests.unit import hostfs
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.common.fakes import FakeModule

FIXTURES = os.path.normpath(os.path.join(os.path.dirname(os.path.dirname(__file__)), "..", "..", "fixtures", "driver"))
HGX = os.path.join(FIXTURES, "hgx")
HGX_HOST = os.path.normpath(os.path.join(FIXTURES, "..", "hosts", "rocky9-h100x8-rpm-rke2", "root"))
FM_UNIT = "nvidia-fabricmanager"
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
    ("dnf", "--disablerepo=*", "versionlock", "delete"),
    ("dnf", "--disablerepo=*", "module", "reset"),
    ("systemctl", "enable"),
    ("systemctl", "start"),
    ("systemctl", "restart"),
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
        self.services = None
        self.starts_as = "active"

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
        if normal[:1] == ["systemctl"] and self.services is not None:
            return self._systemctl(normal[1], normal[-1])
        key = json.dumps(normal)
        if key in self.overrides:
            return self.overrides[key]
        if key in self.commands:
            return self.commands[key]
        if any(tuple(normal[: len(prefix)]) == prefix for prefix in MUTATING):
            return 0, "", ""
        raise AssertionError("%s: command not recorded in the fixture: %s" % (self.name, " ".join(normal)))

    def system(self):
        return common_host.Host(
            self.root, runner=self.runner, kernel_root=self.root, kernel_release=self.host["kernel"], path_env="",
            tmpdir=self.tmp, module=FakeModule(self.tmp),
        )

    def mutations(self):
        return [c for c in self.calls if any(tuple(c[: len(p)]) == p for p in MUTATING)]

    # -- what the derived HGX hosts add ---------------------------------------------------------

    def add_nvswitches(self):
        """The PCI devices of the derived HGX H100 host (eight GPUs, four NVSwitches) in sysfs."""
        tree = hostfs.materialize(HGX_HOST)
        for sub in ("sys/bus/pci", "sys/devices"):
            shutil.copytree(os.path.join(tree, sub), os.path.join(self.root, sub), symlinks=True, dirs_exist_ok=True)
        return self

    def answer_fabric_manager(self, names, fixture=None, installed=None):
        """Answer the package queries that name the fabric manager's ``names`` too.

        Each recorded ``apt-cache madison`` (``dnf repoquery``) answers again, with ``names`` added
        to its arguments where the backend puts them, and the lines of ``names`` in the hgx
        ``fixture`` added to its output (none without a fixture: a repository that does not
        have them). ``installed`` (other installed fabric manager packages) join the madison
        query as the backend adds them.
        """
        text = ""
        if fixture:
            with open(os.path.join(HGX, fixture)) as handle:
                text = handle.read()
        for key, (rc, out, err) in list(self.commands.items()):
            argv = json.loads(key)
            if "madison" in argv:
                cut = argv.index("madison") + 1
                new = argv[:cut] + sorted(set(argv[cut:]) | set(names) | set(installed or ()))
                lines = [line for line in text.splitlines(True) if line.split("|")[0].strip() in names]
            elif "repoquery" in argv:
                cut = argv.index("dkms")
                new = argv[:cut] + list(names) + argv[cut:]
                lines = [line for line in text.splitlines(True) if line.split("\t")[0] in names]
            else:
                continue
            self.overrides[json.dumps(new)] = (rc, out + "".join(lines), err)
        return self

    def systemd(self, enabled="not-found", active="inactive", starts_as="active"):
        """A host booted with systemd: systemctl answers for nvidia-fabricmanager from a state.

        ``enable`` enables the unit; ``start`` and ``restart`` leave it ``starts_as``.
        """
        os.makedirs(os.path.join(self.root, "run", "systemd", "system"), exist_ok=True)
        self.put("/usr/bin/systemctl", "#!/bin/sh\n", 0o755)
        self.services = {FM_UNIT: {"enabled": enabled, "active": active}}
        self.starts_as = starts_as
        return self

    def _systemctl(self, verb, unit):
        state = self.services.setdefault(unit, {"enabled": "not-found", "active": "inactive"})
        if verb == "is-enabled":
            if state["enabled"] == "not-found":
                return 1, "", "Failed to get unit file state for %s.service: No such file or directory\n" % unit
            return (0 if state["enabled"] == "enabled" else 1), state["enabled"] + "\n", ""
        if verb == "is-active":
            return (0 if state["active"] == "active" else 3), state["active"] + "\n", ""
        if verb == "enable":
            state["enabled"] = "enabled"
            return 0, "", "Created symlink /etc/systemd/system/multi-user.target.wants/%s.service.\n" % unit
        if verb in ("start", "restart"):
            state["active"] = self.starts_as
            return 0, "", ""
        raise AssertionError("systemctl %s %s: not simulated" % (verb, unit))

    def load_driver(self, version):
        """The proprietary nvidia module ``version`` loaded, on a machine (no container markers)."""
        self.not_in_a_container()
        self.put("/proc/modules", "nvidia 56655872 1 nvidia_uvm, Live 0x0000000000000000 (POE)\n")
        self.put("/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Wed Jun 25 "
                 "19:52:15 UTC 2025\n" % version)
        self.put("/sys/module/nvidia/version", version + "\n")
        return self

    def not_in_a_container(self):
        for path in ("/run/systemd/container", "/run/.containerenv"):
            if os.path.exists(os.path.join(self.root, path.lstrip("/"))):
                os.remove(os.path.join(self.root, path.lstrip("/")))
        return self


def run(replay, check_mode=True, diff_mode=False, **params):
    return driver.run(replay.system(), driver.default_params(**params), check_mode=check_mode, diff_mode=diff_mode)


def plan_of(result):
    return result["plan"]


def install_argv(*packages, purge=False):
    return " ".join(apt.APT_GET_INSTALL + (["--purge"] if purge else []) + list(packages))


D12_PRISTINE = "debian12/pristine"
D12_INSTALLED = "debian12/installed-535.261.03-proprietary"
D13_PRISTINE = "debian13/pristine"
D13_INSTALLED = "debian13/installed-550.163.01-proprietary"
ROCKY9_INSTALLED = "rocky9/installed-570.172.08-proprietary"


# --- the fabric manager from NVIDIA's CUDA repository (DERIVED hosts, see fixtures/driver/hgx) -------

RPM_QA_FM = json.dumps(["rpm", "-qa", "--qf", dnf.RPM_QF] + dnf.FABRIC_MANAGER_GLOBS)
VERSIONLOCK = json.dumps(dnf.LOCKS_LIST)
FM_570 = ["libnvidia-nscq-570", "nvidia-fabric-manager"]
FM_580 = ["libnvidia-nscq", "nvidia-fabricmanager"]


def rocky_hgx(tmp_path, fm_installed=None, fm_names=tuple(FM_570), loaded="570.172.08", **systemd):
    """Rocky 9 with 570.172.08 installed and locked, on an HGX board; ``fm_installed``: {name: evr} locked too."""
    replay = Replay(ROCKY9_INSTALLED, tmp_path).add_nvswitches().systemd(**systemd)
    if loaded:
        replay.load_driver(loaded)
    replay.answer_fabric_manager(fm_names, "repoquery-rocky9-cuda-repository.txt")
    fm_installed = fm_installed or {}
    replay.overrides[RPM_QA_FM] = (0, "".join("%s\t%s\n" % item for item in sorted(fm_installed.items())), "")
    rc, out, err = replay.commands[VERSIONLOCK]
    replay.overrides[VERSIONLOCK] = (rc, out + "".join("%s-%s.*\n" % item for item in sorted(fm_installed.items())), err)
    return replay
