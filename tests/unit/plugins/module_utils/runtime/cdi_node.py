"""The CDI tests' H200 node: ``Node``, the ``node`` fixture, ``params`` and the recorded spec.

Every command answers with a recorded output (tests/unit/fixtures/cdi/README.md): ``nvidia-ctk cdi
generate`` writes the spec nvidia-ctk 1.20 wrote on the H200, or fails as it does without NVML;
``systemctl show`` prints what systemd 252 printed for the refresh units in each state. The node is
the H200 capture rebuilt under tmp_path: its /proc files, its device nodes (plain files, with the
numbers ``ls -la /dev/nvidia*`` showed there).
"""

from __future__ import annotations

import os
import re

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi, cdi_refresh

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "..", "..", "fixtures")
CDI = os.path.join(FIXTURES, "cdi")
LS_DEV = os.path.join(FIXTURES, "hosts", "ubuntu2404-h200-preinstalled", "commands", "ls-dev-nvidia.txt")
VERSION = "580.159.04"
BUS = "0000:00:06.0"
#: The GPU of the lease that wrote the spec, and that of the lease the /proc capture is from.
SPEC_UUID = "GPU-5865af09-6dee-d4a4-5fb2-a29f36b8411a"
NODE_UUID = "GPU-d35d5d0d-d305-4f92-c0d5-c310f071b577"
SERVICE, PATH_UNIT = cdi_refresh.REFRESH_SERVICE, cdi_refresh.REFRESH_PATH


def fixture(*parts):
    with open(os.path.join(CDI, *parts), encoding="utf-8") as handle:
        return handle.read()


SPEC = fixture("h200", "nvidia-ctk-cdi.yaml")


def recorded_numbers():
    """``{node: (major, minor)}`` of the H200's ``ls -la /dev/nvidia*``."""
    numbers, folder = {}, "/dev"
    with open(LS_DEV, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("/dev/") and line.rstrip().endswith(":"):
                folder = line.strip()[:-1]
            match = re.match(r"^c\S+\s+\d+\s+\S+\s+\S+\s+(\d+),\s+(\d+)\s.*\s(\S+)$", line.strip())
            if match:
                name = match.group(3)
                numbers[name if name.startswith("/") else folder + "/" + name] = (int(match.group(1)), int(match.group(2)))
    return numbers


class Node(object):
    """The H200 under ``root``: its /proc and /dev, spec folders, and a runner answering with recorded outputs.

    ``generate``: what ``nvidia-ctk cdi generate`` does (``"spec"``: writes SPEC to its --output;
    ``"no-nvml"``: fails as it does without a driver). ``units``: the systemd/show-*.txt the units'
    state is read from (None: systemd is not PID 1); a ``systemctl restart`` of the service moves it to
    ``show-healthy.txt`` and writes the toolkit's spec (what the unit's nvidia-ctk run writes), unless
    ``restart_fails``.
    """

    def __init__(self, root):
        self.root = root
        self.numbers = recorded_numbers()
        self.generate, self.units, self.restart_fails, self.calls = "spec", "show-healthy.txt", False, []
        for path in self.numbers:
            self.write(path, "")
        self.write("/proc/driver/nvidia/version", fixture("h200", "nvidia-version.txt"))
        self.write("/proc/driver/nvidia/gpus/%s/information" % BUS, fixture("h200", "gpu-information.txt"))
        self.write("/usr/bin/nvidia-ctk", "")
        os.chmod(self.local("/usr/bin/nvidia-ctk"), 0o755)
        self.write("/usr/bin/nvidia-cdi-hook", "")

    def local(self, path):
        return self.root + path

    def write(self, path, text):
        os.makedirs(os.path.dirname(self.local(path)), exist_ok=True)
        with open(self.local(path), "w", encoding="utf-8") as handle:
            handle.write(text)

    def same_gpu(self):
        """The node is the lease the spec was written on: its GPU's UUID in /proc."""
        path = "/proc/driver/nvidia/gpus/%s/information" % BUS
        with open(self.local(path), encoding="utf-8") as handle:
            self.write(path, handle.read().replace(NODE_UUID, SPEC_UUID))

    def device_number(self, host, node):
        return self.numbers.get(node) if os.path.exists(host.dlocal(node)) else None

    def host(self, module=None):
        return Host("/", runner=self.run, kernel_root=self.root, dev_root=self.root, module=module, tmpdir=self.root)

    def run(self, argv, env=None):
        self.calls.append(list(argv))
        if argv[1:3] == ["cdi", "generate"]:
            return self._generate(argv)
        if argv[:2] == ["systemctl", "show"]:
            if self.units is None:
                return int(fixture("systemd", "show-without-systemd.rc")), "", fixture("systemd", "show-without-systemd.stderr")
            return 0, fixture("systemd", self.units), ""
        if argv[:3] == ["systemctl", "restart", SERVICE]:
            if self.restart_fails:
                self.units = "show-after-first-failure.txt"
                return int(fixture("systemd", "start-failing.rc")), "", fixture("systemd", "start-failing.stderr")
            self.units = "show-healthy.txt"
            with open(cdi.TOOLKIT_SPEC, "w", encoding="utf-8") as handle:
                handle.write(SPEC)
        return 0, "", ""  # reset-failed and start: rc 0, nothing printed (seen on systemd 252)

    def _generate(self, argv):
        if self.generate == "no-nvml":
            return int(fixture("nvidia-ctk", "cdi-generate-no-nvml.rc")), "", fixture("nvidia-ctk", "cdi-generate-no-nvml.stderr")
        output = next(a.split("=", 1)[1] for a in argv if a.startswith("--output="))
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(SPEC)
        return 0, "", ""


@pytest.fixture
def node(tmp_path, monkeypatch):
    """The H200 node under tmp_path/host, the CDI folders under it (SPEC_DIRS and TOOLKIT_SPEC point there)."""
    found = Node(str(tmp_path / "host"))
    dirs = tuple(found.local(d) for d in cdi.SPEC_DIRS)
    for folder in dirs:
        os.makedirs(folder)
    monkeypatch.setattr(cdi, "SPEC_DIRS", dirs)
    monkeypatch.setattr(cdi, "TOOLKIT_SPEC", found.local(cdi.TOOLKIT_SPEC))
    monkeypatch.setattr(cdi.day2, "device_number", found.device_number)
    return found


def params(node, **extra):
    """cdi_spec's options for the node."""
    found = {"nvidia_ctk": node.local("/usr/bin/nvidia-ctk"), "driver_root": "/", "dev_root": node.root,
             "nvidia_cdi_hook_path": node.local("/usr/bin/nvidia-cdi-hook"), "device_name_strategy": "both",
             "disabled_hooks": []}
    found.update(extra)
    return found
