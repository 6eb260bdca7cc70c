"""Host captures replayed for the tests: ``CaptureHost``, ``fixture_facts``, ``HOSTS`` and ``_node``.

``CaptureHost`` reads a capture's ``root/`` (rebuilt from its frozen form by ``tests/unit/hostfs.py``)
as the host's file system and answers commands from its ``commands/<name>.txt`` / ``.rc``.
"""

from __future__ import annotations

import copy
import os
import posixpath

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import facts as gf
from ansible_collections.gpufleet.nvidia.tests.unit import hostfs

HOSTS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "..", "..", "fixtures", "hosts")
HOSTS = os.path.normpath(HOSTS)

# (binary name, arguments...) -> the capture's commands/<name>
COMMANDS = {
    ("nvidia-smi", "-q", "-x"): "nvidia-smi-q-x",
    ("modinfo", "nvidia"): "modinfo-nvidia",
    ("nvidia-ctk", "--version"): "nvidia-ctk-version",
    ("nvidia-container-cli", "--version"): "nvidia-container-cli-version",
    ("containerd", "--version"): "containerd-version",
    ("dockerd", "--version"): "dockerd-version",
    ("crio", "--version"): "crio-version",
    ("nvidia-smi", "topo", "-m"): "nvidia-smi-topo-m",
    ("nv-fabricmanager", "--version"): "nv-fabricmanager-version",
    ("systemctl", "is-active", "nvidia-fabricmanager"): "systemctl-is-active-fabricmanager",
}


def _read(path, default=None):
    try:
        with open(path) as handle:
            return handle.read()
    except IOError:
        return default


class CaptureHost(common_host.Host):
    """A :class:`Host` replaying ``tests/unit/fixtures/hosts/<name>``.

    Executables: files in ``root/``, the paths listed by ``commands/which*.txt`` and
    ``ls-driver-root.txt``, and, for a captured ``--version``-style command whose exit status is
    not 127, ``/usr/bin/<name>``. Files listed by ``ls-driver-root.txt`` also exist. A
    ``build.resolved-exists`` marker (capture-host.sh) makes ``.../build`` exist.
    """

    def __init__(self, name, commands=None):
        self.capture = os.path.join(HOSTS, name)
        root = hostfs.materialize(os.path.join(self.capture, "root"))
        release = (_read(os.path.join(self.capture, "commands", "uname-r.txt"), "") or "").strip() or "0.0.0"
        super(CaptureHost, self).__init__(
            root=root, runner=self._replay, kernel_root=root, kernel_release=release, path_env=""
        )
        self.calls = []
        # the captured commands ran on the host itself, not through chroot
        self.chrooted = False
        self.overrides = dict(commands or {})
        listed = []
        commands_dir = os.path.join(self.capture, "commands")
        # what `command -v` found first (the host's own PATH order), then the driver's file list
        entries = sorted(e for e in os.listdir(commands_dir) if e.startswith("which") and e.endswith(".txt"))
        for entry in entries + ["ls-driver-root.txt"]:
            listed += [l.strip() for l in (_read(os.path.join(commands_dir, entry), "") or "").splitlines()]
        self.present = set(l for l in listed if l.startswith("/"))
        self.executables = [l for l in listed if l.startswith("/") and "bin/" in l]
        for key, capture in COMMANDS.items():
            rc = _read(os.path.join(commands_dir, capture + ".rc"))
            if (
                rc is not None
                and rc.strip() != "127"
                and not any(posixpath.basename(p) == key[0] for p in self.executables)
            ):
                self.executables.append("/usr/bin/" + key[0])

    def which(self, name, extra_dirs=()):
        found = super(CaptureHost, self).which(name, extra_dirs)
        if found:
            return found
        for path in self.executables:
            if posixpath.basename(path) == name:
                return path
        return None

    def exists(self, path, kernel=False):
        if super(CaptureHost, self).exists(path, kernel):
            return True
        if kernel:
            return False
        if path in self.present:
            return True
        return os.path.isdir(self._join(self.root, path) + ".resolved-exists")

    def _replay(self, argv):
        self.calls.append(list(argv))
        key = (posixpath.basename(argv[0]),) + tuple(argv[1:])
        name = COMMANDS.get(key) or ("rpm-qf" if key[0] == "rpm" and "-qf" in key else None)
        if name in self.overrides:
            return self.overrides[name]
        text = _read(os.path.join(self.capture, "commands", "%s.txt" % name)) if name else None
        if text is None:
            return 127, "", "%s: not captured" % " ".join(argv)
        rc = int((_read(os.path.join(self.capture, "commands", "%s.rc" % name)) or "0").strip())
        return rc, text, ""


_CACHE = {}


def fixture_facts(name):
    """The facts of a capture (a fresh copy each call)."""
    if name not in _CACHE:
        _CACHE[name] = gf.gather_facts(CaptureHost(name))
    return copy.deepcopy(_CACHE[name])


def _node(tmp_path, files=None):
    """A small host tree with one H200 in sysfs, its /proc, and ``files`` (host path -> text or bytes)."""
    root = tmp_path / "node"
    gpu = "/sys/bus/pci/devices/0000:01:00.0/"
    attrs = {"vendor": "0x10de", "class": "0x030200", "device": "0x2335", "subsystem_vendor": "0x10de",
             "subsystem_device": "0x18be", "numa_node": "-1"}
    tree = dict(("%s%s" % (gpu, name), value + "\n") for name, value in attrs.items())
    tree.update({"/proc/modules": "nvidia 1 0 - Live 0x0\n", "/etc/os-release": "ID=debian\nVERSION_ID=12\n"})
    tree.update(files or {})
    for path, data in tree.items():
        local = root / path.lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            local.write_bytes(data)
        else:
            local.write_text(data)
    return root
