# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way the collection writes a file (after community.crypto's ``_io``).

The new content goes to a temporary file in the folder above the target's (same file system;
beside the target only where that folder is another mount), under a name that no runtime, apt,
dnf or systemd reads as configuration (``.<folder>.<name>.XXXX.gpufleet-partial``), is flushed to
disk, and is renamed over the target (``AnsibleModule.atomic_move`` in a module,
:func:`os.replace` on the control host): readers see the old file or the new one, never half of
one. The target's own folder never holds it: CRI-O reads every file under ``crio.conf.d``,
dotfiles and sub-folders included, and will not start on a partial TOML file; containerd's
``conf.d/*.toml`` glob matches dotfiles. A write killed mid-way leaves at most that inert file
one folder up; the next write or removal of the same target takes it away (and any partial an
older version left beside the target: :func:`leftover_partials`). The directory is flushed
after the rename. A backup (``backup=True``) goes one folder up too, as ``<folder>.<name>.<pid>.<date>~``:
beside the file, CRI-O would read it after the new one. An existing file keeps its mode, owner and SELinux
context; a new one gets ``mode`` (0644) and missing parent directories 0755. A symbolic link
is written through: its target gets the content, the link stays a link.

Text is written as UTF-8, strictly: a string carrying lone surrogates (what Python makes of
bytes that are not UTF-8, or of characters outside the Basic Multilingual Plane split in two)
is refused, naming the file, rather than written as bytes no parser accepts.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import tempfile

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

__all__ = ["PARTIAL_SUFFIX", "encode", "leftover_partials", "partial_patterns", "read_file", "remove_file", "replace_file", "write_file"]

#: The suffix of a temporary file beside its target (see the module's docstring).
PARTIAL_SUFFIX = ".gpufleet-partial"


def encode(path, content):
    """``content`` as UTF-8 bytes; a string that is not valid Unicode is refused, naming ``path``."""
    if isinstance(content, bytes):
        return content
    try:
        return content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise GpuFleetError(
            "%s: the new content is not valid Unicode (%s at offset %d: a lone surrogate, as made of bytes that are "
            "not UTF-8 or of a character split in two); nothing was written" % (path, exc.reason, exc.start),
            path=path,
        )


def _target(path):
    """The file a write of ``path`` changes: a symbolic link's final target, else ``path``."""
    return os.path.realpath(path) if os.path.islink(path) else path


def _partial_place(target):
    """``(folder, prefix)`` of ``target``'s temporary files: the folder above its own, when on the same device."""
    folder = os.path.dirname(os.path.abspath(target))
    above = os.path.dirname(folder)
    try:
        same = os.stat(above).st_dev == os.stat(folder).st_dev
    except OSError:
        same = False
    if not same or above == folder:
        return folder, "." + os.path.basename(target)[:64] + "."
    return above, ".%s.%s." % (os.path.basename(folder)[:64], os.path.basename(target)[:64])


def partial_patterns(target):
    """``[(folder, glob)]``: where the temporary files of writes of ``target`` may lie, one folder up and
    beside it (where earlier versions of the collection wrote them, and where a mount point puts them)."""
    folder = os.path.dirname(target)
    name = os.path.basename(target)[:64]
    beside = (folder, ".%s.*%s" % (name, PARTIAL_SUFFIX))
    above = os.path.dirname(folder)
    if above == folder:
        return [beside]
    return [(above, ".%s.%s.*%s" % (os.path.basename(folder)[:64], name, PARTIAL_SUFFIX)), beside]


def leftover_partials(target):
    """The temporary files that writes of ``target`` killed mid-way left (see :func:`partial_patterns`)."""
    found = []
    for folder, pattern in partial_patterns(os.path.abspath(target)):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        found.extend(os.path.join(folder, n) for n in sorted(names) if fnmatch.fnmatchcase(n, pattern))
    return found


def _clean_partials(target):
    for path in leftover_partials(target):
        _discard(path)


def _backup(module, target):
    """``AnsibleModule.backup_local``'s copy of ``target``, moved one folder up as ``<folder>.<name>.<pid>.<date>~``
    (beside the file, CRI-O would read it after the new one, its old settings winning); its path ('' when
    there was nothing to copy, a dangling link)."""
    made = module.backup_local(target)
    folder = _partial_place(target)[0]
    if not made or folder == os.path.dirname(os.path.abspath(made)):
        return made  # the target's folder is a mount point: the copy stays beside it
    suffix = os.path.basename(made)[len(os.path.basename(target)):]
    parent = os.path.basename(os.path.dirname(os.path.abspath(target)))
    dest = os.path.join(folder, "%s.%s%s" % (parent, os.path.basename(target), suffix))
    os.rename(made, dest)
    return dest


def _partial_near(target, data):
    """A flushed temporary file holding ``data`` near ``target`` (see :func:`_partial_place`); returns its path."""
    directory, prefix = _partial_place(target)
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=PARTIAL_SUFFIX, dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        _discard(tmp)
        raise
    return tmp


def _discard(path):
    try:
        os.remove(path)
    except OSError:
        pass


def _sync_directory(directory):
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:  # some file systems cannot sync a directory; the rename is done
        if exc.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def _keep_attributes(tmp, target):
    """Give ``tmp`` the mode and owner of the existing ``target``."""
    st = os.stat(target)
    os.chmod(tmp, st.st_mode & 0o7777)
    try:
        os.chown(tmp, st.st_uid, st.st_gid)
    except PermissionError:  # not root: the file stays ours, as the old one may have been
        pass


def write_file(module, path, content, backup=False, mode=0o644):
    """Atomically replace ``path`` with ``content`` on the module's host; returns the backup path (or None)."""
    target = _target(path)
    data = encode(path, content)
    existed = os.path.exists(target)
    backup_file = None
    try:
        os.makedirs(os.path.dirname(target) or ".", 0o755, exist_ok=True)
        if existed and backup:
            backup_file = _backup(module, target)
        _clean_partials(target)
        tmp = _partial_near(target, data)
        module.add_cleanup_file(tmp)
        if existed:
            _keep_attributes(tmp, target)
        else:
            os.chmod(tmp, mode)
        module.atomic_move(tmp, target, unsafe_writes=module.params.get("unsafe_writes", False))
        if not existed:
            os.chmod(target, mode)
        _sync_directory(os.path.dirname(target))
    except (IOError, OSError) as exc:
        raise GpuFleetError("could not write %s: %s" % (path, exc), path=path)
    return backup_file


def replace_file(path, content, mode=None):
    """Atomically replace ``path`` with ``content`` from the control host's own process (no module).

    ``mode`` is set on the file; without it an existing file keeps its mode and owner, and a new
    one gets 0644.
    """
    target = _target(path)
    data = encode(path, content)
    os.makedirs(os.path.dirname(target) or ".", 0o755, exist_ok=True)
    existed = os.path.exists(target)
    _clean_partials(target)
    tmp = _partial_near(target, data)
    try:
        if existed:
            _keep_attributes(tmp, target)
        if mode is not None or not existed:
            os.chmod(tmp, 0o644 if mode is None else mode)
        os.replace(tmp, target)
    except BaseException:
        _discard(tmp)
        raise
    _sync_directory(os.path.dirname(target))


def remove_file(module, path, backup=False):
    """Remove ``path`` if it exists (a symbolic link itself, not its target); returns the backup path (or None)."""
    backup_file = None
    _clean_partials(_target(path))
    if not os.path.lexists(path):
        return None
    try:
        if backup:
            backup_file = _backup(module, path)
        os.remove(path)
        _sync_directory(os.path.dirname(path))
    except (IOError, OSError) as exc:
        raise GpuFleetError("could not remove %s: %s" % (path, exc), path=path)
    return backup_file


def read_file(path):
    """The text of ``path``, or ``None`` when it does not exist."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    except (IOError, OSError) as exc:
        raise GpuFleetError("could not read %s: %s" % (path, exc), path=path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GpuFleetError("%s is not UTF-8 text: %s; the file was left untouched" % (path, exc), path=path)
