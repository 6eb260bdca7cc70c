# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a kernel module file says of itself: the ``version`` and ``vermagic`` of its ELF
``.modinfo`` section (``.ko``, ``.ko.xz`` with Python's lzma, ``.ko.zst`` where Python has a zstd
decoder), else of ``modinfo`` where kmod is installed; and the one parser of ``modinfo``'s answer.
"""

from __future__ import annotations

import gzip
import lzma
import struct

# A decompressed module larger than this is refused (nvidia.ko is 30 to 100 MiB).
MODULE_CAP = 512 << 20
_ELF_MAGIC = b"\x7fELF"


def _zstd_decompress(data):
    """``data`` decompressed by the Python's zstd decoder, or None when it has none."""
    for name in ("compression.zstd", "zstandard"):
        try:
            zstd = __import__(name, fromlist=["decompress"])
        except ImportError:
            continue
        if name == "zstandard":
            return zstd.ZstdDecompressor().decompressobj().decompress(data)
        return zstd.decompress(data)
    return None


def _module_image(host, path):
    """``(elf_bytes, None)`` of a module file, or ``(None, why)`` when it cannot be read here."""
    try:
        data = host.read_bytes(path, cap=MODULE_CAP)
    except (IOError, OSError) as exc:
        return None, "%s: %s" % (path, exc)
    try:
        if path.endswith(".xz"):
            decoder = lzma.LZMADecompressor()
            data = decoder.decompress(data, MODULE_CAP)
        elif path.endswith(".zst"):
            data = _zstd_decompress(data)
            if data is None:
                return None, "%s: this Python has no zstd decoder (compression.zstd, zstandard)" % path
        elif path.endswith(".gz"):
            data = gzip.decompress(data)
    except (lzma.LZMAError, EOFError, OSError, ValueError) as exc:
        return None, "%s: not a valid compressed file (%s)" % (path, exc)
    return data, None


def _elf_sections(data):
    """``{name: (offset, size)}`` of an ELF image's sections; ValueError on what is not ELF."""
    if data[:4] != _ELF_MAGIC or len(data) < 64:
        raise ValueError("not an ELF file")
    wide, endian = data[4] == 2, "<" if data[5] == 1 else ">"
    if wide:
        shoff = struct.unpack_from(endian + "Q", data, 0x28)[0]
        entsize, count, names_index = struct.unpack_from(endian + "HHH", data, 0x3A)
        layout = endian + "IIQQQQIIQQ"
    else:
        shoff = struct.unpack_from(endian + "I", data, 0x20)[0]
        entsize, count, names_index = struct.unpack_from(endian + "HHH", data, 0x2E)
        layout = endian + "IIIIIIIIII"
    if not count or names_index >= count or shoff + count * entsize > len(data):
        raise ValueError("its section headers lie outside the file")
    headers = [struct.unpack_from(layout, data, shoff + i * entsize) for i in range(count)]
    names_offset = headers[names_index][4]
    sections = {}
    for header in headers:
        start = names_offset + header[0]
        end = data.find(b"\0", start)
        sections[data[start:end].decode("ascii", "replace")] = (header[4], header[5])
    return sections


def parse_modinfo(text):
    """``{key: value}`` of ``modinfo``'s answer (``key: value`` lines; the first value of a key)."""
    info = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in info:
            info[key.strip()] = value.strip()
    return info


def parse_modinfo_section(blob):
    """``{key: value}`` of a ``.modinfo`` section (NUL-separated ``key=value``; the first value of a key)."""
    info = {}
    for entry in blob.split(b"\0"):
        key, sep, value = entry.decode("utf-8", "replace").partition("=")
        if sep and key not in info:
            info[key] = value
    return info


def elf_modinfo(data):
    """The ``.modinfo`` of a module's ELF image; ValueError when it has none."""
    sections = _elf_sections(data)
    if ".modinfo" not in sections:
        raise ValueError("no .modinfo section")
    offset, size = sections[".modinfo"]
    return parse_modinfo_section(data[offset:offset + size])


def _modinfo_command(host, path):
    """``(info, None)`` from ``modinfo FILE`` where kmod is installed, else ``(None, why)``."""
    modinfo = host.which("modinfo")
    if modinfo is None:
        return None, "modinfo not found (kmod not installed)"
    rc, out, err = host.run([modinfo, path])
    if rc != 0:
        return None, "modinfo %s exited %d: %s" % (path, rc, (err or out).strip()[:200])
    return parse_modinfo(out), None


def read_module(host, path):
    """What a module file says of itself: ``{path, state, version, vermagic, kernel, detail}``.

    ``state``: ``ok``, or ``unreadable`` with the reason in ``detail``; ``kernel`` is the first
    word of ``vermagic``, the kernel release the module was built for.
    """
    entry = {"path": path, "state": "unreadable", "version": None, "vermagic": None, "kernel": None, "detail": ""}
    data, why = _module_image(host, path)
    info = None
    if data is not None:
        try:
            info = elf_modinfo(data)
        except (ValueError, struct.error) as exc:
            why = "%s: %s" % (path, exc)
    if info is None:
        info, command_why = _modinfo_command(host, path)
        if info is None:
            entry["detail"] = "%s; %s" % (why, command_why)
            return entry
    entry.update(state="ok", version=info.get("version") or None, vermagic=info.get("vermagic") or None)
    entry["kernel"] = (entry["vermagic"] or "").split(" ", maxsplit=1)[0] or None
    entry["detail"] = "version %s, built for %s" % (entry["version"], entry["kernel"])
    return entry
