# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host as the modules see it: files under ``host_root``, commands through a runner.

Every module that reads or changes a node goes through :class:`Host`: paths are host paths
(``/etc/os-release``), resolved inside ``host_root`` (a host mounted into a container) so that an
absolute symbolic link on the host never escapes into this machine's files, and commands run
through an injected runner (``chroot host_root`` by default), so the code can be tested, and
replayed from a capture of a real host, without Ansible and without the host.

No file of the host can hang or exhaust a read: only regular files are read (a FIFO, a device, a
socket is refused before it is opened), never blocking, and at most a cap of bytes. No command can
hang or exhaust the module either: each has a timeout (:data:`COMMAND_TIMEOUT` for a module's
host, overridable), after which it is killed with everything it started, and of its output only
the last :data:`OUTPUT_CAP` bytes of each stream are kept (read as it comes, so that a command
writing a lot never blocks on a full pipe), marked as cut.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import posixpath
import selectors
import signal
import stat
import subprocess
import tempfile
import time

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import io as safe_io
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

# Where binaries are looked for under host_root (plus the module's PATH when host_root is /).
SEARCH_DIRS = (
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
    "/usr/local/nvidia/bin",
    "/var/lib/rancher/rke2/bin",
    "/opt/bin",
)
# The most a read takes of a host file, and of a /proc or /sys file (a few KiB each): a larger
# file, or an endless one, is refused rather than read whole.
READ_CAP = 16 << 20
KERNEL_READ_CAP = 1 << 20
# The most kept of a command's stdout, and of its stderr: the last bytes (what says why it failed).
OUTPUT_CAP = 1 << 20
# The timeout of a command of Host.for_module, in seconds: apt-get installing the toolkit's
# packages from a slow mirror takes minutes; a command that hangs (a daemon that does not answer)
# must still end. Host.for_module(module, timeout=...) sets another.
COMMAND_TIMEOUT = 900
# Links followed in one path at most, Linux's own limit.
MAX_HOPS = 40
# What a file that is not a regular one is, in an error message (a folder answers as open() does).
_NOT_REGULAR = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)
# A read never blocks (a FIFO swapped in after the check) nor follows a final link (the path is resolved).
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def default_kernel_root(host_root: str) -> str:
    """Where /proc and /sys are read: under host_root when it has them, else this machine's.

    A container that mounts the host at /host often gets an empty /host/proc; /proc/modules and
    sysfs are the kernel's, so the container's own show the same kernel.
    """
    if host_root in ("", "/"):
        return "/"
    if os.path.exists(os.path.join(host_root, "proc", "modules")) or os.path.isdir(
        os.path.join(host_root, "sys", "bus", "pci")
    ):
        return host_root
    return "/"


def subprocess_runner(host_root: str = "/", timeout: int = 60, cap: int = OUTPUT_CAP):
    """A runner ``run(argv) -> (rc, stdout, stderr)``; under ``chroot host_root`` when not /.

    Never raises: a command that cannot start answers rc 127, one that times out rc 124. Each
    command runs in a session of its own, and a timeout kills its whole process group: what the
    command started in the background does not outlive it. Of each stream, the last ``cap`` bytes
    are kept (see :func:`capped_text`).
    """

    def run(argv, env=None):
        cmd = list(argv)
        if host_root not in ("", "/"):
            cmd = ["chroot", host_root] + cmd
        try:
            # run_command has neither a timeout nor a cap, and the read-only modules run under chroot host_root
            proc = subprocess.Popen(  # noqa: S603 - fixed argv, no shell  pylint: disable=ansible-bad-function,consider-using-with
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=_command_environ(env),
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:
            return 127, "", str(exc)
        try:
            out, err = _read_tails(proc, timeout, cap)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.kill()
            proc.wait()
            return 124, "", "%s timed out after %s seconds" % (" ".join(argv), timeout)
        finally:
            proc.stdout.close()
            proc.stderr.close()
        return proc.returncode, capped_text(*out), capped_text(*err)

    return run


def _read_tails(proc, timeout, cap):
    """``((tail, size), (tail, size))`` of ``proc``'s stdout and stderr, read until both end and the
    process exits: the last ``cap`` bytes of each and how many it wrote. Raises TimeoutExpired."""
    deadline = time.monotonic() + timeout
    tails = {proc.stdout.fileno(): [bytearray(), 0], proc.stderr.fileno(): [bytearray(), 0]}
    with selectors.DefaultSelector() as selector:
        for fd in tails:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout)
            for key, unused in selector.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                kept = tails[key.fd]
                kept[0] += chunk
                kept[1] += len(chunk)
                del kept[0][:-cap]
    proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
    return tuple((bytes(tails[f.fileno()][0]), tails[f.fileno()][1]) for f in (proc.stdout, proc.stderr))


