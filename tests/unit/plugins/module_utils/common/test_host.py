"""Tests of module_utils/common/host.py: the one host adapter, on small host trees made here.

The adapter's reads under a host root are also exercised by every replayed capture
(test_gpu_facts.py, test_validate.py, test_driver*.py); these tests pin what each method
promises on its own: links resolved inside the root, lenient and strict reads, globbing, device
nodes under their own root, commands with added environment, and writes through a module.
"""

from __future__ import annotations

import os
import re

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as H
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.common.fakes import FakeModule


def _tree(root, files):
    for rel, text in files.items():
        path = os.path.join(str(root), rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)


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


def test_executables(tmp_path):
    _tree(tmp_path, {"usr/bin/tool": "#!/bin/sh\n", "usr/bin/data": "", "dev/nvidia0": ""})
    os.chmod(str(tmp_path / "usr" / "bin" / "tool"), 0o755)
    host = H.Host(str(tmp_path), runner=lambda argv: (0, "", ""), kernel_root=str(tmp_path),
                  dev_root=str(tmp_path), path_env="")
    assert host.is_executable("/usr/bin/tool") and not host.is_executable("/usr/bin/data")
    assert host.which("tool") == "/usr/bin/tool" and host.which("data") is None


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


def test_a_module_host_runs_with_a_timeout_and_writes_atomically(tmp_path):
    module = FakeModule(tmp_path / "tmp")
    os.makedirs(module.tmpdir)
    host = H.Host.for_module(module)
    assert host.run(["sh", "-c", "echo $GPUFLEET_X"], env={"GPUFLEET_X": "y"}) == (0, "y\n", "")
    assert module.commands == []  # not through run_command, which has no timeout
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


# --- what is not a small regular file inside the root ---------------------------------------------


def _bare(root, **kwargs):
    return H.Host(str(root), runner=lambda argv: (0, "", ""), kernel_root=str(root), **kwargs)


@pytest.mark.parametrize("kind, detail", [("fifo", "not a regular file but a FIFO"), ("device", "not a regular file but a character device")])
def test_reads_refuse_what_is_not_a_regular_file_without_blocking(tmp_path, kind, detail):
    """A FIFO would block a read forever, /dev/zero never end: both refused before a byte is read."""
    path = str(tmp_path / "etc" / "thing")
    os.makedirs(os.path.dirname(path))
    if kind == "fifo":
        os.mkfifo(path)
        host = _bare(tmp_path)
        host_path, kernel = "/etc/thing", False
    else:
        os.symlink("/dev/zero", path)
        host = H.Host("/", runner=lambda argv: (0, "", ""), kernel_root="/")
        host_path, kernel = path, False
    for read in (host.read_text, host.read_bytes):
        with pytest.raises(OSError) as exc:
            read(host_path, kernel=kernel)
        assert exc.value.strerror == detail
    with pytest.raises(GpuFleetError, match="could not read %s: .*%s" % (re.escape(host_path), detail)):
        host.read(host_path)


def test_a_socket_and_a_folder_are_refused_too(tmp_path):
    import socket

    sock = socket.socket(socket.AF_UNIX)
    os.makedirs(str(tmp_path / "run"))
    old = os.getcwd()
    os.chdir(str(tmp_path / "run"))  # a short name: AF_UNIX paths are at most 107 bytes
    try:
        sock.bind("s")
    finally:
        os.chdir(old)
    host = _bare(tmp_path)
    try:
        with pytest.raises(OSError) as exc:
            host.read_bytes("/run/s")
        assert exc.value.strerror == "not a regular file but a socket"
    finally:
        sock.close()
    with pytest.raises(IsADirectoryError):
        host.read_text("/run")


def test_reads_stop_at_the_cap(tmp_path):
    """At most ``cap`` bytes, whatever the file's size says (sysfs says 4096 for any attribute)."""
    _tree(tmp_path, {"etc/big": "x" * 101, "etc/fits": "y" * 100, "sys/attr": "z" * 101})
    host = _bare(tmp_path)
    assert host.read_text("/etc/fits", cap=100) == "y" * 100
    assert host.read_bytes("/etc/fits", cap=100) == b"y" * 100
    with pytest.raises(OSError) as exc:
        host.read_bytes("/etc/big", cap=100)
    assert exc.value.strerror == "larger than 100 bytes, the most read of a host file"
    with pytest.raises(OSError):
        host.read_text("/sys/attr", kernel=True, cap=100)
    with pytest.raises(GpuFleetError, match="could not read /etc/big: .*larger than 100 bytes"):
        host.read("/etc/big", cap=100)
    assert host.read("/etc/fits", cap=100) == "y" * 100
    # the defaults: 16 MiB of a host file, 1 MiB of a /proc or /sys file
    assert (H.READ_CAP, H.KERNEL_READ_CAP) == (16 << 20, 1 << 20)
    _tree(tmp_path, {"proc/huge": "m" * (H.KERNEL_READ_CAP + 1)})
    with pytest.raises(OSError, match="larger than 1048576 bytes"):
        host.read_text("/proc/huge", kernel=True)
    assert len(host.read_text("/proc/huge")) == H.KERNEL_READ_CAP + 1


def _chain(root, count, last):
    """``/l0 -> l1 -> ... -> l<count-1> -> last``: more hops than Linux follows when count > 40."""
    for index in range(count):
        target = "l%d" % (index + 1) if index + 1 < count else last
        os.symlink(target, os.path.join(str(root), "l%d" % index))


