# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA GPUs and NVSwitches on the PCI bus (sysfs), named from pci.ids or the collection's table.
"""

from __future__ import annotations

import errno
import gzip
import io
import posixpath
import zlib

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import gpu_table

NVIDIA_VENDOR = "0x10de"
PCI_IDS_PATHS = (
    "/usr/share/misc/pci.ids",
    "/usr/share/hwdata/pci.ids",
    "/usr/share/pci.ids",
    "/usr/share/misc/pci.ids.gz",
)


def parse_pci_ids(data):
    """Device names of the NVIDIA block of a pci.ids file: ``{0x2335: 'GH100 [H200 SXM 141GB]'}``."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    start = data.find(b"\n10de  ")
    if start < 0:
        if not data.startswith(b"10de  "):
            return {}
        start = 0
    else:
        start += 1
    names = {}
    lines = data[start:].split(b"\n")
    for line in lines[1:]:
        if not line or line.startswith(b"#"):
            continue
        if not line.startswith(b"\t"):
            break  # the next vendor
        if line.startswith(b"\t\t"):
            continue  # a subsystem
        dev, dummy, name = line[1:].partition(b"  ")
        try:
            names[int(dev, 16)] = name.decode("utf-8", "replace").strip()
        except ValueError:
            continue
    return names


def load_pci_ids(host, probes):
    path = next((p for p in PCI_IDS_PATHS if host.exists(p)), None)
    if path is None:
        probes.missing("pci_ids", "no pci.ids file; names come from the collection's table")
        return {}
    try:
        data = host.read_bytes(path)
        if path.endswith(".gz"):
            data = _gunzip(data, common_host.READ_CAP)
    except (IOError, OSError, EOFError, zlib.error) as exc:
        probes.error("pci_ids", "%s: %s" % (path, exc))
        return {}
    names = parse_pci_ids(data)
    probes.ok("pci_ids", "%s: %d NVIDIA device names" % (path, len(names)))
    return names


def _gunzip(data, cap):
    """At most ``cap`` bytes of the gzip file ``data``, uncompressed.

    Raises OSError (not gzip, a bad CRC, more than ``cap`` bytes once uncompressed), EOFError (a
    truncated file) or zlib.error (a corrupt one).
    """
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
        out = handle.read(cap + 1)
    if len(out) > cap:
        raise OSError(errno.EFBIG, "larger than %d bytes once uncompressed" % cap)
    return out


def _hex_id(text, width=4):
    try:
        return "0x%0*x" % (width, int(text.strip(), 16))
    except (ValueError, AttributeError):
        return None


_PCI_DEVICES = "/sys/bus/pci/devices"
# NVIDIA's PCI classes worth reporting (an NVIDIA card's audio, USB and bridge functions are not).
_NVIDIA_CLASSES = {"0x0300": "gpu", "0x0302": "gpu", "0x0680": "nvswitch"}


def gather_pci(host, probes):
    """NVIDIA display/3D controllers and NVSwitches from sysfs."""
    entries = _pci_entries(host, probes)
    if entries is None:
        return [], []
    found = {"gpu": [], "nvswitch": [], "unreadable": []}
    for bus_id in entries:
        kind, pci_class = _nvidia_function(host, posixpath.join(_PCI_DEVICES, bus_id))
        if kind:
            found[kind].append((bus_id, pci_class))
    if found["gpu"]:
        names = load_pci_ids(host, probes)
    else:
        names = {}
        probes.ok("pci_ids", "not read: no NVIDIA GPU to name")
    gpus = [_pci_gpu(host, bus_id, pci_class, names) for bus_id, pci_class in found["gpu"]]
    nvswitches = [bus_id for bus_id, dummy in found["nvswitch"]]
    _probe_pci_devices(probes, len(entries), gpus, nvswitches, [bus_id for bus_id, dummy in found["unreadable"]])
    return gpus, nvswitches


