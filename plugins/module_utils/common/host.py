# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host as the modules see it: files under ``host_root``, commands through a runner.

Every module that reads or changes a node goes through :class:`Host`: paths are host paths
(``/etc/os-release``), resolved inside ``host_root`` (a host mounted into a container) so that an
absolute symbolic link on the host never escapes into this machine's files, and commands run
through an injected runner (``chroot host_root`` by default), so the code can be tested, and
replayed from a capture of a real host, without Ansible and without the host.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import signal
import stat
import subprocess
import tempfile

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


def subprocess_runner(host_root: str = "/", timeout: int = 60):
    """A runner ``run(argv) -> (rc, stdout, stderr)``; under ``chroot host_root`` when not /.

    Never raises: a command that cannot start answers rc 127, one that times out rc 124. Each
    command runs in a session of its own, and a timeout kills its whole process group: what the
    command started in the background does not outlive it.
    """

    def run(argv, env=None):
        cmd = list(argv)
        if host_root not in ("", "/"):
            cmd = ["chroot", host_root] + cmd
        group = _Group()
        try:
            proc = subprocess.run(  # noqa: S603 - fixed argv, no shell
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=_command_environ(env),
                timeout=timeout,
                check=False,
                start_new_session=True,
                preexec_fn=group.enter,
            )
        except subprocess.TimeoutExpired:
            group.kill()
            return 124, "", "%s timed out after %s seconds" % (" ".join(argv), timeout)
        except (OSError, ValueError) as exc:
            return 127, "", str(exc)
        finally:
            group.close()
        return (
            proc.returncode,
            proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"),
        )

    return run


def _command_environ(env):
    """This process's environment, in the C locale (the output is parsed), with ``env`` added."""
    environ = dict(os.environ)
    environ.update({"LC_ALL": "C", "LANG": "C"})
    environ.update(env or {})
    return environ


class _Group(object):
    """The process group of one command, whose id (the command's pid: it leads a new session)
    the child sends up a pipe before it runs the command, so that a timeout can kill the group."""

    def __init__(self):
        self._read, self._write = os.pipe()

    def enter(self):
        """In the child, after setsid: send the group's id."""
        os.write(self._write, str(os.getpid()).encode("ascii"))

    def pgid(self):
        """The group's id, or None when the child never sent it."""
        os.close(self._write)
        self._write = None
        sent = os.read(self._read, 32)
        return int(sent) if sent.isdigit() else None

    def kill(self):
        """Kill what is left of the group (subprocess.run killed and reaped its leader).

        The id stays the group's while any of it lives; once it is empty the kernel hands the
        number out again only after going round every other pid.
        """
        pgid = self.pgid()
        if pgid is None:
            return
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:  # nothing left in it
            pass

    def close(self):
        for fd in (self._read, self._write):
            if fd is not None:
                os.close(fd)
        self._read = self._write = None


