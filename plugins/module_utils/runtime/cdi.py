# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build, in pure Python, the CDI spec that ``nvidia-ctk cdi generate`` writes for a node's GPUs.

What goes in the spec follows NVIDIA Container Toolkit 1.20 (``pkg/nvcdi``, ``internal/discover``):

* the driver version is the loaded kernel module's (``/proc/driver/nvidia/version``), else the
  suffix of ``libcuda.so.<version>``; the driver's library folder is where
  ``libcuda.so.<version>`` is, found through the driver root's ``/etc/ld.so.cache`` (parsed here,
  no ``ldconfig`` needed) or, without one, by scanning the usual library folders;
* every ``*.so.<version>`` in that folder (and its ``vdpau/``), ``libnvidia-nvvm70.so.*``, plus the
  graphics extras (``libnvidia-egl-gbm``, ``libnvidia-egl-wayland``, the Xorg modules);
* the binaries (``nvidia-smi``, ``nvidia-debugdump``, ``nvidia-persistenced``, the MPS pair, IMEX),
  the GSP firmware ``nvidia/<version>/gsp*.bin``, vendor files (Vulkan ICD, EGL vendor, ...), the
  IPC sockets that exist;
* the hooks ``create-symlinks`` (the SONAME and ``.so`` links the host has, read from the ELF
  ``DT_SONAME``), ``enable-cuda-compat``, ``update-ldcache``, ``disable-device-node-modification``
  and ``update-application-profile``, all run through ``nvidia-cdi-hook`` (or ``nvidia-ctk hook``);
* one device per GPU by index and/or UUID with its ``/dev/nvidiaN`` (and DRM nodes), ``all``, and
  the shared control nodes.

Where this differs from nvidia-ctk on purpose, see ``tests/unit/fixtures/cdi/README.md``: device
nodes carry no major/minor/fileMode (the runtime reads them from the host node when the container
starts, so a spec written before a reboot stays right when ``nvidia-uvm`` gets another major), and
binaries are looked for in the driver's own ``bin`` folder first instead of the caller's ``PATH``.