def _pci_entries(host, probes):
    """The bus ids under /sys/bus/pci/devices, or None when it cannot be listed (the probes say why)."""
    try:
        return host.listdir(_PCI_DEVICES, kernel=True)
    except (IOError, OSError) as exc:
        if host.exists(_PCI_DEVICES, kernel=True):
            probes.error("pci_devices", "%s: %s" % (_PCI_DEVICES, exc))
        else:
            probes.missing("pci_devices", "%s does not exist" % _PCI_DEVICES)
        probes.ok("pci_ids", "not read: no PCI devices")
        return None


def _pci_attr(host, device_dir, name):
    """One sysfs attribute of a PCI function, stripped; None when it cannot be read."""
    try:
        return host.read_text(posixpath.join(device_dir, name), kernel=True).strip()
    except (IOError, OSError):
        return None


def _nvidia_function(host, device_dir):
    """``(kind, class)`` of a PCI function: kind ``gpu``, ``nvswitch``, ``unreadable`` (no vendor
    to read) or None (another vendor's, or another function of an NVIDIA card)."""
    vendor = _pci_attr(host, device_dir, "vendor")
    if vendor is None:
        return "unreadable", None
    if vendor.lower() != NVIDIA_VENDOR:
        return None, None
    pci_class = (_pci_attr(host, device_dir, "class") or "").lower()
    return _NVIDIA_CLASSES.get(pci_class[:6]), pci_class


def _pci_gpu(host, bus_id, pci_class, names):
    """The facts of the GPU at ``bus_id``, named from pci.ids' ``names`` or the collection's table."""
    device_dir = posixpath.join(_PCI_DEVICES, bus_id)
    device_id = _hex_id(_pci_attr(host, device_dir, "device") or "")
    sub_vendor = _hex_id(_pci_attr(host, device_dir, "subsystem_vendor") or "")
    sub_device = _hex_id(_pci_attr(host, device_dir, "subsystem_device") or "")
    name, name_source, arch = _gpu_name(names, device_id, sub_vendor, sub_device)
    return {
        "bus_id": bus_id,
        "vendor_id": NVIDIA_VENDOR,
        "device_id": device_id,
        "subsystem_vendor_id": sub_vendor,
        "subsystem_device_id": sub_device,
        "class": pci_class or None,
        "name": name,
        "name_source": name_source,
        "architecture": arch,
        "kernel_driver": _kernel_driver(host, device_dir),
        "numa_node": _numa_node(_pci_attr(host, device_dir, "numa_node")),
    }


def _int16(text):
    return int(text, 16) if text else None


def _gpu_name(names, device_id, sub_vendor, sub_device):
    """``(name, name_source, architecture)``: pci.ids' name, else the table's; the table's
    architecture, else the one of the name's chip."""
    dev = _int16(device_id)
    table_name, table_arch = gpu_table.lookup(dev, _int16(sub_vendor), _int16(sub_device))
    if dev is not None and dev in names:
        name, name_source = names[dev], "pci.ids"
    elif table_name:
        name, name_source = table_name, "table"
    else:
        name, name_source = None, "unknown"
    return name, name_source, table_arch or gpu_table.architecture_from_name(name)


def _kernel_driver(host, device_dir):
    """The driver bound to a PCI function (its ``driver`` link's name), or None."""
    try:
        return posixpath.basename(host.readlink(posixpath.join(device_dir, "driver"), kernel=True))
    except (IOError, OSError):
        return None


def _numa_node(text):
    """sysfs' ``numa_node`` as a number; None when unknown (sysfs says -1 without NUMA)."""
    try:
        numa = int(text) if text is not None else None
    except ValueError:
        return None
    return numa if numa is None or numa >= 0 else None


def _probe_pci_devices(probes, count, gpus, nvswitches, unreadable):
    detail = "%d PCI devices, %d NVIDIA GPUs, %d NVSwitches" % (count, len(gpus), len(nvswitches))
    if unreadable:
        probes.error("pci_devices", "%s; unreadable: %s" % (detail, ", ".join(unreadable[:5])))
    else:
        probes.ok("pci_devices", detail)