class Host(object):
    """The host as seen from here: files under ``root``, commands through ``runner``.

    Paths given to its methods are host paths (``/etc/os-release``). Symbolic links are resolved
    inside ``root``, so an absolute link on the host does not escape into this machine's files.
    """

    def __init__(self, root="/", runner=None, kernel_root=None, kernel_release=None, path_env=None,
                 dev_root="/", module=None, tmpdir=None, is_device_node=None):
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
        self.is_device_node = is_device_node or is_char_device

    @classmethod
    def for_module(cls, module, root="/", timeout=None, **kwargs):
        """The host of ``module``: its commands through ``module.run_command`` when ``root`` is /."""
        if (root or "/") == "/":
            def runner(argv, env=None):
                return module.run_command(list(argv), environ_update=dict(env or {}))
        else:
            runner = subprocess_runner(root, timeout or 60)
        return cls(root, runner=runner, module=module, **kwargs)

    # --- paths ----------------------------------------------------------------------------
    def _join(self, base, path):
        if base == "/":
            return path
        return os.path.join(base, path.lstrip("/"))

    def resolve(self, path):
        """The host path with every symbolic link followed, within root."""
        if self.root == "/":
            return os.path.realpath(path)
        parts = [p for p in path.split("/") if p]
        resolved = "/"
        hops = 0
        while parts:
            part = parts.pop(0)
            if part == ".":
                continue
            if part == "..":
                resolved = posixpath.dirname(resolved) or "/"
                continue
            candidate = posixpath.join(resolved, part)
            local = self._join(self.root, candidate)
            if os.path.islink(local):
                hops += 1
                if hops > 40:
                    return candidate
                target = os.readlink(local)
                if target.startswith("/"):
                    resolved = "/"
                parts = [p for p in target.split("/") if p] + parts
            else:
                resolved = candidate
        return resolved

    def local(self, path):
        """The path on this machine of a host file."""
        return self._join(self.root, self.resolve(path))

    def klocal(self, path):
        """The path on this machine of a /proc or /sys file."""
        return self._join(self.kernel_root, path)

    # --- reads ----------------------------------------------------------------------------
    def read_text(self, path, kernel=False):
        local = self.klocal(path) if kernel else self.local(path)
        with open(local, "rb") as handle:
            return handle.read().decode("utf-8", "replace")

    def read_bytes(self, path, kernel=False):
        local = self.klocal(path) if kernel else self.local(path)
        with open(local, "rb") as handle:
            return handle.read()

    def exists(self, path, kernel=False):
        return os.path.exists(self.klocal(path) if kernel else self.local(path))

    def isdir(self, path, kernel=False):
        return os.path.isdir(self.klocal(path) if kernel else self.local(path))

    def listdir(self, path, kernel=False):
        return sorted(os.listdir(self.klocal(path) if kernel else self.local(path)))

    def readlink(self, path, kernel=False):
        return os.readlink(self.klocal(path) if kernel else self._join(self.root, path))

    def isfile(self, path, kernel=False):
        return os.path.isfile(self.klocal(path) if kernel else self.local(path))

    def islink(self, path):
        """True when ``path`` itself (not what it points to) is a symbolic link on the host."""
        return os.path.islink(self._join(self.root, path))

    def is_executable(self, path):
        try:
            mode = os.stat(self.local(path)).st_mode
        except OSError:
            return False
        return stat.S_ISREG(mode) and bool(mode & 0o111)

    def read(self, path, kernel=False):
        """The text of a host file, or None when it does not exist; other errors are raised."""
        try:
            return self.read_text(path, kernel=kernel)
        except FileNotFoundError:
            return None
        except (IOError, OSError) as exc:
            if not self.exists(path, kernel=kernel):
                return None
            raise GpuFleetError("could not read %s: %s" % (path, exc), path=path)

    def mtime(self, path):
        """The host file's modification time, or None when it cannot be read."""
        try:
            return os.stat(self.local(path)).st_mtime
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

    def device_exists(self, path):
        return self.is_device_node(self.dlocal(path))

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
            local = self.local(candidate)
            if os.path.isfile(local) and os.access(local, os.X_OK):
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
        return safe_io.remove_file(self._writer(path), self._join(self.root, path), backup=backup)


def is_char_device(path):
    """True when ``path`` is a character device (not following a final symlink, as CDI does)."""
    try:
        return stat.S_ISCHR(os.lstat(path).st_mode)
    except OSError:
        return False


def make_host(host_root="/", timeout=60):
    """A :class:`Host` for ``host_root`` whose commands run under chroot with ``timeout``."""
    root = os.path.abspath(host_root or "/")
    if not os.path.isdir(root):
        raise GpuFleetError("host_root: '%s' is not a directory" % host_root, host_root=host_root)
    if timeout is None or timeout < 1:
        raise GpuFleetError(
            "command_timeout: %s is not a number of seconds (expected 1 or more)" % timeout,
            command_timeout=timeout,
        )
    return Host(root, runner=subprocess_runner(root, timeout))
