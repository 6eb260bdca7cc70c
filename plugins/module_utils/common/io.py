# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write or remove a configuration file safely (after community.crypto's ``_io``).

The new content goes to a temporary file in ``module.tmpdir`` (registered for cleanup),
then :meth:`AnsibleModule.atomic_move` puts it in place: readers see the old file or the
new one, never half of one, and an existing file keeps its mode, owner and SELinux
context. A new file gets ``0644``; missing parent directories are created ``0755``.
"""

from __future__ import annotations

import os
import tempfile

from ansible.module_utils.common.text.converters import to_bytes, to_native

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


def write_file(module, path: str, content: str, backup: bool = False, mode: int = 0o644):
    """Atomically replace ``path`` with ``content``; returns the backup path (or ``None``)."""
    backup_file = None
    existed = os.path.exists(path)
    directory = os.path.dirname(path) or "."
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        if existed and backup:
            backup_file = module.backup_local(path)
        fd, tmp = tempfile.mkstemp(prefix=".gpufleet-", dir=module.tmpdir)
        module.add_cleanup_file(tmp)
        with os.fdopen(fd, "wb") as handle:
            handle.write(to_bytes(content, errors="surrogate_or_strict"))
        module.atomic_move(tmp, path, unsafe_writes=module.params.get("unsafe_writes", False))
        if not existed:
            os.chmod(path, mode)
    except (IOError, OSError) as exc:
        raise GpuFleetError("could not write %s: %s" % (path, to_native(exc)), path=path)
    return backup_file


def remove_file(module, path: str, backup: bool = False):
    """Remove ``path`` if it exists; returns the backup path (or ``None``)."""
    backup_file = None
    if not os.path.lexists(path):
        return None
    try:
        if backup:
            backup_file = module.backup_local(path)
        os.remove(path)
    except (IOError, OSError) as exc:
        raise GpuFleetError("could not remove %s: %s" % (path, to_native(exc)), path=path)
    return backup_file


def read_file(path: str):
    """The text of ``path``, or ``None`` when it does not exist."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    except (IOError, OSError) as exc:
        raise GpuFleetError("could not read %s: %s" % (path, to_native(exc)), path=path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GpuFleetError("%s is not UTF-8 text: %s; the file was left untouched" % (path, exc), path=path)