def test_no_link_leaves_the_root(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    _tree(outside, {"secret": "outside\n", "victim": "keep\n"})
    os.symlink("secret", str(outside / "link"))
    _tree(root, {"etc/x": ""})
    os.symlink(str(outside / "secret"), str(root / "etc" / "absolute"))
    os.symlink("../../../../../../../../.." + str(outside / "secret"), str(root / "etc" / "above"))
    os.symlink(str(outside), str(root / "folder"))
    os.makedirs(str(root / "proc"))
    os.symlink(str(outside / "secret"), str(root / "proc" / "modules"))
    _chain(root, 45, str(outside / "secret"))
    host = _bare(root)
    for path in ("/etc/absolute", "/etc/above", "/folder/secret", "/l0"):
        assert host.read(path) is None, path
        assert not host.exists(path) and not host.isfile(path), path
        assert host.mtime(path) is None, path
        with pytest.raises(OSError):
            host.read_bytes(path)
    # /proc and /sys are read under the kernel root, and stay inside it the same way
    assert host.read("/proc/modules", kernel=True) is None and not host.exists("/proc/modules", kernel=True)
    # a link's own folder is resolved inside the root: nothing outside is looked at, or removed
    assert not host.islink("/folder/link") and host.islink("/folder")
    with pytest.raises(OSError):
        host.readlink("/folder/link")
    module = FakeModule(tmp_path / "tmp")
    os.makedirs(module.tmpdir)
    H.Host(str(root), runner=lambda argv: (0, "", ""), kernel_root=str(root), module=module).remove("/folder/victim")
    assert open(str(outside / "victim")).read() == "keep\n"
    assert host.resolve("/l0").startswith("/l")  # where the walk stopped, as before
    assert host.resolve("/folder/secret") == str(outside / "secret")


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


def test_a_module_host_kills_a_command_past_its_timeout_with_what_it_started(tmp_path):
    """Host.for_module ran commands through run_command, without a timeout: a hung one hung the module."""
    module = FakeModule(tmp_path / "tmp")
    pidfile = str(tmp_path / "child.pid")
    host = H.Host.for_module(module, timeout=1)
    rc, out, err = host.run(["sh", "-c", "sleep 30 & echo $! > %s; sleep 30" % pidfile])
    assert (rc, out) == (124, "") and err.endswith("timed out after 1 seconds")
    assert _gone(int(open(pidfile).read()))


def test_a_module_host_has_the_documented_default_timeout(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(H, "subprocess_runner", lambda root, timeout: seen.append((root, timeout)) or (lambda argv, env=None: (0, "", "")))
    H.Host.for_module(FakeModule("/tmp"))
    H.Host.for_module(FakeModule("/tmp"), root=str(tmp_path) + "/", timeout=7)
    assert seen == [("/", H.COMMAND_TIMEOUT), (str(tmp_path), 7)] and H.COMMAND_TIMEOUT == 900


def test_a_module_host_checks_its_root_and_timeout(tmp_path):
    with pytest.raises(GpuFleetError) as exc:
        H.Host.for_module(FakeModule("/tmp"), str(tmp_path / "missing"))
    assert exc.value.msg == "host_root: '%s' is not a directory" % (tmp_path / "missing")
    with pytest.raises(GpuFleetError) as exc:
        H.Host.for_module(FakeModule("/tmp"), str(tmp_path), 0)
    assert exc.value.msg == "command_timeout: 0 is not a number of seconds (expected 1 or more)"
    host = H.Host.for_module(FakeModule("/tmp"), str(tmp_path) + "/")
    assert host.root == str(tmp_path)
    assert host.kernel_root == "/"  # an empty host root: /proc and /sys of this machine


def test_a_module_host_writes_bytes_as_they_are_and_a_new_file_gets_its_mode(tmp_path):
    """What the driver's journal puts back: a file's bytes (not UTF-8 here) and its mode."""
    host = H.Host.for_module(FakeModule(tmp_path / "tmp"), str(tmp_path))
    host.write("/etc/apt/sources.list", b"# caf\xe9\n", mode=0o640)
    path = str(tmp_path / "etc" / "apt" / "sources.list")
    with open(path, "rb") as handle:
        assert handle.read() == b"# caf\xe9\n"
    assert os.stat(path).st_mode & 0o777 == 0o640


def test_the_output_of_a_command_is_capped_to_its_tail_without_blocking():
    """20 MiB on stdout and 3 MiB on stderr, both pipes at once: subprocess.run kept it all in memory."""
    run = H.subprocess_runner("/", timeout=60, cap=1 << 20)
    script = "head -c 20971520 /dev/zero | tr '\\0' a; head -c 3145728 /dev/zero | tr '\\0' b >&2; echo; echo last line"
    rc, out, err = run(["sh", "-c", script])
    assert rc == 0
    marker = "[output cut: the first %d of %d bytes left out, the last %d kept]\n"
    assert out == marker % (20971520 + 11 - (1 << 20), 20971520 + 11, 1 << 20) + "a" * ((1 << 20) - 11) + "\nlast line\n"
    assert err == marker % (3145728 - (1 << 20), 3145728, 1 << 20) + "b" * (1 << 20)


def test_output_under_the_cap_is_kept_whole():
    assert H.subprocess_runner("/", timeout=5, cap=4)(["printf", "abcd"]) == (0, "abcd", "")
    assert H.capped_text(b"cd", 4) == "[output cut: the first 2 of 4 bytes left out, the last 2 kept]\ncd"
    assert H.OUTPUT_CAP == 1 << 20
