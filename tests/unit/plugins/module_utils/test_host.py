"""Tests of module_utils/common/host.py: the one host adapter, on small host trees made here.

The adapter's reads under a host root are also exercised by every replayed capture
(test_gpu_facts.py, test_validate.py, test_driver*.py); these tests pin what each method
promises on its own: links resolved inside the root, lenient and strict reads, globbing, device
nodes under their own root, commands with added environment, and writes through a module.
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as H
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


def _tree(root, files):
    for rel, text in files.items():
        path = os.path.join(str(root), rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)


class FakeModule(object):
    """What the adapter uses of an AnsibleModule, recording the commands and the writes."""

    def __init__(self, tmpdir):
        self.tmpdir = str(tmpdir)
        self.params = {}
        self.commands = []
        self.cleanup = []

    def run_command(self, argv, environ_update=None):
        self.commands.append((argv, environ_update))
        return 0, "out", ""

    def add_cleanup_file(self, path):
        self.cleanup.append(path)

    def atomic_move(self, src, dest, unsafe_writes=False):
        os.rename(src, dest)

    def backup_local(self, path):
        backup = path + ".bak"
        with open(path, "rb") as src, open(backup, "wb") as dst:
            dst.write(src.read())
        return backup


def test_an_absolute_link_is_resolved_inside_the_root(tmp_path):
    _tree(tmp_path, {"etc/real.conf": "inside\n"})
    os.symlink("/etc/real.conf", str(tmp_path / "etc" / "link.conf"))
    host = H.Host(str(tmp_path), runner=lambda argv: (0, "", ""), kernel_root=str(tmp_path))
    assert host.resolve("/etc/link.conf") == "/etc/real.conf"
    assert host.read("/etc/link.conf") == "inside\n"
    assert host.islink("/etc/link.conf") and not host.islink("/etc/real.conf")
    assert host.isfile("/etc/link.conf") and not host.isdir("/etc/link.conf")


def test_lenient_reads_answer_none_or_nothing_and_strict_reads_raise(tmp_path):
    _tree(tmp_path, {"etc/a.toml": "a", "etc/b.toml": "b", "etc/c.json": "c", "etc/d.toml/x": ""})
    host = H.Host(str(tmp_path), runner=lambda argv: (0, "", ""), kernel_root=str(tmp_path))
    assert host.read("/etc/missing") is None
    assert host.names("/missing") == []
    assert host.mtime("/etc/missing") is None and host.mtime("/etc/a.toml") > 0
    with pytest.raises(FileNotFoundError):
        host.read_text("/etc/missing")
    # files only: d.toml is a folder
    assert host.glob("/etc/*.toml") == ["/etc/a.toml", "/etc/b.toml"]


def test_an_unreadable_file_is_an_error_naming_it(tmp_path):
    _tree(tmp_path, {"etc/dir/x": ""})
    host = H.Host(str(tmp_path), runner=lambda argv: (0, "", ""), kernel_root=str(tmp_path))
    with pytest.raises(GpuFleetError, match="could not read /etc/dir"):
        host.read("/etc/dir")


def test_executables_and_device_nodes(tmp_path):
    _tree(tmp_path, {"usr/bin/tool": "#!/bin/sh\n", "usr/bin/data": "", "dev/nvidia0": ""})
    os.chmod(str(tmp_path / "usr" / "bin" / "tool"), 0o755)
    seen = []
    host = H.Host(str(tmp_path), runner=lambda argv: (0, "", ""), kernel_root=str(tmp_path),
                  dev_root=str(tmp_path), is_device_node=lambda p: seen.append(p) or os.path.exists(p), path_env="")
    assert host.is_executable("/usr/bin/tool") and not host.is_executable("/usr/bin/data")
    assert host.which("tool") == "/usr/bin/tool" and host.which("data") is None
    assert host.device_exists("/dev/nvidia0") and not host.device_exists("/dev/nvidia1")
    assert seen == [str(tmp_path / "dev" / "nvidia0"), str(tmp_path / "dev" / "nvidia1")]
    # a plain file is not a character device
    assert not H.is_char_device(str(tmp_path / "dev" / "nvidia0"))
    assert H.is_char_device("/dev/null")


def test_commands_get_the_added_environment_only_when_asked(tmp_path):
    calls = []

    def runner(argv, env=None):
        calls.append((argv, env))
        return 0, "", ""

    host = H.Host(str(tmp_path), runner=runner, kernel_root=str(tmp_path))
    host.run(("true",))
    host.run(["apt-get", "update"], env={"DEBIAN_FRONTEND": "noninteractive"})
    assert calls == [(["true"], None), (["apt-get", "update"], {"DEBIAN_FRONTEND": "noninteractive"})]
    rc, out, _err = H.subprocess_runner("/", timeout=5)(["sh", "-c", "echo $GPUFLEET_X"], {"GPUFLEET_X": "y"})
    assert (rc, out) == (0, "y\n")


def test_a_module_host_runs_through_the_module_and_writes_atomically(tmp_path):
    module = FakeModule(tmp_path / "tmp")
    os.makedirs(module.tmpdir)
    host = H.Host.for_module(module)
    assert host.run(["nvidia-smi"], env={"LC_ALL": "C"}) == (0, "out", "")
    assert module.commands == [(["nvidia-smi"], {"LC_ALL": "C"})]
    target = str(tmp_path / "etc" / "new" / "x.conf")
    assert host.write(target, "one\n") is None
    assert open(target).read() == "one\n" and oct(os.stat(target).st_mode & 0o777) == "0o644"
    backup = host.write(target, "two\n", backup=True)
    assert open(backup).read() == "one\n" and open(target).read() == "two\n"
    assert host.remove(target) is None and not os.path.exists(target)
    assert host.remove(target) is None  # already gone
    assert host.tmpdir == module.tmpdir and host.mkdtemp("x-").startswith(module.tmpdir)


def test_a_host_without_a_module_refuses_to_write(tmp_path):
    host = H.Host(str(tmp_path), runner=lambda argv: (0, "", ""), kernel_root=str(tmp_path))
    with pytest.raises(GpuFleetError, match="without a module"):
        host.write("/etc/x", "y")
    assert not os.path.exists(str(tmp_path / "etc" / "x"))


def test_a_timed_out_command_leaves_no_process_behind(tmp_path):
    """The command and everything it started are killed: a child would otherwise outlive the timeout."""
    pidfile = str(tmp_path / "child.pid")
    run = H.subprocess_runner("/", timeout=1)
    rc, out, err = run(["sh", "-c", "sleep 30 & echo $! > %s; sleep 30" % pidfile])
    assert (rc, out) == (124, "") and err.endswith("timed out after 1 seconds")
    child = int(open(pidfile).read())
    assert _gone(child), "the command's child %d is still running" % child


def _gone(pid, wait=5.0):
    import time

    deadline = time.time() + wait
    while time.time() < deadline:
        try:
            with open("/proc/%d/stat" % pid) as handle:
                state = handle.read().rpartition(")")[2].split()[0]
        except (IOError, OSError):
            return True
        if state in ("Z", "X"):  # killed, waiting for its new parent to reap it
            return True
        time.sleep(0.1)
    return False