All file access goes through the host adapter (``common.host.Host``, see :func:`driver_host`) so tests
can replay a captured host tree.
"""

from __future__ import annotations

import collections
import errno
import fnmatch
import functools
import json
import os
import posixpath
import re
import stat
import struct
import xml.etree.ElementTree as ET

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import io as safe_io
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host

CDI_VERSION = "0.5.0"
CDI_KIND = "nvidia.com/gpu"
DEFAULT_OUTPUT = "/etc/cdi/nvidia.yaml"
DEFAULT_HOOK_PATH = "/usr/bin/nvidia-cdi-hook"
DEFAULT_FILE_MODE = "0644"

MOUNT_OPTIONS = ("ro", "nosuid", "nodev", "rbind", "rprivate")
IPC_MOUNT_OPTIONS = ("nosuid", "nodev", "rbind", "rprivate", "noexec")

HOOK_CREATE_SYMLINKS = "create-symlinks"
HOOK_CUDA_COMPAT = "enable-cuda-compat"
HOOK_LDCACHE = "update-ldcache"
HOOK_DISABLE_DEVICE_NODE_MODIFICATION = "disable-device-node-modification"
HOOK_APPLICATION_PROFILE = "update-application-profile"
HOOK_NAMES = (
    HOOK_CREATE_SYMLINKS,
    HOOK_CUDA_COMPAT,
    HOOK_LDCACHE,
    HOOK_DISABLE_DEVICE_NODE_MODIFICATION,
    HOOK_APPLICATION_PROFILE,
)
DEVICE_NAME_STRATEGIES = ("index", "uuid", "both")

# Shared device nodes, in nvidia-ctk's order; only those that exist go in the spec.
CONTROL_DEVICE_NODES = ("/dev/nvidia-modeset", "/dev/nvidia-uvm-tools", "/dev/nvidia-uvm", "/dev/nvidiactl")
REQUIRED_CONTROL_NODE = "/dev/nvidiactl"
UVM_DEVICE_NODE = "/dev/nvidia-uvm"

BINARIES = (
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
    "nvidia-imex",
    "nvidia-imex-ctl",
)
# Searched after the driver's own bin folder (see binary_search_dirs); nvidia-ctk's default PATH.
BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
# Where libcuda.so is looked for when the driver root has no ld.so.cache (nvidia-ctk's list).
LIBRARY_DIRS = (
    "/lib64",
    "/usr/lib64",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/local/nvidia/lib64",
    "/lib",
    "/usr/lib",
)
LDCACHE = "/etc/ld.so.cache"
CONFIG_DIRS = ("/etc", "/usr/local/share", "/usr/share")
CONFIG_FILES = (
    "glvnd/egl_vendor.d/10_nvidia.json",
    "egl/egl_external_platform.d/15_nvidia_gbm.json",
    "egl/egl_external_platform.d/10_nvidia_wayland.json",
    "nvidia/nvoptix.bin",
    "X11/xorg.conf.d/10-nvidia.conf",
    "X11/xorg.conf.d/nvidia-drm-outputclass.conf",
)
VULKAN_FILES = (
    "vulkan/icd.d/nvidia_icd.json",
    "vulkan/icd.d/nvidia_layers.json",
    "vulkan/implicit_layer.d/nvidia_layers.json",
)
VULKAN_ARCH_ICD = {"x86_64": "vulkan/icd.d/nvidia_icd.x86_64.json", "aarch64": "vulkan/icd.d/nvidia_icd.aarch64.json"}
XORG_DIRS = tuple(
    posixpath.join(base, sub)
    for base in ("/usr/lib/xorg", "/usr/lib64/xorg", "/usr/X11R6/lib", "/usr/X11R6/lib64")
    for sub in ("modules/drivers", "modules/extensions", "modules/updates/drivers", "modules/updates/extensions")
)
IPC_SOCKETS = ("nvidia-persistenced/socket", "nvidia-fabricmanager/socket")
IPC_SOCKET_DIRS = ("/run", "/var/run")
IPC_MPS_DIR = "/tmp/nvidia-mps"
FIRMWARE_CLASS_PATH = "/sys/module/firmware_class/parameters/path"
PROC_GPUS = "/proc/driver/nvidia/gpus"
PROC_VERSION = "/proc/driver/nvidia/version"
PROC_MIG_CAPS = "/proc/driver/nvidia/capabilities"

_MAX_SYMLINKS = 40
_NVRM_RE = re.compile(r"NVRM version:.*?\s(\d+\.\d+(?:\.\d+)?)\s")
_LIBCUDA_RE = re.compile(r"^libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$")
_BUS_ID_RE = re.compile(r"^(?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


# --------------------------------------------------------------------------------------------
# Host access
# --------------------------------------------------------------------------------------------


def driver_host(driver_root="/", dev_root="/", system_root="/", is_device_node=None, run_command=None,
                kernel_release=None):
    """The host the spec is built from: ``common.host.Host`` whose root is the driver root.

    ``driver_root`` holds the driver's files (libraries, binaries, firmware, ld.so.cache);
    ``dev_root`` the device nodes; ``system_root`` the ``/proc`` and ``/sys`` to read (``/``
    outside tests). ``is_device_node(path)`` decides what counts as a device node (a character
    device on a real host; tests pass plain files); ``run_command(argv)`` returns ``(rc, stdout,
    stderr)`` and is only used for the ``nvidia-smi`` fallback: without it nothing is run.
    """
    return Host(
        _clean_root(driver_root),
        runner=run_command or runs_nothing,
        kernel_root=_clean_root(system_root),
        dev_root=_clean_root(dev_root),
        kernel_release=kernel_release,
        is_device_node=is_device_node,
    )


def runs_nothing(argv, env=None):
    """The runner of a host known from its files alone (a replayed tree): nothing is run."""
    return 127, "", "%s: not run, this host runs no commands" % argv[0]


def module_runner(module):
    """``run_command(argv)`` through the module, in the C locale (nvidia-smi's XML is parsed)."""

    def run(argv, env=None):
        return module.run_command(argv, environ_update={"LC_ALL": "C"})

    return run


def _clean_root(root) -> str:
    root = posixpath.normpath(root or "/")
    return "/" if root in ("/", "//") else root


def _join_root(root: str, path: str) -> str:
    if root == "/":
        return path
    return root + path


def driver_path(host, path: str) -> str:
    """The path on this machine of the driver-root path ``path`` (links not followed)."""
    return _join_root(host.root, path)


# The driver root's files are read with every symbolic link resolved as if the driver root were /,
# and a path that does not resolve is not there (resolve_in_root), whatever the host's own reads say.


def resolve(host, path: str):
    """``path`` (absolute, inside the driver root) with every symlink resolved, or None."""
    return resolve_in_root(host.root, path)


def _isfile(host, path: str) -> bool:
    real = resolve(host, path)
    return real is not None and host.isfile(real)


def _isdir(host, path: str) -> bool:
    real = resolve(host, path)
    return real is not None and host.isdir(real)


def _is_executable(host, path: str) -> bool:
    real = resolve(host, path)
    return real is not None and host.is_executable(real)


def _listdir(host, path: str):
    """Sorted names in a driver-root folder (resolving the folder's symlinks), [] if none."""
    real = resolve(host, path)
    return host.names(real) if real is not None else []


def _read_bytes(host, path: str):
    real = resolve(host, path)
    if real is None:
        return None
    try:
        return host.read_bytes(real)
    except OSError:
        return None


#: How a library is opened for its ELF headers: as the host adapter reads (``common.host``), never
#: blocking (a FIFO swapped in after the check) nor following a final link (the path is resolved).
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _open(host, path: str):
    """A seekable binary file object for a regular driver-root file, or None.

    ``elf_soname`` reads a few headers at their offsets, not the whole library (hundreds of MB
    for the driver's largest), so the file is opened rather than read with ``Host.read_bytes``;
    it is opened under the host adapter's rules all the same: only what ``Host.isfile`` calls a
    regular file, by its path on this machine (``Host.local``), without blocking and without
    following a final link, and looked at again once open. A FIFO, a device or a socket under a
    library's name is never opened, so a read cannot hang the module.
    """
    real = resolve(host, path)
    if real is None or not host.isfile(real):
        return None
    try:
        fd = os.open(host.local(real), _OPEN_FLAGS)
    except OSError:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def _readlink(host, path: str):
    try:
        return host.readlink(path)
    except OSError:
        return None


def _read_kernel(host, path: str):
    """The text of a /proc or /sys file, or None when it cannot be read."""
    try:
        return host.read_text(path, kernel=True)
    except OSError:
        return None


def resolve_in_root(root: str, path: str):
    """Resolve every symlink of the absolute ``path`` as if ``root`` were ``/``.

    Returns the resolved absolute path (inside the root), or None when a component is missing or
    the links loop. Absolute link targets are taken inside the root, as a chroot would.
    """
    pending = [part for part in path.split("/") if part]
    resolved = "/"
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        if part == "..":
            resolved = posixpath.dirname(resolved)
            continue
        candidate = posixpath.join(resolved, part)
        host_path = _join_root(root, candidate)
        try:
            st = os.lstat(host_path)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > _MAX_SYMLINKS:
                return None
            try:
                target = os.readlink(host_path)
            except OSError:
                return None
            if target.startswith("/"):
                resolved = "/"
            pending = [p for p in target.split("/") if p] + pending
            continue
        resolved = candidate
    return resolved


# --------------------------------------------------------------------------------------------
# Parsers
# --------------------------------------------------------------------------------------------


def parse_nvrm_version(text):
    """The driver version in ``/proc/driver/nvidia/version``, or None."""
    if not text:
        return None
    match = _NVRM_RE.search(text)
    return match.group(1) if match else None


def parse_gpu_information(text):
    """``/proc/driver/nvidia/gpus/<bus>/information`` as a dict of its ``Key: value`` lines."""
    info = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info[key.strip()] = value.strip()
    return info


def normalise_bus_id(bus_id: str) -> str:
    """``00000000:00:06.0`` (NVML) or ``0000:00:06.0`` (sysfs) -> ``0000:00:06.0``."""
    bus_id = (bus_id or "").strip().lower()
    parts = bus_id.split(":")
    if len(parts) == 3:
        parts[0] = parts[0][-4:].rjust(4, "0")
    elif len(parts) == 2:
        parts.insert(0, "0000")
    return ":".join(parts)


def parse_nvidia_smi_xml(text):
    """GPUs of ``nvidia-smi -q -x`` as dicts (uuid, bus_id, minor), in NVML index order."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise GpuFleetError("cdi_spec: nvidia-smi -q -x printed XML that does not parse: %s" % exc)
    gpus = []
    for node in root.findall("gpu"):
        uuid = (node.findtext("uuid") or "").strip()
        bus_id = (node.findtext("pci/pci_bus_id") or node.get("id") or "").strip()
        minor = (node.findtext("minor_number") or "").strip()
        gpus.append({"uuid": uuid, "bus_id": normalise_bus_id(bus_id), "minor": minor})
    return gpus


# ld.so.cache (glibc elf/cache.c): the "new" format alone (glibc >= 2.32 default), or embedded
# after the old one.
_OLD_MAGIC = b"ld.so-1.7.0"
_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_NEW_HEADER = struct.Struct("<20sIIB3xI12x")  # magic, nlibs, len_strings, flags, extension_offset
_NEW_ENTRY_SIZE = 24  # int32 flags, uint32 key, uint32 value, uint32 osversion, uint64 hwcap
_OLD_HEADER_SIZE = 16  # 12-byte magic (with NUL) + uint32 nlibs
_OLD_ENTRY_SIZE = 12  # int32 flags, uint32 key, uint32 value
_FLAG_TYPE_MASK = 0x00FF
_FLAG_ELF_TYPES = (0x0001, 0x0003)  # FLAG_ELF, FLAG_ELF_LIBC6
_FLAG_64BIT = (0x0100, 0x0200, 0x0300, 0x0400, 0x0500, 0x0700, 0x0A00, 0x0F00, 0x1000)


def _cstring(data: bytes, offset: int) -> str:
    end = data.find(b"\0", offset)
    if offset < 0 or end < 0:
        raise ValueError("string offset %d outside the cache" % offset)
    return data[offset:end].decode("utf-8", "surrogateescape")


def parse_ldcache(data: bytes):
    """64-bit libraries of a binary ``ld.so.cache`` as ``[(name, path), ...]`` in cache order.

    Raises ValueError for data that is not a cache.
    """
    if data.startswith(_NEW_MAGIC):
        base = 0
    elif data.startswith(_OLD_MAGIC):
        (nlibs,) = struct.unpack_from("<I", data, 12)
        strings = _OLD_HEADER_SIZE + nlibs * _OLD_ENTRY_SIZE
        base = (strings + 7) & ~7
        if not data[base:].startswith(_NEW_MAGIC):
            # Old format only (glibc < 2.32 with --format=old): no hwcap, strings after entries.
            entries = []
            for index in range(nlibs):
                flags, key, value = struct.unpack_from("<iII", data, _OLD_HEADER_SIZE + index * _OLD_ENTRY_SIZE)
                if _is_64bit_elf(flags):
                    entries.append((_cstring(data, strings + key), _cstring(data, strings + value)))
            return entries
    else:
        raise ValueError("not an ld.so.cache (no glibc-ld.so.cache1.1 or ld.so-1.7.0 magic)")
    _magic, nlibs, _len_strings, _flags, _ext = _NEW_HEADER.unpack_from(data, base)
    entries = []
    first = base + _NEW_HEADER.size
    if first + nlibs * _NEW_ENTRY_SIZE > len(data):
        raise ValueError("ld.so.cache is truncated (%d entries announced)" % nlibs)
    for index in range(nlibs):
        flags, key, value = struct.unpack_from("<iII", data, first + index * _NEW_ENTRY_SIZE)
        if _is_64bit_elf(flags):
            entries.append((_cstring(data, base + key), _cstring(data, base + value)))
    return entries


def _is_64bit_elf(flags: int) -> bool:
    return (flags & _FLAG_TYPE_MASK) in _FLAG_ELF_TYPES and (flags & 0xFF00) in _FLAG_64BIT


_PT_LOAD = 1
_PT_DYNAMIC = 2
_DT_NULL = 0
_DT_STRTAB = 5
_DT_SONAME = 14


def elf_soname(handle):
    """The ``DT_SONAME`` of an ELF shared object open in ``handle`` (binary, seekable).

    Returns the name, ``""`` when the object has none, None when it is not ELF or is damaged.
    Only the headers, the dynamic section and one string are read, not the whole library.
    """
    try:
        header = _elf_header(_read_at(handle, 0, 64))
        if header is None or header.phentsize < header.phdr.size or header.phnum > 4096:
            return None
        loads, dynamic = _elf_segments(handle, header)
        if dynamic is None:
            return ""
        strtab, soname = _dynamic_tags(_read_at(handle, dynamic[0], min(dynamic[1], 1 << 20)), header.dyn)
        if soname is None:
            return ""
        if strtab is None:
            return None
        return _elf_string(handle, loads, strtab, soname)
    except (struct.error, ValueError, OSError):
        return None


#: What elf_soname reads from an ELF header: 64-bit or not, where the program headers are (offset,
#: entry size, count), the layout of a program header and of a dynamic entry.
_ElfHeader = collections.namedtuple("_ElfHeader", "is64 phoff phentsize phnum phdr dyn")


def _read_at(handle, offset, size):
    handle.seek(offset)
    chunk = handle.read(size)
    if len(chunk) != size:
        raise ValueError("short read")
    return chunk


def _elf_header(ident):
    """The :data:`_ElfHeader` of the file's first 64 bytes; None when it is not ELF."""
    if ident[:4] != b"\x7fELF":
        return None
    klass, encoding = ident[4], ident[5]
    if encoding not in (1, 2) or klass not in (1, 2):
        return None
    end = "<" if encoding == 1 else ">"
    if klass == 2:
        phoff, = struct.unpack_from(end + "Q", ident, 0x20)
        phentsize, phnum = struct.unpack_from(end + "HH", ident, 0x36)
        # type, flags, offset, vaddr, paddr, filesz
        return _ElfHeader(True, phoff, phentsize, phnum, struct.Struct(end + "IIQQQQ"), struct.Struct(end + "qQ"))
    phoff, = struct.unpack_from(end + "I", ident, 0x1C)
    phentsize, phnum = struct.unpack_from(end + "HH", ident, 0x2A)
    # type, offset, vaddr, paddr, filesz
    return _ElfHeader(False, phoff, phentsize, phnum, struct.Struct(end + "IIIII"), struct.Struct(end + "iI"))


def _elf_segments(handle, header) -> tuple:
    """``(loads, dynamic)``: the PT_LOAD segments' ``(vaddr, offset, size)``, the PT_DYNAMIC's ``(offset, size)`` or None."""
    table = _read_at(handle, header.phoff, header.phentsize * header.phnum)
    loads = []
    dynamic = None
    for index in range(header.phnum):
        fields = header.phdr.unpack_from(table, index * header.phentsize)
        if header.is64:
            p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = fields
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz = fields
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    return loads, dynamic


def _dynamic_tags(section, dyn) -> tuple:
    """``(DT_STRTAB, DT_SONAME)`` of a dynamic section, None for a tag it does not have."""
    strtab = None
    soname = None
    for pos in range(0, len(section) - dyn.size + 1, dyn.size):
        tag, value = dyn.unpack_from(section, pos)
        if tag == _DT_NULL:
            break
        if tag == _DT_STRTAB:
            strtab = value
        elif tag == _DT_SONAME:
            soname = value
    return strtab, soname


def _elf_string(handle, loads, strtab, offset):
    """The string at ``offset`` in the string table at address ``strtab``; None when no segment maps it."""
    for vaddr, file_offset, filesz in loads:
        if vaddr <= strtab < vaddr + filesz:
            handle.seek(file_offset + (strtab - vaddr) + offset)
            raw = handle.read(4096)
            if b"\0" not in raw:
                return None
            return raw[:raw.index(b"\0")].decode("utf-8", "surrogateescape")
    return None


def so_link_name(name: str) -> str:
    """``libfoo.so.1.2.3`` -> ``libfoo.so`` (nvidia-ctk's getSoLink); ``""`` if no ``.so``."""
    stem, ext = posixpath.splitext(name)
    while ext:
        if ext == ".so":
            return stem + ext
        stem, ext = posixpath.splitext(stem)
    return ""


# --------------------------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------------------------


def _mount(host, container_path, host_path=None, options=MOUNT_OPTIONS):
    return {
        "hostPath": host_path if host_path is not None else driver_path(host, container_path),
        "containerPath": container_path,
        "options": list(options),
    }


def _mount_sort_key(mount):
    """nvidia-ctk's order: by depth of the container path, then the path, then the host path."""
    path = posixpath.normpath(mount["containerPath"])
    return (path.count("/"), path, mount["hostPath"])


def _node_sort_key(node):
    path = posixpath.normpath(node["path"])
    return (path.count("/"), path)


def ldcache_libraries(host):
    """``[(name, resolved path)]`` for the driver root's ld.so.cache; ``None`` if there is none."""
    data = _read_bytes(host, LDCACHE)
    if data is None:
        return None
    try:
        entries = parse_ldcache(data)
    except ValueError:
        return None
    result = []
    for name, path in entries:
        real = resolve(host, path)
        if real is not None and _isfile(host, real):
            result.append((name, real))
    return result


def locate_libraries(host, patterns, cache, extra_dirs=()):
    """The resolved paths of the libraries whose cache name or file name matches a pattern, sorted.

    Uses the ld.so.cache when the driver root has one, else scans LIBRARY_DIRS; ``extra_dirs``
    are always scanned as well (the driver's own folder).
    """
    found = set()
    if cache is not None:
        found.update(real for name, real in cache if _matches((name, posixpath.basename(real)), patterns))
    dirs = list(extra_dirs) + (list(LIBRARY_DIRS) if cache is None else [])
    for folder in dirs:
        for name in _listdir(host, folder):
            if not _matches((name,), patterns):
                continue
            real = resolve(host, posixpath.join(folder, name))
            if real is not None and _isfile(host, real):
                found.add(real)
    return sorted(found)


def _matches(names, patterns) -> bool:
    return any(fnmatch.fnmatchcase(n, p) for n in names for p in patterns)


def locate_libcuda(host, version, cache):
    """``(resolved path of libcuda.so.<version>, version)``; raises when there is none."""
    pattern = "libcuda.so.%s" % version if version else "libcuda.so.*.*"
    located = [path for path in locate_libraries(host, [pattern], cache) if _LIBCUDA_RE.match(posixpath.basename(path))]
    if version:
        exact = [path for path in located if posixpath.basename(path) == pattern]
        if exact:
            return exact[0], version
        others = [
            path for path in locate_libraries(host, ["libcuda.so.*.*"], cache)
            if _LIBCUDA_RE.match(posixpath.basename(path))
        ]
        if others:
            raise GpuFleetError(
                "cdi_spec: the loaded kernel module is driver %s but the user-space library under "
                "driver_root %s is %s (driver/library version mismatch): reboot, or reinstall the "
                "driver so both are the same version" % (version, host.root, ", ".join(others)),
                driver_version=version,
                libraries=others,
            )
    elif located:
        path = located[0]
        return path, _LIBCUDA_RE.match(posixpath.basename(path)).group(1)
    where = (
        "%s%s" % (host.root.rstrip("/"), LDCACHE) if cache is not None
        else "%s (no ld.so.cache at %s)" % (", ".join(LIBRARY_DIRS), driver_path(host, LDCACHE))
    )
    raise GpuFleetError(
        "cdi_spec: no NVIDIA driver library found under driver_root %s: looked for %s in %s; "
        "install the driver's user-space libraries or point driver_root at them"
        % (host.root, pattern, where),
        driver_root=host.root,
        looked_for=pattern,
    )


def driver_libraries(host, libdir, version):
    """Every ``*.so.<version>`` of the driver's folder (and ``vdpau/``), plus libnvidia-nvvm70."""
    found = {}
    for folder, patterns in (
        (libdir, ("*.so." + version, "libnvidia-nvvm70.so.*")),
        (posixpath.join(libdir, "vdpau"), ("*.so." + version,)),
    ):
        for name in _listdir(host, folder):
            if not any(fnmatch.fnmatchcase(name, p) for p in patterns):
                continue
            real = resolve(host, posixpath.join(folder, name))
            if real is not None and _isfile(host, real):
                found.setdefault(real, name)
    return sorted(found)


def sonames_for(host, path):
    """``(soname, how)`` for the library at ``path``; how is ``elf`` or ``links``.

    The ELF ``DT_SONAME`` is read when the file is ELF (as nvidia-ctk does). For a file that is
    not (a test fixture, a truncated file), the SONAME is taken from the host's own links: a
    symlink in the same folder pointing straight at the file, that is not the ``.so`` link.
    """
    soname = None
    handle = _open(host, path)
    if handle is not None:
        with handle:
            soname = elf_soname(handle)
    if soname is not None:
        return soname or posixpath.basename(path), "elf"
    folder, name = posixpath.split(path)
    dev_link = so_link_name(name)
    for candidate in _listdir(host, folder):
        if candidate in (name, dev_link) or not candidate.startswith(dev_link + "."):
            continue
        if host.islink(posixpath.join(folder, candidate)) and _readlink(host, posixpath.join(folder, candidate)) == name:
            return candidate, "links"
    return name, "links"


def library_links(host, libraries, version):
    """The ``create-symlinks`` links of nvidia-ctk's WithDriverDotSoSymlinks, in its order."""
    links = []
    seen = set()

    def add(link):
        if link not in seen:
            seen.add(link)
            links.append(link)

    for path in libraries:
        folder, name = posixpath.split(path)
        if name == "libcuda.so." + version:
            # Many applications wrongly assume that libcuda.so exists (e.g. with dlopen).
            add("libcuda.so.1::%s" % posixpath.join(folder, "libcuda.so"))
        elif name == "libGLX_nvidia.so." + version:
            # GLVND requires this symlink for indirect GLX support.
            add("%s::%s" % (name, posixpath.join(folder, "libGLX_indirect.so.0")))
        elif name == "libnvidia-opticalflow.so." + version:
            add("libnvidia-opticalflow.so.1::%s" % posixpath.join(folder, "libnvidia-opticalflow.so"))
        if not name.endswith(".so." + version):
            continue
        soname, _how = sonames_for(host, path)
        # SONAME -> library, when it differs and the host has that link.
        if soname != name and host.islink(posixpath.join(folder, soname)):
            add("%s::%s" % (name, posixpath.join(folder, soname)))
        # .so -> SONAME, when it differs and the host has that link.
        dev_link = so_link_name(soname)
        if dev_link and dev_link != soname and host.islink(posixpath.join(folder, dev_link)):
            add("%s::%s" % (soname, posixpath.join(folder, dev_link)))
    return links


def graphics_libraries(host, libdir, version, cache):
    """``(extra library paths to mount, create-symlinks links)`` for the graphics stack."""
    wanted = [
        "libnvidia-egl-gbm.so.*.*",
        "libnvidia-egl-wayland.so.*.*",
        "libnvidia-allocator.so." + version,
        "libnvidia-vulkan-producer.so." + version,
    ]
    located = locate_libraries(host, wanted, cache, extra_dirs=(libdir,))
    for name in ("nvidia_drv.so", "libglxserver_nvidia.so." + version):
        for folder in _xorg_dirs(libdir):
            candidate = posixpath.join(folder, name)
            if _isfile(host, candidate):
                located.append(candidate)
                break
    mounts = []
    links = []
    for path in located:
        folder, name = posixpath.split(path)
        if name == "libnvidia-allocator.so." + version:
            # gbm/nvidia-drm_gbm.so -> ../libnvidia-allocator.so.1; the library itself is
            # mounted with the driver's libraries.
            links.append("../libnvidia-allocator.so.1::%s" % posixpath.join(folder, "gbm", "nvidia-drm_gbm.so"))
            continue
        if name == "libnvidia-vulkan-producer.so." + version:
            links.append("%s::%s" % (name, posixpath.join(folder, "libnvidia-vulkan-producer.so")))
        elif name == "libglxserver_nvidia.so." + version:
            links.append("%s::%s" % (name, posixpath.join(folder, "libglxserver_nvidia.so")))
        mounts.append(path)
    return mounts, links


def _xorg_dirs(libdir):
    return tuple(
        posixpath.join(libdir, sub)
        for sub in ("nvidia/xorg", "xorg/modules/drivers", "xorg/modules/extensions",
                    "xorg/modules/updates/drivers", "xorg/modules/updates/extensions")
    ) + XORG_DIRS


def binary_search_dirs(libdir):
    """The driver's own ``bin`` first (``/usr/local/nvidia/lib64`` -> ``/usr/local/nvidia/bin``).

    nvidia-ctk walks the caller's PATH instead, which makes its spec depend on the shell it ran
    from; this order is the same on every run and finds what nvidia-ctk found on the test host.
    """
    parts = libdir.rstrip("/").split("/")
    while parts and not parts[-1].startswith("lib"):
        parts.pop()
    own = "/".join(parts[:-1] + ["bin"]) if len(parts) > 1 else ""
    dirs = [own] if own and own not in BIN_DIRS else []
    return dirs + list(BIN_DIRS)


def locate_binaries(host, libdir):
    found = []
    dirs = binary_search_dirs(libdir)
    for name in BINARIES:
        for folder in dirs:
            candidate = posixpath.join(folder, name)
            if _is_executable(host, candidate):
                found.append(candidate)
                break
    return found


def firmware_search_dirs(host):
    dirs = []
    custom = (_read_kernel(host, FIRMWARE_CLASS_PATH) or "").strip()
    if custom.startswith("/"):
        dirs.append(posixpath.normpath(custom))
    release = host.kernel_release()
    dirs += [
        posixpath.join("/lib/firmware/updates", release),
        "/lib/firmware/updates",
        posixpath.join("/lib/firmware", release),
        "/lib/firmware",
    ]
    return dirs


def locate_firmware(host, version):
    found = []
    seen = set()
    for base in firmware_search_dirs(host):
        folder = posixpath.join(base, "nvidia", version)
        for name in _listdir(host, folder):
            if not fnmatch.fnmatchcase(name, "gsp*.bin"):
                continue
            path = posixpath.join(folder, name)
            real = resolve(host, path)
            if real is None or real in seen or not _isfile(host, real):
                continue
            seen.add(real)
            found.append(path)
    return found


def locate_configs(host, machine):
    """``[(host-side path, container path)]`` of the vendor files that exist."""
    found = []
    seen = set()
    for name in CONFIG_FILES:
        for folder in CONFIG_DIRS:
            path = posixpath.join(folder, name)
            if path not in seen and _isfile(host, path):
                seen.add(path)
                found.append((path, path))
    vulkan = list(VULKAN_FILES)
    if machine in VULKAN_ARCH_ICD:
        vulkan.append(VULKAN_ARCH_ICD[machine])
    for name in vulkan:
        # The standard config folders, then the driver root itself (GKE puts them there); the
        # container always sees them under /etc.
        for folder in CONFIG_DIRS + ("/",):
            path = posixpath.join(folder, name)
            if _isfile(host, path):
                if path not in seen:
                    seen.add(path)
                    found.append((path, posixpath.join("/etc", name)))
                break
    return found


def locate_ipc(host):
    found = []
    for name in IPC_SOCKETS:
        for folder in IPC_SOCKET_DIRS:
            path = posixpath.join(folder, name)
            if resolve(host, path) is not None:
                found.append(path)
                break
    if _isdir(host, IPC_MPS_DIR):
        found.append(IPC_MPS_DIR)
    return found


def read_gpus(host, nvidia_smi=None):
    """The GPUs as ``[{index, minor, uuid, bus_id}]`` in NVML index (PCI bus) order.

    Read from ``/proc/driver/nvidia/gpus/*/information``; without it, from ``nvidia-smi -q -x``
    (the CSV query has no minor number, which names the device node).
    """
    gpus = proc_gpus(host)
    source = host.klocal(PROC_GPUS)
    if not gpus and nvidia_smi and host.runner is not runs_nothing:
        gpus, source = nvidia_smi_gpus(host, nvidia_smi)
    if not gpus:
        raise GpuFleetError(
            "cdi_spec: no NVIDIA GPU found: %s lists none (is the nvidia kernel module loaded?)%s"
            % (host.klocal(PROC_GPUS),
               "" if nvidia_smi else " and no nvidia-smi was found under driver_root %s" % host.root),
            looked_in=[host.klocal(PROC_GPUS)],
        )
    for index, gpu in enumerate(gpus):
        gpu["index"] = index
        _check_gpu(gpu, source)
    return gpus


def proc_gpus(host):
    """The GPUs the kernel module lists (not those excluded), by PCI bus id."""
    gpus = []
    for bus in host.names(PROC_GPUS, kernel=True):
        info = parse_gpu_information(_read_kernel(host, posixpath.join(PROC_GPUS, bus, "information")))
        if not info or info.get("GPU Excluded", "").lower().startswith("yes"):
            continue
        gpus.append({
            "uuid": info.get("GPU UUID", ""),
            "bus_id": normalise_bus_id(info.get("Bus Location", bus)),
            "minor": info.get("Device Minor", ""),
        })
    return sorted(gpus, key=lambda gpu: gpu["bus_id"])


def nvidia_smi_gpus(host, nvidia_smi) -> tuple:
    """``(GPUs, the command)`` from ``nvidia-smi -q -x``, run inside the driver root."""
    argv = [nvidia_smi, "-q", "-x"]
    if host.root != "/":
        argv = ["chroot", host.root] + argv
    rc, out, err = host.run(argv)
    source = " ".join(argv)
    if rc != 0:
        raise GpuFleetError(
            "cdi_spec: no GPU under %s and `%s` failed (rc %s): %s"
            % (host.klocal(PROC_GPUS), source, rc, (err or out).strip()[:400]),
            rc=rc,
        )
    return parse_nvidia_smi_xml(out), source


def _check_gpu(gpu, source) -> None:
    if not gpu["uuid"].startswith(("GPU-", "MIG-")) or not gpu["minor"].isdigit():
        raise GpuFleetError(
            "cdi_spec: GPU %s from %s has no usable UUID (%r) or device minor (%r)"
            % (gpu["bus_id"], source, gpu["uuid"], gpu["minor"]),
            gpu=gpu,
        )
    if not _BUS_ID_RE.match(gpu["bus_id"]):
        raise GpuFleetError(
            "cdi_spec: GPU %s from %s has a PCI bus id that does not parse: %r"
            % (gpu["uuid"], source, gpu["bus_id"]),
            gpu=gpu,
        )


def drm_nodes(host, bus_id):
    """``/dev/dri/card*`` and ``renderD*`` of a GPU (from sysfs) that exist under dev_root."""
    nodes = []
    for name in host.names(posixpath.join("/sys/bus/pci/devices", bus_id, "drm"), kernel=True):
        if re.match(r"^(card|renderD)\d+$", name):
            path = posixpath.join("/dev/dri", name)
            if host.device_exists(path):
                nodes.append(path)
    return nodes


def drm_by_path_links(host, bus_id, nodes):
    links = []
    for suffix in ("card", "render"):
        link = "/dev/dri/by-path/pci-%s-%s" % (bus_id, suffix)
        target = host.read_dev_link(link)
        if not target:
            continue
        node = target if target.startswith("/") else posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
        if node in nodes:
            links.append("%s::%s" % (target, link))
    return links


# --------------------------------------------------------------------------------------------
# The spec
# --------------------------------------------------------------------------------------------


class HookFactory(object):
    """Hooks as nvidia-ctk 1.20 writes them: ``nvidia-cdi-hook NAME`` or ``nvidia-ctk hook NAME``."""

    def __init__(self, path=DEFAULT_HOOK_PATH, disabled=()):
        self.path = path
        base = posixpath.basename(path)
        self.fixed = [base, "hook"] if base == "nvidia-ctk" else [base]
        self.disabled = set(disabled)
        if "all" in self.disabled:
            self.disabled.update(HOOK_NAMES)

    def create(self, name, args=()):
        if name in self.disabled:
            return None
        return {
            "hookName": "createContainer",
            "path": self.path,
            "args": self.fixed + [name] + list(args),
            "env": ["NVIDIA_CTK_DEBUG=false"],
        }

    def symlinks(self, links):
        if not links:
            return None
        args = []
        for link in links:
            args += ["--link", link]
        return self.create(HOOK_CREATE_SYMLINKS, args)


def _device_node(host, path):
    node = {"path": path}
    if host.dev_root != "/":
        node["hostPath"] = host.dlocal(path)
    node["permissions"] = "rwm"
    return node


def device_names(gpu, strategy):
    names = []
    if strategy in ("index", "both"):
        names.append(str(gpu["index"]))
    if strategy in ("uuid", "both"):
        names.append(gpu["uuid"])
    return names


def generate(host, hook_path=DEFAULT_HOOK_PATH, device_name_strategy="both", disabled_hooks=(), machine=None):
    """Build the spec. Returns a dict: spec, driver_version, devices, counts, warnings.

    ``machine``: the architecture the Vulkan ICD is named for (default: this machine's).
    """
    check_choices(device_name_strategy, disabled_hooks)
    hooks = HookFactory(hook_path, disabled_hooks)
    libcuda, version, cache = locate_driver(host)
    files = driver_files(host, posixpath.dirname(libcuda), version, cache, machine or os.uname().machine)
    gpus = read_gpus(host, next((b for b in files.binaries if posixpath.basename(b) == "nvidia-smi"), None))
    control_nodes = control_device_nodes(host)
    devices, gpu_nodes, gpu_hooks = gpu_devices(host, gpus, hooks, device_name_strategy)
    common_hooks = shared_hooks(host, hooks, files, version)
    mounts = shared_mounts(host, files)
    spec = {
        "cdiVersion": CDI_VERSION,
        "kind": CDI_KIND,
        "devices": devices,
        "containerEdits": shared_edits(host, files.libdir, control_nodes, common_hooks, mounts),
    }
    return {
        "spec": spec,
        "driver_version": version,
        "devices": [device["name"] for device in devices],
        "counts": {
            "device_nodes": len(set(gpu_nodes) | set(control_nodes)),
            "libraries": len(files.libraries) + len(files.graphics),
            "binaries": len(files.binaries),
            "firmware": len(files.firmware),
            "configs": len(files.configs),
            "ipc": len(files.ipc),
            "hooks": len(common_hooks) + len(gpu_hooks),
            "mounts": len(mounts),
        },
        "warnings": spec_warnings(host, control_nodes, gpus),
    }


def check_choices(device_name_strategy, disabled_hooks) -> None:
    if device_name_strategy not in DEVICE_NAME_STRATEGIES:
        raise GpuFleetError(
            "cdi_spec: device_name_strategy %r is not one of %s"
            % (device_name_strategy, ", ".join(DEVICE_NAME_STRATEGIES))
        )
    unknown = sorted(set(disabled_hooks) - set(HOOK_NAMES) - {"all"})
    if unknown:
        raise GpuFleetError(
            "cdi_spec: disabled_hooks has unknown hook(s) %s (expected any of %s, or all)"
            % (", ".join(unknown), ", ".join(HOOK_NAMES))
        )


def locate_driver(host) -> tuple:
    """``(libcuda's resolved path, driver version, the ld.so.cache's libraries or None)``."""
    kernel_version = parse_nvrm_version(_read_kernel(host, PROC_VERSION))
    cache = ldcache_libraries(host)
    try:
        libcuda, version = locate_libcuda(host, kernel_version, cache)
    except GpuFleetError as exc:
        if kernel_version is not None:
            raise
        raise GpuFleetError(
            exc.msg.replace(
                "cdi_spec: ",
                "cdi_spec: %s names no driver (is the nvidia kernel module loaded?) and " % host.klocal(PROC_VERSION),
                1,
            ),
            **exc.details
        )
    return libcuda, version, cache


#: The driver's files the spec mounts: its library folder, the libraries (and the graphics ones
#: not among them, with their links), binaries, firmware, vendor files ``(host path, container
#: path)`` and IPC sockets.
DriverFiles = collections.namedtuple(
    "DriverFiles", "libdir libraries graphics graphics_links binaries firmware configs ipc"
)


def driver_files(host, libdir, version, cache, machine) -> DriverFiles:
    libraries = driver_libraries(host, libdir, version)
    graphics, graphics_links = graphics_libraries(host, libdir, version, cache)
    return DriverFiles(
        libdir=libdir,
        libraries=libraries,
        graphics=[path for path in graphics if path not in libraries],
        graphics_links=graphics_links,
        binaries=locate_binaries(host, libdir),
        firmware=locate_firmware(host, version),
        configs=locate_configs(host, machine),
        ipc=locate_ipc(host),
    )


def control_device_nodes(host) -> list:
    """The shared device nodes that exist; nvidiactl must."""
    if not host.device_exists(REQUIRED_CONTROL_NODE):
        raise GpuFleetError(
            "cdi_spec: %s is not a device node: the NVIDIA driver has not created its control "
            "device (run nvidia-smi or nvidia-modprobe once, or check dev_root %s)"
            % (host.dlocal(REQUIRED_CONTROL_NODE), host.dev_root),
            dev_root=host.dev_root,
        )
    return [path for path in CONTROL_DEVICE_NODES if host.device_exists(path)]


def gpu_devices(host, gpus, hooks, strategy) -> tuple:
    """``(devices, every GPU's device nodes, their by-path hooks)``: one device per GPU and name, then ``all``."""
    devices, all_nodes, all_hooks = [], [], []
    for gpu in gpus:
        nodes, edits = gpu_edits(host, gpu, hooks)
        all_hooks += edits.get("hooks", [])
        devices += [{"name": name, "containerEdits": edits} for name in device_names(gpu, strategy)]
        all_nodes += [p for p in nodes if p not in all_nodes]
    all_edits = {"deviceNodes": sorted((_device_node(host, p) for p in all_nodes), key=_node_sort_key)}
    if all_hooks:
        all_edits["hooks"] = all_hooks
    devices.sort(key=lambda device: device["name"])
    devices.append({"name": "all", "containerEdits": all_edits})
    return devices, all_nodes, all_hooks


def gpu_edits(host, gpu, hooks) -> tuple:
    """``(device nodes, container edits)`` of one GPU: its /dev/nvidiaN, its DRM nodes and their by-path links."""
    node = "/dev/nvidia%s" % gpu["minor"]
    if not host.device_exists(node):
        raise GpuFleetError(
            "cdi_spec: GPU %s (%s, minor %s) has no device node %s: run nvidia-smi or "
            "nvidia-modprobe once so the driver creates it, or check dev_root %s"
            % (gpu["bus_id"], gpu["uuid"], gpu["minor"], host.dlocal(node), host.dev_root),
            gpu=gpu,
        )
    nodes = [node] + drm_nodes(host, gpu["bus_id"])
    edits = {"deviceNodes": sorted((_device_node(host, p) for p in nodes), key=_node_sort_key)}
    by_path = hooks.symlinks(drm_by_path_links(host, gpu["bus_id"], nodes))
    if by_path:
        edits["hooks"] = [by_path]
    return nodes, edits


def shared_hooks(host, hooks, files, version) -> list:
    """The hooks every device gets, in nvidia-ctk's order (those disabled left out)."""
    folders = sorted({posixpath.dirname(p) for p in files.libraries})
    made = [
        hooks.symlinks(files.graphics_links),
        hooks.symlinks(library_links(host, files.libraries, version)),
        hooks.create(HOOK_CUDA_COMPAT, ["--host-driver-version=%s" % version]),
        hooks.create(HOOK_LDCACHE, [arg for folder in folders for arg in ("--folder", folder)]),
        hooks.create(HOOK_DISABLE_DEVICE_NODE_MODIFICATION),
        hooks.create(HOOK_APPLICATION_PROFILE),
    ]
    return [hook for hook in made if hook]


def shared_mounts(host, files) -> list:
    """Every file of the driver's that containers get, in nvidia-ctk's order."""
    mounts = [_mount(host, p) for p in files.libraries + files.graphics + files.binaries + files.firmware]
    mounts += [_mount(host, container, driver_path(host, hostp)) for hostp, container in files.configs]
    mounts += [_mount(host, p, options=IPC_MOUNT_OPTIONS) for p in files.ipc]
    return sorted(mounts, key=_mount_sort_key)


def shared_edits(host, libdir, control_nodes, common_hooks, mounts) -> dict:
    """The spec's own ``containerEdits``: environment, control nodes, hooks, mounts."""
    common = {
        "env": sorted(["NVIDIA_CTK_LIBCUDA_DIR=%s" % libdir, "NVIDIA_VISIBLE_DEVICES=void"]),
        "deviceNodes": sorted((_device_node(host, p) for p in control_nodes), key=_node_sort_key),
    }
    if common_hooks:
        common["hooks"] = common_hooks
    common["mounts"] = mounts
    return common


def spec_warnings(host, control_nodes, gpus) -> list:
    warnings = []
    if UVM_DEVICE_NODE not in control_nodes:
        warnings.append(
            "%s does not exist, so the spec does not give it to containers and CUDA will fail in "
            "them: create it (nvidia-modprobe -u -c=0) and run this again" % host.dlocal(UVM_DEVICE_NODE)
        )
    if any(host.names(posixpath.join(PROC_MIG_CAPS, "gpu%s" % g["minor"], "mig"), kernel=True) for g in gpus):
        warnings.append(
            "MIG is enabled on at least one GPU; this spec describes full GPUs only (no MIG "
            "devices): use nvidia-ctk cdi generate for MIG devices"
        )
    return warnings


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------

# A plain YAML scalar must not be read back as anything but this string, by a YAML 1.1 reader
# (PyYAML, go-yaml v2) or a 1.2 one (go-yaml v3, which the CDI library uses). Everything else is
# written double-quoted in JSON syntax, which YAML reads the same.
_PLAIN_RE = re.compile(r"^(?:[A-Za-z0-9_/.]|-[A-Za-z0-9_-])[A-Za-z0-9_/.:=+-]*$")
_IMPLICIT_RES = (
    re.compile(r"^(?:~|null|Null|NULL)$"),
    re.compile(r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$"),
    re.compile(r"^[-+]?(?:0b[0-1_]+|0o?[0-7_]+|(?:0|[1-9][0-9_]*)|0x[0-9a-fA-F_]+|[1-9][0-9_]*(?::[0-5]?[0-9])+)$"),
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+]?[0-9]+)?$"),
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*$"),
    re.compile(r"^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
    re.compile(r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"),
    re.compile(r"^(?:=|<<)$"),
)


def yaml_scalar(value) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if (
        _PLAIN_RE.match(text)
        and not text.endswith(":")
        and not text.startswith("---")
        and not any(regex.match(text) for regex in _IMPLICIT_RES)
    ):
        return text
    return json.dumps(text)


def _emit(value, indent, lines, prefix):
    """Append ``value`` at ``indent``; ``prefix`` is put before the first line (``- `` for items)."""
    if isinstance(value, dict):
        _emit_mapping(value, indent, lines, prefix)
    elif isinstance(value, list):
        _emit_sequence(value, indent, lines)
    else:
        lines.append(" " * indent + prefix + yaml_scalar(value))


def _emit_mapping(value, indent, lines, prefix):
    pad = " " * indent
    first_pad = (pad[:-len(prefix)] + prefix) if prefix else pad
    for index, (key, item) in enumerate(value.items()):
        head = first_pad if index == 0 else pad
        if isinstance(item, (dict, list)) and item:
            lines.append("%s%s:" % (head, yaml_scalar(key)))
            _emit(item, indent + 2, lines, "")
        else:
            lines.append("%s%s: %s" % (head, yaml_scalar(key), _flow(item)))
    if not value:
        lines.append(first_pad + "{}")


def _emit_sequence(value, indent, lines):
    pad = " " * indent
    for item in value:
        if isinstance(item, dict) and item:
            _emit(item, indent + 2, lines, "- ")
        elif isinstance(item, list) and item:
            lines.append(pad + "-")
            _emit(item, indent + 2, lines, "")
        else:
            lines.append(pad + "- " + _flow(item))


def _flow(value) -> str:
    """An empty mapping or sequence, or a scalar, on the line of its key or dash."""
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return yaml_scalar(value)


def to_yaml(data) -> str:
    """A small, deterministic block-style YAML writer for the spec's plain data."""
    lines = []
    _emit(data, 0, lines, "")
    return "\n".join(lines) + "\n"


def render(spec, output_path, driver_version=None) -> str:
    """The file text: JSON for ``*.json`` outputs, else YAML with a header comment."""
    if output_path.endswith(".json"):
        return json.dumps(spec, indent=2) + "\n"
    header = "---\n# Managed by gpufleet.nvidia.cdi_spec%s; local changes are overwritten.\n" % (
        " (driver %s)" % driver_version if driver_version else ""
    )
    return header + to_yaml(spec)


def check_output_path(path: str) -> None:
    if not path.startswith("/"):
        raise GpuFleetError("cdi_spec: output %r must be an absolute path" % path)
    if _dotted(path) or _control(path):
        raise GpuFleetError("cdi_spec: output %r must be an absolute path without '.' or '..' parts or control characters" % path)
    if not (path.endswith(".yaml") or path.endswith(".json")):
        raise GpuFleetError(
            "cdi_spec: output %r must end in .yaml or .json (the CDI registry reads only those)" % path
        )


# --------------------------------------------------------------------------------------------
# Applying it
# --------------------------------------------------------------------------------------------

#: The bits a spec's mode must not have: its hooks run as root, so no one else may write it
#: (group and world write), and a spec is no program (setuid, setgid, sticky).
FORBIDDEN_MODE_BITS = 0o7022
MODE_WORDS = (
    "a file mode (octal, e.g. 0644, or symbolic, e.g. u=rw,g=r,o=r) that is not writable by the group or the world "
    "and has no setuid, setgid or sticky bit (the spec's hooks run as root)"
)
#: The options that are host paths: absolute, without '.' or '..' parts.
PATH_OPTIONS = ("driver_root", "dev_root", "nvidia_cdi_hook_path")
PATH_WORDS = "an absolute path (starting with '/', without '.' or '..' parts or control characters)"


def _dotted(path: str) -> bool:
    return any(part in (".", "..") for part in path.split("/"))


def _control(path: str) -> bool:
    return any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path)


def absolute_path(value):
    """A host path the spec or the module uses as it is: absolute, no ``.``/``..`` part, no control character."""
    if not isinstance(value, str) or not value.startswith("/") or _dotted(value) or _control(value):
        raise inputs.Invalid(PATH_WORDS)
    return value


class _ModeBase(object):
    """What a symbolic mode is applied to: the spec's mode now, or a new file's 0644."""

    def __init__(self, mode):
        self.st_mode = stat.S_IFREG | mode


def spec_mode(value, base=0o644, symbolic=None):
    """The mode a spec may have (a number), from an octal number or string, or a symbolic mode applied to ``base``.

    ``symbolic(stat, text)``: Ansible's parser of symbolic modes (``AnsibleModule._symbolic_mode_to_octal``).
    """
    if isinstance(value, str) and value[:1].isalpha() and symbolic is not None:
        try:  # Ansible's parser raises ValueError, and other errors for odd input
            value = symbolic(_ModeBase(base), value)
        except Exception:  # pylint: disable=broad-except
            raise inputs.Invalid(MODE_WORDS)
    try:
        return inputs.file_mode(value, forbid=FORBIDDEN_MODE_BITS)
    except inputs.Invalid:
        raise inputs.Invalid(MODE_WORDS)


def check_params(module, path: str) -> None:
    """The output, the host paths and the mode checked before anything is read or written (check mode too)."""
    check_output_path(path)
    for option in PATH_OPTIONS:
        if module.params.get(option) is not None:
            inputs.checked("cdi_spec: %s" % option, absolute_path, module.params[option])
    mode = module.params.get("mode")
    if mode is not None:
        try:
            base = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            base = int(DEFAULT_FILE_MODE, 8)
        inputs.checked("cdi_spec: mode", functools.partial(spec_mode, base=base, symbolic=module._symbolic_mode_to_octal), mode)


def read_current(path: str):
    """The current file text, or None when there is no file."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise GpuFleetError("cdi_spec: cannot read %s: %s" % (path, exc), path=path)


def plan(current, desired):
    """``(changed, diff)`` for going from ``current`` to ``desired`` (None = no file)."""
    changed = current != desired
    diff = {
        "before": current or "",
        "after": desired or "",
    }
    return changed, diff


def write_spec(module, path: str, text: str) -> None:
    """Write the spec with common.io's atomic writer (an existing file keeps its mode), in cdi_spec's words on failure."""
    try:
        safe_io.write_file(module, path, text)
    except GpuFleetError as exc:
        cause = exc.__context__ or exc.msg  # the OSError that common.io reports
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            raise GpuFleetError("cdi_spec: cannot create %s: %s" % (folder, cause), path=path)
        raise GpuFleetError("cdi_spec: cannot write a temporary file in %s: %s" % (module.tmpdir, cause))


def remove_spec(module, path: str) -> None:
    """Remove the spec with common.io, in cdi_spec's words on failure."""
    try:
        safe_io.remove_file(module, path)
    except GpuFleetError as exc:
        raise GpuFleetError("cdi_spec: cannot remove %s: %s" % (path, exc.__context__ or exc.msg), path=path)


def run(module):
    """The module's whole job; returns the exit_json dict or raises GpuFleetError."""
    params = module.params
    path = params["output"]
    check_params(module, path)
    current = read_current(path)
    if params["state"] == "absent":
        changed, diff, found = _remove(module, path, current)
    else:
        changed, diff, found = _write(module, path, current)
    result = dict({"changed": changed, "path": path}, **found)
    if module._diff:
        diff.update({"before_header": path, "after_header": path})
        result["diff"] = diff
    return result


def _remove(module, path, current) -> tuple:
    """``(changed, diff, result)`` of removing the spec."""
    changed, diff = plan(current, None)
    if changed and not module.check_mode:
        remove_spec(module, path)
    return changed, diff, dict(devices=[], counts={}, spec={})


def _write(module, path, current) -> tuple:
    """``(changed, diff, result)`` of writing the spec of the node's GPUs (and the file's mode)."""
    generated = _generate(module)
    desired = render(generated["spec"], path, generated["driver_version"])
    changed, diff = plan(current, desired)
    if changed and not module.check_mode:
        write_spec(module, path, desired)
    mode = module.params["mode"]
    if mode is None and current is None:
        mode = DEFAULT_FILE_MODE
    if mode is not None and (os.path.exists(path) or not module.check_mode):
        changed = module.set_mode_if_different(path, mode, changed)
    found = dict(
        devices=generated["devices"],
        counts=generated["counts"],
        driver_version=generated["driver_version"],
        spec=generated["spec"],
    )
    return changed, diff, found


def _generate(module):
    """:func:`generate` with the module's parameters; its warnings (and a missing hook program) go to module.warn."""
    params = module.params
    host = driver_host(driver_root=params["driver_root"], dev_root=params["dev_root"], run_command=module_runner(module))
    generated = generate(
        host,
        hook_path=params["nvidia_cdi_hook_path"],
        device_name_strategy=params["device_name_strategy"],
        disabled_hooks=params["disabled_hooks"] or (),
    )
    for warning in generated["warnings"]:
        module.warn(warning)
    if not os.path.exists(params["nvidia_cdi_hook_path"]) and set(params["disabled_hooks"] or ()) != {"all"}:
        module.warn(
            "%s does not exist: containers given these CDI devices will fail to start until the "
            "NVIDIA Container Toolkit (nvidia-cdi-hook) is installed" % params["nvidia_cdi_hook_path"]
        )
    return generated