def capped_text(tail: bytes, size: int) -> str:
    """A stream's text from its last bytes ``tail`` of ``size`` written; a cut one starts with a line that says so."""
    text = tail.decode("utf-8", "replace")
    if size <= len(tail):
        return text
    return "[output cut: the first %d of %d bytes left out, the last %d kept]\n%s" % (size - len(tail), size, len(tail), text)


def _command_environ(env):
    """This process's environment, in the C locale (the output is parsed), with ``env`` added."""
    environ = dict(os.environ)
    environ.update({"LC_ALL": "C", "LANG": "C"})
    environ.update(env or {})
    return environ


def _kill_group(pid):
    """Kill the process group of the command ``pid``: it leads a session of its own (``start_new_session``), so the
    group's id is its pid, which stays the group's while the command is not reaped (the runner reaps it after this)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:  # nothing left in it
        pass


def _read_regular(local, cap):
    """The bytes of the regular file ``local`` (a path on this machine), at most ``cap`` of them.

    Never blocks and never reads what is not a regular file: ``local`` is looked at before it is
    opened (a FIFO or a device is not even opened), opened without blocking and without following
    a final link, and looked at again once open. Its size is not trusted (sysfs says 4096 for any
    attribute, /proc says 0): ``cap + 1`` bytes are read at most, and more than ``cap`` refused.
    Raises OSError: the system's own, or one saying what the file is or that it is too large.
    """
    _check_regular(os.lstat(local).st_mode, local)
    fd = os.open(local, _READ_FLAGS)
    try:
        _check_regular(os.fstat(fd).st_mode, local)
        data = _read_at_most(fd, cap + 1)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise OSError(errno.EFBIG, "larger than %d bytes, the most read of a host file" % cap)
    return data


def _check_regular(mode, local):
    """Raise OSError unless ``mode`` is a regular file's; a folder's is IsADirectoryError, as open() raises."""
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), local)
    kind = next((name for test, name in _NOT_REGULAR if test(mode)), "a file of an unknown kind")
    raise OSError(errno.EINVAL, "not a regular file but %s" % kind)


def _read_at_most(fd, limit):
    chunks, size = [], 0
    while size < limit:
        chunk = os.read(fd, min(1 << 16, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _parts(path):
    return [part for part in path.split("/") if part and part != "."]


def _link_target(local):
    """What the link ``local`` points to, or None when it is not a link."""
    try:
        return os.readlink(local)
    except OSError:
        return None


def _walk(base, path):
    """``(resolved, complete)``: the host path ``path`` with every symbolic link followed as if
    ``base`` (a folder of this machine) were /, so that no hop leaves it: an absolute target starts
    again from ``base``, and ``..`` stops at it.

    ``complete`` is False when the links loop (more than MAX_HOPS of them): ``resolved`` is then
    the link the walk stopped at, and the path does not exist on the host.
    """
    parts = _parts(path)
    resolved, hops = "/", 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            resolved = posixpath.dirname(resolved)
            continue
        candidate = posixpath.join(resolved, part)
        target = _link_target(os.path.join(base, candidate.lstrip("/")))
        if target is None:
            resolved = candidate
            continue
        hops += 1
        if hops > MAX_HOPS:
            return candidate, False
        if target.startswith("/"):
            resolved = "/"
        parts = _parts(target) + parts
    return resolved, True


class Host(object):
    """The host as seen from here: files under ``root``, commands through ``runner``.

    Paths given to its methods are host paths (``/etc/os-release``). Symbolic links are resolved
    inside ``root``, so an absolute link on the host does not escape into this machine's files.
    """

    def __init__(self, root="/", runner=None, kernel_root=None, kernel_release=None, path_env=None,
                 dev_root="/", module=None, tmpdir=None):
        self.root = root or "/"
        # Commands run through `chroot root` when the host is mounted elsewhere; what talks to
        # the host's own daemons (systemctl) cannot work from there.
        self.chrooted = self.root != "/"
        self.kernel_root = kernel_root if kernel_root is not None else default_kernel_root(self.root)
        # Device nodes are looked for under dev_root: a driver root mounted from a container
        # (/run/nvidia/driver) holds the driver's files, not /dev.
        self.dev_root = dev_root or "/"
        self.runner = runner if runner is not None else subprocess_runner(self.root)
        self._kernel_release = kernel_release
        if path_env is None and self.root == "/":
            path_env = os.environ.get("PATH", "")
        self.path_env = path_env or ""
        # The AnsibleModule that writes (write, remove) and owns the temporary folder.
        self.module = module
        self._tmpdir = tmpdir

    @classmethod
    def for_module(cls, module, root="/", timeout=None, **kwargs):
        """The host of ``module`` at ``root``, its commands run under ``timeout`` seconds (default
        :data:`COMMAND_TIMEOUT`); the one way a module opens its host.

        Not through ``module.run_command``, which has no timeout: through :func:`subprocess_runner`
        (under ``chroot root`` when ``root`` is not /), whose timeout kills the command's process group
        and which keeps the last :data:`OUTPUT_CAP` bytes of each stream. A ``root`` that is not a
        folder, or a ``timeout`` under a second, fails naming the option (``host_root``, ``command_timeout``).
        """
        local = os.path.abspath(root or "/")
        if not os.path.isdir(local):
            raise GpuFleetError("host_root: '%s' is not a directory" % root, host_root=root)
        if timeout is not None and timeout < 1:
            raise GpuFleetError(
                "command_timeout: %s is not a number of seconds (expected 1 or more)" % timeout,
                command_timeout=timeout,
            )
        runner = subprocess_runner(local, timeout or COMMAND_TIMEOUT)
        return cls(local, runner=runner, module=module, **kwargs)

    # --- paths ----------------------------------------------------------------------------
    def _join(self, base, path):
        if base == "/":
            return path
        return os.path.join(base, path.lstrip("/"))

    def resolve(self, path):
        """The host path with every symbolic link followed, within root."""
        if self.root == "/":
            return os.path.realpath(path)
        return _walk(self.root, path)[0]

    def local(self, path):
        """The path on this machine of a host file."""
        return self._join(self.root, self.resolve(path))

    def klocal(self, path):
        """The path on this machine of a /proc or /sys file."""
        return self._join(self.kernel_root, path)

    def _found(self, path, kernel=False):
        """The path on this machine of a host file (a /proc or /sys one when ``kernel``), every link
        followed inside its root; None where the links loop (the file does not exist)."""
        base = self.kernel_root if kernel else self.root
        if base == "/":
            return os.path.realpath(path)
        resolved, complete = _walk(base, path)
        return self._join(base, resolved) if complete else None

    def _found_entry(self, path, kernel=False):
        """The path on this machine of ``path`` itself (a final link is not followed), its folder's
        links followed inside the root; None where they loop."""
        folder, name = posixpath.split(path)
        if name in ("", ".", ".."):
            return self._found(path, kernel)
        local = self._found(folder or "/", kernel)
        return None if local is None else os.path.join(local, name)

    def _found_or_loop(self, path, kernel):
        local = self._found(path, kernel)
        if local is None:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
        return local

    # --- reads ----------------------------------------------------------------------------
    def _read(self, path, kernel, cap):
        default = KERNEL_READ_CAP if kernel else READ_CAP
        return _read_regular(self._found_or_loop(path, kernel), cap or default)

    def read_text(self, path, kernel=False, cap=None):
        """The text of a host file (a /proc or /sys file when ``kernel``); see :meth:`read_bytes`."""
        return self._read(path, kernel, cap).decode("utf-8", "replace")

    def read_bytes(self, path, kernel=False, cap=None):
        """The bytes of a host file (a /proc or /sys file when ``kernel``), at most ``cap`` of them
        (READ_CAP, KERNEL_READ_CAP for a kernel file); OSError when it cannot be read, is not a
        regular file or is larger (:func:`_read_regular`)."""
        return self._read(path, kernel, cap)

    def exists(self, path, kernel=False):
        local = self._found(path, kernel)
        return local is not None and os.path.exists(local)

    def isdir(self, path, kernel=False):
        local = self._found(path, kernel)
        return local is not None and os.path.isdir(local)

    def listdir(self, path, kernel=False):
        return sorted(os.listdir(self._found_or_loop(path, kernel)))

    def readlink(self, path, kernel=False):
        local = self._found_entry(path, kernel)
        if local is None:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
        return os.readlink(local)

    def isfile(self, path, kernel=False):
        local = self._found(path, kernel)
        return local is not None and os.path.isfile(local)

    def islink(self, path):
        """True when ``path`` itself (not what it points to) is a symbolic link on the host."""
        local = self._found_entry(path)
        return local is not None and os.path.islink(local)

    def is_executable(self, path):
        try:
            mode = os.stat(self._found_or_loop(path, False)).st_mode
        except OSError:
            return False
        return stat.S_ISREG(mode) and bool(mode & 0o111)

    def read(self, path, kernel=False, cap=None):
        """The text of a host file, or None when it does not exist; other errors are raised."""
        try:
            return self.read_text(path, kernel=kernel, cap=cap)
        except FileNotFoundError:
            return None
        except (IOError, OSError) as exc:
            if not self.exists(path, kernel=kernel):
                return None
            raise GpuFleetError("could not read %s: %s" % (path, exc), path=path)

    def mtime(self, path):
        """The host file's modification time, or None when it cannot be read."""
        try:
            return os.stat(self._found_or_loop(path, False)).st_mtime
        except (IOError, OSError):
            return None

    def names(self, path, kernel=False):
        """The sorted names in a host folder; [] when it does not exist or cannot be read."""
        try:
            return self.listdir(path, kernel=kernel)
        except (IOError, OSError):
            return []

    def glob(self, pattern):
        """The host paths of the regular files matching ``pattern`` (a pattern in its last part only)."""
        folder, name = posixpath.split(pattern)
        return [posixpath.join(folder, n) for n in self.names(folder)
                if fnmatch.fnmatchcase(n, name) and self.isfile(posixpath.join(folder, n))]

    # --- devices --------------------------------------------------------------------------
    def dlocal(self, path):
        """The path on this machine of a host device node."""
        return self._join(self.dev_root, path)

    def read_dev_link(self, path):
        try:
            return os.readlink(self.dlocal(path))
        except OSError:
            return None

    # --- commands -------------------------------------------------------------------------
    def which(self, name, extra_dirs=()):
        """The host path of an executable ``name``, or None."""
        dirs = [d for d in self.path_env.split(os.pathsep) if d.startswith("/")]
        for directory in list(dirs) + list(SEARCH_DIRS) + list(extra_dirs):
            candidate = posixpath.join(directory, name)
            local = self._found(candidate)
            if local is not None and os.path.isfile(local) and os.access(local, os.X_OK):
                return candidate
        return None

    def run(self, argv, env=None):
        """``(rc, stdout, stderr)`` of ``argv`` on the host; ``env`` adds environment variables."""
        if env:
            return self.runner(list(argv), env)
        return self.runner(list(argv))

    def kernel_release(self):
        if self._kernel_release is None:
            self._kernel_release = os.uname()[2]
        return self._kernel_release

    # --- changes --------------------------------------------------------------------------
    @property
    def tmpdir(self):
        """The temporary folder of this machine that a change builds its files in."""
        if self._tmpdir is None:
            self._tmpdir = self.module.tmpdir if self.module is not None else tempfile.gettempdir()
        return self._tmpdir

    @tmpdir.setter
    def tmpdir(self, value):
        self._tmpdir = value

    def mkdtemp(self, prefix):
        return tempfile.mkdtemp(prefix=prefix, dir=self.tmpdir)

    def _writer(self, path):
        if self.module is None:
            raise GpuFleetError("%s: this host was opened without a module and cannot be changed" % path, path=path)
        return self.module

    def write(self, path, text, backup=False, mode=0o644):
        """Replace a host file with ``text``, atomically; returns the backup's path or None."""
        return safe_io.write_file(self._writer(path), self.local(path), text, backup=backup, mode=mode)

    def remove(self, path, backup=False):
        """Remove a host file if it exists; returns the backup's path or None."""
        module = self._writer(path)
        local = self._found_entry(path)
        if local is None:  # its folder's links loop: there is no such file
            return None
        return safe_io.remove_file(module, local, backup=backup)
