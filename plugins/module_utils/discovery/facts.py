# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only discovery of a host's NVIDIA GPUs, driver, container stack, OS and kernel.

Runs daily on thousands of nodes, so it reads files wherever it can and starts a process only
for a binary that exists: at most ``nvidia-smi -q -x``, ``modinfo nvidia``, one ``--version``
per container runtime found, and ``rpm -qf`` on RPM hosts. Every probe ends in a state
(``ok``, ``missing`` or ``error``) with a detail under ``probes``; nothing it reads can make it
raise.

All host access goes through :class:`~ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host.Host`.
"""

from __future__ import annotations

import errno
import gzip
import io
import json
import posixpath
import re
import xml.etree.ElementTree as ET
import zlib

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import toml_subset
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import day2, gpu_table, kernels

NVIDIA_VENDOR = "0x10de"
FACTS_SCHEMA = 1

PCI_IDS_PATHS = (
    "/usr/share/misc/pci.ids",
    "/usr/share/hwdata/pci.ids",
    "/usr/share/pci.ids",
    "/usr/share/misc/pci.ids.gz",
)
LIBCUDA_PATHS = (
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/lib/libcuda.so.1",
    "/usr/local/nvidia/lib64/libcuda.so.1",
)
SECURE_BOOT_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-e098032b8c4c"
MOK_KEY_PATHS = ("/var/lib/dkms/mok.pub", "/var/lib/shim-signed/mok/MOK.der")
CONTAINERD_CONFIG = "/etc/containerd/config.toml"
DOCKER_CONFIG = "/etc/docker/daemon.json"
CRIO_CONFIG = "/etc/crio/crio.conf"
CRIO_DROPIN_DIR = "/etc/crio/crio.conf.d"
TOOLKIT_CONFIG = "/etc/nvidia-container-runtime/config.toml"
RANCHER = {
    "k3s": ("/usr/local/bin/k3s", "/usr/bin/k3s"),
    "rke2": ("/usr/local/bin/rke2", "/usr/bin/rke2", "/opt/rke2/bin/rke2"),
}
# dpkg info lists worth opening when looking for the owner of the driver's files.
_DPKG_LIST_RE = re.compile(r"(nvidia|libcuda|cuda-driver|cuda-compat)")
# Installed packages reported under driver.packages.
_DRIVER_PACKAGE_RE = re.compile(r"(nvidia|^cuda-drivers|^libcuda|^libnvidia)")
# The tables containerd's CRI plugin has had, newest first (the order validation looks them up in).
CRI_PLUGINS = ("io.containerd.cri.v1.runtime", "io.containerd.grpc.v1.cri", "cri")
_DETAIL_MAX = 400


class Probes(dict):
    """``name -> {'state': ok|missing|error, 'detail': str}``."""

    def set(self, name, state, detail=""):
        detail = str(detail).strip()
        if len(detail) > _DETAIL_MAX:
            detail = detail[: _DETAIL_MAX - 3] + "..."
        self[name] = {"state": state, "detail": detail}

    def ok(self, name, detail=""):
        self.set(name, "ok", detail)

    def missing(self, name, detail=""):
        self.set(name, "missing", detail)

    def error(self, name, detail=""):
        self.set(name, "error", detail)


def _first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _command_detail(argv, rc, out, err):
    message = _first_line(err) or _first_line(out) or "no output"
    return "%s exited %s: %s" % (" ".join([posixpath.basename(argv[0])] + list(argv[1:])), rc, message)


def _run_version(host, probes, name, argv, pattern):
    """Run ``argv`` (a --version call); return the first group of ``pattern`` or None."""
    rc, out, err = host.run(argv)
    if rc != 0:
        probes.error(name, _command_detail(argv, rc, out, err))
        return None
    match = re.search(pattern, out + "\n" + err)
    if not match:
        probes.error(name, "%s: no version in %r" % (" ".join(argv), _first_line(out)))
        return None
    probes.ok(name, "%s %s" % (argv[0], match.group(1)))
    return match.group(1)


# --- OS, kernel, Secure Boot -------------------------------------------------------------------


def parse_os_release(text):
    values = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, dummy, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        values[key.strip()] = value
    return values


def os_family(os_id, id_like):
    names = [os_id or ""] + (id_like or "").split()
    if any(n in ("debian", "ubuntu") for n in names):
        return "debian"
    if any(n in ("rhel", "fedora", "centos", "rocky", "almalinux") for n in names):
        return "redhat"
    return "other"


def gather_os(host, probes):
    facts = {
        "id": None,
        "id_like": None,
        "version_id": None,
        "version_major": None,
        "codename": None,
        "pretty_name": None,
        "family": "other",
    }
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        if not host.exists(path):
            continue
        try:
            values = parse_os_release(host.read_text(path))
        except (IOError, OSError) as exc:
            probes.error("os_release", "%s: %s" % (path, exc))
            return facts
        facts["id"] = values.get("ID")
        facts["id_like"] = values.get("ID_LIKE")
        facts["version_id"] = values.get("VERSION_ID")
        facts["version_major"] = (values.get("VERSION_ID") or "").split(".", maxsplit=1)[0] or None
        facts["codename"] = values.get("VERSION_CODENAME") or values.get("UBUNTU_CODENAME")
        facts["pretty_name"] = values.get("PRETTY_NAME")
        facts["family"] = os_family(facts["id"], facts["id_like"])
        probes.ok("os_release", "%s: %s" % (path, facts["pretty_name"] or facts["id"]))
        return facts
    probes.missing("os_release", "neither /etc/os-release nor /usr/lib/os-release exists")
    return facts


def gather_kernel(host, probes):
    release = host.kernel_release()
    build = "/lib/modules/%s/build" % release
    headers = host.exists(build)
    if headers:
        probes.ok("kernel_headers", "%s exists" % build)
    else:
        probes.missing("kernel_headers", "%s does not exist" % build)
    return {"release": release, "headers_installed": headers, "headers_path": build}


def gather_secure_boot(host, probes):
    mok = [path for path in MOK_KEY_PATHS if host.exists(path)]
    facts = {
        "state": "unknown",
        "dkms_mok_key": "/var/lib/dkms/mok.pub" in mok,
        "mok_keys": mok,
    }
    if not host.isdir("/sys/firmware/efi", kernel=True):
        facts["state"] = "not_efi"
        probes.ok("secure_boot", "/sys/firmware/efi does not exist: not booted with EFI")
        return facts
    try:
        data = host.read_bytes(SECURE_BOOT_VAR, kernel=True)
    except (IOError, OSError) as exc:
        probes.error("secure_boot", "%s: %s" % (SECURE_BOOT_VAR, exc))
        return facts
    # efivarfs: 4 bytes of attributes, then the variable's 1-byte value.
    if len(data) < 5:
        probes.error("secure_boot", "%s: %d bytes, expected 5" % (SECURE_BOOT_VAR, len(data)))
        return facts
    facts["state"] = "enabled" if bytearray(data)[4] == 1 else "disabled"
    probes.ok("secure_boot", "SecureBoot efivar: %s" % facts["state"])
    return facts


# --- PCI ---------------------------------------------------------------------------------------


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


# --- driver ------------------------------------------------------------------------------------


def parse_proc_modules(text):
    return [line.split()[0] for line in text.splitlines() if line.strip()]


_NVRM_RE = re.compile(r"NVRM version:.*?Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)")


def parse_nvrm_version(text):
    """``(version, flavor)`` from /proc/driver/nvidia/version."""
    line = next((l for l in text.splitlines() if l.startswith("NVRM version")), "")
    if not line:
        return None, None
    match = _NVRM_RE.search(line)
    version = match.group(1) if match else None
    flavor = "open" if "Open Kernel Module" in line else "proprietary"
    return version, flavor


def _normalise_bus_id(bus_id):
    """nvidia-smi's ``00000000:3B:00.0`` -> sysfs' ``0000:3b:00.0``."""
    if not bus_id:
        return None
    domain, dummy, rest = bus_id.strip().lower().rpartition(":")
    domain, dummy, bus = domain.rpartition(":")
    return "%s:%s:%s" % ((domain[-4:] if domain else "0000").rjust(4, "0"), bus, rest)


def _text(node, path):
    found = node.find(path)
    if found is None or found.text is None:
        return None
    text = found.text.strip()
    return text or None


def _mode(value):
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("enabled", "disabled"):
        return lowered
    return None


def parse_nvidia_smi_xml(text):
    """The facts of ``nvidia-smi -q -x``; raises ValueError when it is not its XML."""
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as exc:
        raise ValueError("output is not XML: %s" % exc)
    if root.tag != "nvidia_smi_log":
        raise ValueError("unexpected root element <%s>" % root.tag)
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        memory = _text(gpu, "fb_memory_usage/total")
        try:
            memory = int(memory.split()[0]) if memory else None
        except ValueError:
            memory = None
        gpus.append(
            {
                "index": index,
                "name": _text(gpu, "product_name"),
                "uuid": _text(gpu, "uuid"),
                "bus_id": _normalise_bus_id(gpu.get("id") or _text(gpu, "pci/pci_bus_id")),
                "architecture": gpu_table.normalise_architecture(_text(gpu, "product_architecture")),
                "memory_total_mib": memory,
                # nvidia-smi answers "N/A" for a GPU that cannot do MIG, Enabled/Disabled otherwise.
                "mig_capable": _mode(_text(gpu, "mig_mode/current_mig")) is not None,
                "mig_mode_current": _mode(_text(gpu, "mig_mode/current_mig")),
                "mig_mode_pending": _mode(_text(gpu, "mig_mode/pending_mig")),
                "persistence_mode": _mode(_text(gpu, "persistence_mode")),
            }
        )
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "gpus": gpus,
    }


def gather_nvidia_smi(host, probes):
    facts = {
        "state": "missing",
        "path": None,
        "driver_version": None,
        "cuda_version": None,
        "gpus": [],
        "detail": None,
    }
    path = host.which("nvidia-smi")
    if path is None:
        probes.missing("nvidia_smi", "nvidia-smi not found in PATH, /usr/local/nvidia/bin or /usr/bin")
        facts["detail"] = "not found"
        return facts
    facts["path"] = path
    argv = [path, "-q", "-x"]
    rc, out, err = host.run(argv)
    if rc != 0:
        facts["state"] = "error"
        facts["detail"] = _first_line(out) or _first_line(err) or "exit status %s" % rc
        probes.error("nvidia_smi", _command_detail(argv, rc, out, err))
        return facts
    try:
        parsed = parse_nvidia_smi_xml(out)
    except ValueError as exc:
        facts["state"] = "error"
        facts["detail"] = str(exc)
        probes.error("nvidia_smi", "%s -q -x: %s" % (path, exc))
        return facts
    facts.update(parsed)
    facts["state"] = "ok"
    facts["detail"] = "%d GPU%s" % (len(parsed["gpus"]), "" if len(parsed["gpus"]) == 1 else "s")
    probes.ok(
        "nvidia_smi",
        "%s: driver %s, CUDA %s, %s" % (path, parsed["driver_version"], parsed["cuda_version"], facts["detail"]),
    )
    return facts


def gather_modinfo(host, probes):
    facts = {
        "state": "missing",
        "version": None,
        "flavor": None,
        "filename": None,
        "signer": None,
    }
    path = host.which("modinfo")
    if path is None:
        probes.missing("modinfo", "modinfo not found (kmod not installed)")
        return facts
    argv = [path, "nvidia"]
    rc, out, err = host.run(argv)
    if rc != 0:
        if "not found" in (out + err):
            probes.missing("modinfo", "no nvidia kernel module for this kernel (%s)" % _first_line(err or out))
        else:
            facts["state"] = "error"
            probes.error("modinfo", _command_detail(argv, rc, out, err))
        return facts
    info = kernels.parse_modinfo(out)
    facts["state"] = "ok"
    facts["version"] = info.get("version")
    facts["filename"] = info.get("filename")
    facts["signer"] = info.get("signer") or None
    license_ = info.get("license")
    if license_:
        facts["flavor"] = "proprietary" if license_.strip() == "NVIDIA" else "open"
    probes.ok("modinfo", "%s %s" % (facts["filename"], facts["version"]))
    return facts


def parse_dpkg_status(text):
    """``{package: version}`` of the installed packages of /var/lib/dpkg/status."""
    installed = {}
    for stanza in text.split("\n\n"):
        name = version = status = None
        for line in stanza.splitlines():
            if line.startswith("Package:"):
                name = line[8:].strip()
            elif line.startswith("Status:"):
                status = line[7:].strip()
            elif line.startswith("Version:"):
                version = line[8:].strip()
        # "install ok installed", or "hold ok installed" for a held package (the driver
        # role holds the driver's packages).
        if name and status and status.endswith(" ok installed") and status.split()[0] in ("install", "hold"):
            installed[name] = version
    return installed


def gather_dpkg(host, probes, family=None):
    """Installed packages from /var/lib/dpkg/status, or None on hosts without dpkg.

    An installed package's stanza without a version (a damaged database: dpkg itself refuses
    it) is left out, and named in an error probe. On an EL host (``family`` redhat) the database
    is not read: its packages are rpm's, and a dpkg database there (EPEL's dpkg; the lab's EL
    stand-in, a Debian userland) holds none of the driver's, the toolkit's or the kernel's
    (:func:`_driver_package` says why), so it would report them as not installed.
    """
    path = "/var/lib/dpkg/status"
    if family == "redhat":
        probes.missing("dpkg_status", "not read: the host is of the redhat family, whose packages are rpm's")
        return None
    if not host.exists(path):
        probes.missing("dpkg_status", "%s does not exist" % path)
        return None
    try:
        packages = parse_dpkg_status(host.read_text(path))
    except (IOError, OSError) as exc:
        probes.error("dpkg_status", "%s: %s" % (path, exc))
        return None
    installed = dict((name, version) for name, version in packages.items() if version)
    versionless = sorted(name for name in packages if name not in installed)
    if versionless:
        probes.error("dpkg_status", "%d installed packages; no Version: in the stanza of %s" % (len(installed), ", ".join(versionless)))
    else:
        probes.ok("dpkg_status", "%d installed packages" % len(installed))
    return installed


def _usrmerge_variants(path):
    variants = {path}
    for top in ("/bin/", "/sbin/", "/lib/", "/lib64/", "/lib32/"):
        if path.startswith(top):
            variants.add("/usr" + path)
        if path.startswith("/usr" + top):
            variants.add(path[4:])
    return variants


def dpkg_owner(host, paths):
    """``(package, path)``: the dpkg package owning the first of ``paths`` that one owns.

    Reads only the file lists whose names look like the driver's (nvidia, libcuda, cuda-driver,
    cuda-compat), in pure Python: no ``dpkg -S`` process.
    """
    info = "/var/lib/dpkg/info"
    wanted = {}
    for path in paths:
        for variant in _usrmerge_variants(path):
            wanted.setdefault(variant, path)
    try:
        names = host.listdir(info)
    except (IOError, OSError):
        return None, None
    owners = {}
    for name in names:
        if not name.endswith(".list") or not _DPKG_LIST_RE.search(name):
            continue
        try:
            listed = host.read_text(posixpath.join(info, name)).splitlines()
        except (IOError, OSError):
            continue
        for line in listed:
            if line in wanted:
                owners.setdefault(wanted[line], name[: -len(".list")].split(":", maxsplit=1)[0])
    for path in paths:
        if path in owners:
            return owners[path], path
    return None, None


def rpm_owner(host, probes, paths):
    rpm = host.which("rpm")
    if rpm is None:
        probes.missing("driver_package", "rpm not found")
        return None
    argv = [rpm, "-qf", "--queryformat", "%{NAME}\t%{VERSION}-%{RELEASE}\n"] + list(paths)
    rc, out, err = host.run(argv)
    for line in out.splitlines():
        if "\t" in line:
            name, dummy, version = line.partition("\t")
            probes.ok("driver_package", "rpm: %s %s" % (name, version))
            return {"manager": "rpm", "name": name.strip(), "version": version.strip()}
    if rc not in (0, 1):
        probes.error("driver_package", _command_detail(argv, rc, out, err))
    else:
        probes.ok("driver_package", "rpm: no package owns %s" % ", ".join(paths))
    return None


def gather_driver(host, probes, dpkg, family=None):
    """The NVIDIA driver: loaded (kernel module and its version), installed (modinfo), nvidia-smi,
    libcuda, and where it came from (the package owning nvidia-smi or libcuda, else preinstalled).

    ``family`` is the OS family (:func:`os_family`, of :func:`gather_os`): it picks the package
    manager asked (:func:`_driver_package`); without it, each database the host has is asked.
    """
    modules, version, flavor = loaded_driver(host, probes)
    facts = {
        "loaded": "nvidia" in modules or version is not None,
        "modules": sorted(m for m in modules if m == "nvidia" or m.startswith("nvidia_")),
        "version": version,
        "flavor": flavor,
        "nouveau_loaded": "nouveau" in modules or host.isdir("/sys/module/nouveau", kernel=True),
        "installed": gather_modinfo(host, probes),
        "nvidia_smi": gather_nvidia_smi(host, probes),
        "libcuda": next((p for p in LIBCUDA_PATHS if host.exists(p)), None),
        "source": "absent",
        "package": None,
        "packages": _driver_packages(dpkg),
        "operator_root": _operator_driver_root(host),
    }
    owned = _with_targets(host, [facts["nvidia_smi"]["path"], facts["libcuda"]])
    facts["package"] = _driver_package(host, probes, dpkg, owned, family)
    facts["source"] = _driver_source(facts)
    return facts


# The GPU Operator's driver container shares its root with the host at /run/nvidia/driver (the
# chart's hostPaths.driverInstallDir, NVIDIA GPU Operator docs "Alternative driver root"): its
# nvidia-smi there says that the operator's driver, not the host's, serves the node.
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"


def _operator_driver_root(host):
    """The GPU Operator's driver root when its driver container runs on the host, else None."""
    smi = OPERATOR_DRIVER_ROOT + "/usr/bin/nvidia-smi"
    return OPERATOR_DRIVER_ROOT if host.exists(smi) else None


def loaded_driver(host, probes):
    """``(modules, version, flavor)``: the names of the loaded kernel modules (/proc/modules), the
    nvidia module's version (/sys/module/nvidia/version, else /proc/driver/nvidia/version) and its
    flavour; Nones where no nvidia module says one."""
    modules = _loaded_modules(host, probes)
    nvrm_version, flavor = _nvrm_version(host, probes)
    return modules, _sys_module_version(host) or nvrm_version, flavor


def _loaded_modules(host, probes):
    """The names of the loaded kernel modules (/proc/modules)."""
    try:
        modules = parse_proc_modules(host.read_text("/proc/modules", kernel=True))
    except (IOError, OSError) as exc:
        if host.exists("/proc/modules", kernel=True):
            probes.error("proc_modules", "/proc/modules: %s" % exc)
        else:
            probes.missing("proc_modules", "/proc/modules does not exist (no loadable modules)")
        return []
    probes.ok("proc_modules", "%d modules loaded" % len(modules))
    return modules


def _nvrm_version(host, probes):
    """``(version, flavor)`` of the loaded driver from /proc/driver/nvidia/version, or Nones."""
    path = "/proc/driver/nvidia/version"
    try:
        version, flavor = parse_nvrm_version(host.read_text(path, kernel=True))
    except (IOError, OSError) as exc:
        if host.exists(path, kernel=True):
            probes.error("driver_version_file", "%s: %s" % (path, exc))
        else:
            probes.missing("driver_version_file", "%s does not exist: no driver loaded" % path)
        return None, None
    probes.ok("driver_version_file", "%s: %s %s" % (path, version, flavor))
    return version, flavor


def _sys_module_version(host):
    """The loaded nvidia module's version from /sys/module/nvidia/version, or None."""
    try:
        return host.read_text("/sys/module/nvidia/version", kernel=True).strip() or None
    except (IOError, OSError):
        return None


def _driver_packages(dpkg):
    """The installed packages of the driver (``driver.packages``); None on hosts without dpkg."""
    if dpkg is None:
        return None
    return [{"name": name, "version": version} for name, version in sorted(dpkg.items()) if _DRIVER_PACKAGE_RE.search(name)]


def _with_targets(host, paths):
    """The paths that are set, each followed by what it links to when that is another path."""
    found = []
    for path in paths:
        if path:
            found.append(path)
            real = host.resolve(path)
            if real != path:
                found.append(real)
    return found


# The package manager that installs a family's driver (the driver roles use apt on the one, dnf
# on the other); a host of another family asks each database it has, dpkg first (no process).
_FAMILY_MANAGERS = {"debian": ("dpkg",), "redhat": ("rpm",)}
_ANY_MANAGER = ("dpkg", "rpm")


def _driver_package(host, probes, dpkg, owned, family):
    """The package that owns one of the driver's files ``owned``, from dpkg's or rpm's database, or None.

    The OS family's own manager is asked, not whichever database exists: a host can carry the
    other's too (EPEL ships dpkg to EL hosts, Debian ships rpm; the lab's EL stand-in has Debian's
    userland and its dpkg database), and that database owns none of the driver's files, which came
    from the family's repositories (apt on Debian and Ubuntu, dnf on EL) - the manager whose hold or
    versionlock the roles keep. Asking dpkg first left a dnf-installed driver "preinstalled" on such
    an EL host; asking the other manager as well would start an rpm process on every Debian host
    with rpm installed and a driver no package owns, to find at best a package no role can hold.
    A host of another family asks each database it has, dpkg, then rpm.
    """
    if not owned:
        probes.missing("driver_package", "no nvidia-smi or libcuda.so.1 to look up")
        return None
    present = {
        "dpkg": host.isdir("/var/lib/dpkg/info"),
        "rpm": host.isdir("/var/lib/rpm") or host.isdir("/usr/lib/sysimage/rpm"),
    }
    wanted = _FAMILY_MANAGERS.get(family, _ANY_MANAGER)
    managers = [manager for manager in wanted if present[manager]]
    if not managers:
        probes.missing("driver_package", "no %s database" % " or ".join(wanted))
        return None
    for manager in managers:
        if manager == "dpkg":
            package = _dpkg_driver_package(host, probes, dpkg, owned)
        else:
            package = rpm_owner(host, probes, owned)
        if package:
            return package
    return None


def _dpkg_driver_package(host, probes, dpkg, owned):
    name, path = dpkg_owner(host, owned)
    if not name:
        probes.ok("driver_package", "dpkg: no package owns %s" % ", ".join(owned))
        return None
    probes.ok("driver_package", "dpkg: %s owns %s" % (name, path))
    return {"manager": "dpkg", "name": name, "version": (dpkg or {}).get(name)}


def _driver_source(facts):
    """``package`` (a package owns it), ``operator`` (the GPU Operator's driver container serves
    the node), ``preinstalled`` (a driver is there all the same) or ``absent``."""
    if facts["package"]:
        return "package"
    if facts.get("operator_root"):
        return "operator"
    present = (
        facts["loaded"]
        or facts["nvidia_smi"]["path"] is not None
        or facts["libcuda"] is not None
        or facts["installed"]["state"] == "ok"
    )
    return "preinstalled" if present else "absent"


# --- container stack ---------------------------------------------------------------------------


def _str_list(value):
    return [str(v) for v in value] if isinstance(value, list) else []


def parse_containerd_config(text):
    """Top-level ``version``, ``disabled_plugins``, ``imports`` and the runtimes of a config.toml.

    Read with ``common.toml_subset.loads``: the Python's TOML library where it has one, else the
    collection's subset reader, and then ``runtimes`` stays None (gpu_facts returns them only
    where Python has a TOML library).
    Raises ValueError on a file that is not TOML.
    """
    data = toml_subset.loads(text)
    version = data.get("version")
    result = {
        "version": version if isinstance(version, int) else None,
        "disabled_plugins": _str_list(data.get("disabled_plugins")),
        "imports": _str_list(data.get("imports")),
        "runtimes": None,
        "parser": toml_subset.tomllib.__name__ if toml_subset.tomllib is not None else "subset",
    }
    if toml_subset.tomllib is not None:
        result["runtimes"] = _runtime_names(data, cri_plugin_name(result["version"], empty=not text.strip()))
    return result


def _runtime_names(data, plugin):
    """The runtime handlers of the CRI plugin's table ``plugin`` (a version 1 config's ``cri``,
    or the grpc plugin's table where it has none)."""
    runtimes = _dig(data, "plugins", plugin, "containerd", "runtimes")
    if runtimes is None and plugin == "cri":
        runtimes = _dig(data, "plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes")
    return sorted(runtimes) if isinstance(runtimes, dict) else []


def cri_plugin_name(version, empty=False):
    """The CRI plugin's table for a config version (nvidia-container-toolkit's rules)."""
    if version is None:
        return "io.containerd.grpc.v1.cri" if empty else "cri"
    if version >= 3:
        return "io.containerd.cri.v1.runtime"
    return "io.containerd.grpc.v1.cri"


def gather_containerd(host, probes):
    facts = {
        "installed": False,
        "path": None,
        "version": None,
        "config_path": CONTAINERD_CONFIG,
        "config_exists": False,
        "config_version": None,
        "cri_plugin": None,
        "disabled_plugins": [],
        "cri_disabled": False,
        "imports": [],
        "runtimes": None,
    }
    path = host.which("containerd")
    if path:
        facts["installed"] = True
        facts["path"] = path
        version = _run_version(host, probes, "containerd", [path, "--version"], r"containerd\s+\S+\s+v?(\S+)")
        facts["version"] = version
    else:
        probes.missing("containerd", "containerd not found")
    facts["config_exists"] = host.exists(CONTAINERD_CONFIG)
    if not facts["config_exists"]:
        probes.missing("containerd_config", "%s does not exist" % CONTAINERD_CONFIG)
        facts["cri_plugin"] = "io.containerd.grpc.v1.cri" if path else None
        return facts
    try:
        text = host.read_text(CONTAINERD_CONFIG)
        parsed = parse_containerd_config(text)
    except (IOError, OSError) as exc:
        probes.error("containerd_config", "%s: %s" % (CONTAINERD_CONFIG, exc))
        return facts
    except (ValueError, RecursionError) as exc:  # tomllib.TOMLDecodeError is a ValueError; nesting too deep, a RecursionError
        probes.error("containerd_config", "%s is not valid TOML: %s" % (CONTAINERD_CONFIG, exc))
        return facts
    facts["config_version"] = parsed["version"]
    facts["cri_plugin"] = cri_plugin_name(parsed["version"], empty=not text.strip())
    facts["disabled_plugins"] = parsed["disabled_plugins"]
    facts["cri_disabled"] = any(p in CRI_PLUGINS for p in parsed["disabled_plugins"])
    facts["imports"] = parsed["imports"]
    facts["runtimes"] = parsed["runtimes"]
    probes.ok(
        "containerd_config",
        "%s: version %s, disabled_plugins %s (%s)"
        % (CONTAINERD_CONFIG, parsed["version"], parsed["disabled_plugins"], parsed["parser"]),
    )
    return facts


def gather_docker(host, probes):
    facts = {
        "installed": False,
        "path": None,
        "version": None,
        "config_path": DOCKER_CONFIG,
        "config_exists": False,
        "runtimes": None,
        "default_runtime": None,
    }
    path = host.which("dockerd")
    if path:
        facts["installed"] = True
        facts["path"] = path
        facts["version"] = _run_version(host, probes, "docker", [path, "--version"], r"version\s+v?([0-9][^,\s]*)")
    else:
        probes.missing("docker", "dockerd not found")
    facts["config_exists"] = host.exists(DOCKER_CONFIG)
    if not facts["config_exists"]:
        probes.missing("docker_config", "%s does not exist" % DOCKER_CONFIG)
        return facts
    try:
        data = json.loads(host.read_text(DOCKER_CONFIG) or "{}")
    except (IOError, OSError) as exc:
        probes.error("docker_config", "%s: %s" % (DOCKER_CONFIG, exc))
        return facts
    except (ValueError, RecursionError) as exc:
        probes.error("docker_config", "%s is not valid JSON: %s" % (DOCKER_CONFIG, exc))
        return facts
    if not isinstance(data, dict):
        probes.error("docker_config", "%s is not a JSON object" % DOCKER_CONFIG)
        return facts
    runtimes = data.get("runtimes")
    facts["runtimes"] = sorted(runtimes) if isinstance(runtimes, dict) else []
    facts["default_runtime"] = data.get("default-runtime")
    probes.ok("docker_config", "%s: runtimes %s" % (DOCKER_CONFIG, facts["runtimes"]))
    return facts


def gather_crio(host, probes):
    facts = {
        "installed": False,
        "path": None,
        "version": None,
        "config_path": CRIO_CONFIG,
        "config_exists": host.exists(CRIO_CONFIG),
        "dropin_dir": CRIO_DROPIN_DIR,
        "dropin_dir_exists": host.isdir(CRIO_DROPIN_DIR),
    }
    path = host.which("crio")
    if path:
        facts["installed"] = True
        facts["path"] = path
        facts["version"] = _run_version(
            host, probes, "crio", [path, "--version"], r"(?im)(?:crio version|^Version:)\s*v?(\d[^\s]*)"
        )
    else:
        probes.missing("crio", "crio not found")
    return facts


def gather_rancher(host, probes, name):
    base = "/var/lib/rancher/%s/agent/etc/containerd" % name
    binary = next((p for p in RANCHER[name] if host.exists(p)), None) or host.which(name)
    facts = {
        "installed": binary is not None,
        "path": binary,
        "config_path": base + "/config.toml",
        "config_exists": host.exists(base + "/config.toml"),
        "template_path": base + "/config.toml.tmpl",
        "template_exists": host.exists(base + "/config.toml.tmpl"),
    }
    if binary:
        probes.ok(
            name, "%s; generated containerd config %s" % (binary, "exists" if facts["config_exists"] else "absent")
        )
    else:
        probes.missing(name, "%s not found" % name)
    return facts


def gather_toolkit(host, probes, dpkg):
    facts = {
        "installed": False,
        "version": None,
        "version_source": None,
        "nvidia_ctk": host.which("nvidia-ctk"),
        "nvidia_container_cli": host.which("nvidia-container-cli"),
        "nvidia_container_runtime": host.which("nvidia-container-runtime"),
        "config_path": TOOLKIT_CONFIG,
        "config_exists": host.exists(TOOLKIT_CONFIG),
        "packages": None,
    }
    if dpkg is not None:
        facts["packages"] = {
            name: dpkg[name]
            for name in (
                "nvidia-container-toolkit",
                "nvidia-container-toolkit-base",
                "libnvidia-container-tools",
                "libnvidia-container1",
            )
            if name in dpkg
        }
        if "nvidia-container-toolkit" in dpkg:
            facts["version"] = dpkg["nvidia-container-toolkit"]
            facts["version_source"] = "dpkg"
            probes.ok("toolkit", "dpkg: nvidia-container-toolkit %s" % facts["version"])
    if facts["version"] is None and facts["nvidia_ctk"]:
        facts["version"] = _run_version(
            host, probes, "toolkit", [facts["nvidia_ctk"], "--version"], r"version\s+v?(\d[^\s]*)"
        )
        facts["version_source"] = "nvidia-ctk" if facts["version"] else None
    elif facts["version"] is None and facts["nvidia_container_cli"]:
        facts["version"] = _run_version(
            host, probes, "toolkit", [facts["nvidia_container_cli"], "--version"], r"cli-version:\s*v?(\S+)"
        )
        facts["version_source"] = "nvidia-container-cli" if facts["version"] else None
    elif facts["version"] is None:
        probes.missing("toolkit", "neither nvidia-ctk nor nvidia-container-cli found")
    facts["installed"] = bool(
        facts["version"] or facts["nvidia_ctk"] or facts["nvidia_container_cli"] or facts["nvidia_container_runtime"]
    )
    return facts


# --- everything --------------------------------------------------------------------------------


def _merge_nvidia_smi(gpus, smi):
    """Fill architectures that the PCI data left unknown from nvidia-smi, by bus id.

    Where sysfs listed no GPU but nvidia-smi did (a container without /sys/bus/pci), the GPUs
    come from nvidia-smi with ``name_source: nvidia-smi``.
    """
    by_bus = dict((g["bus_id"], g) for g in smi.get("gpus") or [] if g.get("bus_id"))
    for gpu in gpus:
        seen = by_bus.get(gpu["bus_id"])
        if seen and not gpu["architecture"]:
            gpu["architecture"] = seen["architecture"]
        if seen and not gpu["name"]:
            gpu["name"] = seen["name"]
            gpu["name_source"] = "nvidia-smi"
    if not gpus:
        for seen in smi.get("gpus") or []:
            gpus.append(
                {
                    "bus_id": seen["bus_id"],
                    "vendor_id": NVIDIA_VENDOR,
                    "device_id": None,
                    "subsystem_vendor_id": None,
                    "subsystem_device_id": None,
                    "class": None,
                    "name": seen["name"],
                    "name_source": "nvidia-smi",
                    "architecture": seen["architecture"],
                    "kernel_driver": "nvidia",
                    "numa_node": None,
                }
            )
    return gpus


# --- multi-GPU hosts: topology and fabric manager ----------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU_COLUMN = re.compile(r"^GPU\d+$")
_FABRIC_MANAGER_UNIT = "nvidia-fabricmanager"


def parse_topo_matrix(text):
    """The GPU-to-GPU part of ``nvidia-smi topo -m``.

    Returns ``{'gpus': [names], 'links': {gpu: {peer: link}}, 'cpu_affinity': {gpu: str},
    'numa_affinity': {gpu: str}, 'nvlink_pairs': n}``; the link codes are nvidia-smi's own
    (``X``, ``NV<n>``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``). Raises ValueError on a text
    that has no matrix. Columns are separated by tabs; nvidia-smi underlines the header with ANSI
    escapes, which are dropped.
    """
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header = next((i for i, line in enumerate(lines) if line.strip().startswith("GPU0")), None)
    if header is None:
        raise ValueError("no GPU0 column in the topology matrix")
    columns = [c.strip() for c in lines[header].strip().split("\t") if c.strip()]
    gpus = [c for c in columns if _GPU_COLUMN.match(c)]
    rows = list(_topo_rows(lines, columns, header))
    links = dict((gpu, dict((peer, row.get(peer)) for peer in gpus if peer != gpu)) for gpu, row in rows)
    return {
        "gpus": gpus,
        "links": links,
        "cpu_affinity": dict((gpu, row.get("CPU Affinity")) for gpu, row in rows),
        "numa_affinity": dict((gpu, row.get("NUMA Affinity")) for gpu, row in rows),
        "nvlink_pairs": _nvlink_pairs(links),
    }


def _topo_rows(lines, columns, header):
    """``(gpu, {column: cell})`` of each GPU's row of the matrix (the header, line ``header``, left out)."""
    for index, line in enumerate(lines):
        cells = [c.strip() for c in line.split("\t")]
        if index != header and _GPU_COLUMN.match(cells[0]):
            yield cells[0], dict(zip(columns, cells[1:]))


def _nvlink_pairs(links):
    """How many pairs of GPUs an NVLink joins (``NV<n>`` either way counts once)."""
    pairs = set()
    for gpu, peers in links.items():
        pairs.update(tuple(sorted((gpu, peer))) for peer, link in peers.items() if link and link.startswith("NV"))
    return len(pairs)


def gather_topology(host, probes, nvidia_smi):
    """``nvidia-smi topo -m`` on hosts with two GPUs or more (one call; none otherwise)."""
    facts = {"state": "skipped", "detail": None, "gpus": [], "links": {}, "cpu_affinity": {},
             "numa_affinity": {}, "nvlink_pairs": 0}
    if nvidia_smi["state"] != "ok":
        facts["detail"] = "nvidia-smi %s" % nvidia_smi["state"]
        probes.missing("topology", facts["detail"])
        return facts
    if len(nvidia_smi["gpus"]) < 2:
        facts["detail"] = "one GPU: no GPU-to-GPU topology"
        probes.ok("topology", facts["detail"])
        return facts
    argv = [nvidia_smi["path"], "topo", "-m"]
    rc, out, err = host.run(argv)
    if rc != 0:
        facts["state"] = "error"
        facts["detail"] = _first_line(out) or _first_line(err) or "exit status %s" % rc
        probes.error("topology", _command_detail(argv, rc, out, err))
        return facts
    try:
        facts.update(parse_topo_matrix(out))
    except ValueError as exc:
        facts["state"] = "error"
        facts["detail"] = str(exc)
        probes.error("topology", "%s: %s" % (" ".join(argv), exc))
        return facts
    facts["state"] = "ok"
    facts["detail"] = "%d GPUs, %d NVLink pairs" % (len(facts["gpus"]), facts["nvlink_pairs"])
    probes.ok("topology", facts["detail"])
    return facts


def gather_fabric_manager(host, probes, dpkg, nvswitch_count):
    """NVIDIA's fabric manager: needed where NVSwitches join the GPUs, at the driver's version.

    The version comes from its package where dpkg knows it, else from ``nv-fabricmanager
    --version``; the service state from ``systemctl is-active`` (only on the host itself).
    """
    facts = {
        "required": nvswitch_count > 0,
        "installed": False,
        "path": None,
        "version": None,
        "version_source": None,
        "package": None,
        "service": None,
    }
    for name, version in sorted((dpkg or {}).items()):
        if name.startswith("nvidia-fabricmanager"):
            facts.update(installed=True, version=version.split("-", maxsplit=1)[0].rsplit(":", maxsplit=1)[-1],
                         version_source="package", package=name)
            break
    path = host.which("nv-fabricmanager", extra_dirs=("/usr/bin", "/usr/sbin"))
    if path:
        facts.update(installed=True, path=path)
        if facts["version"] is None:
            version = _run_version(host, probes, "fabric_manager", [path, "--version"], r"(\d+\.\d+(?:\.\d+)?)")
            facts.update(version=version, version_source="binary" if version else None)
    if not facts["installed"]:
        detail = "not installed" + ("; NVSwitches present, it is required" if facts["required"] else "")
        (probes.error if facts["required"] else probes.missing)("fabric_manager", detail)
        return facts
    systemctl = host.which("systemctl", extra_dirs=("/usr/bin", "/bin"))
    if systemctl and not host.chrooted:
        rc, out, _err = host.run([systemctl, "is-active", _FABRIC_MANAGER_UNIT])
        facts["service"] = _first_line(out) or ("active" if rc == 0 else "unknown")
    probes.ok("fabric_manager", "version %s (%s), service %s" % (facts["version"], facts["version_source"],
                                                                 facts["service"]))
    return facts


def gather_facts(host):
    """Every fact of the ``gpufleet_nvidia`` dict, for ``host`` (a :class:`Host`)."""
    probes = Probes()
    os_facts = gather_os(host, probes)
    kernel = gather_kernel(host, probes)
    secure_boot = gather_secure_boot(host, probes)
    gpus, nvswitches = gather_pci(host, probes)
    dpkg = gather_dpkg(host, probes, os_facts["family"])
    driver = gather_driver(host, probes, dpkg, os_facts["family"])
    gpus = _merge_nvidia_smi(gpus, driver["nvidia_smi"])
    topology = gather_topology(host, probes, driver["nvidia_smi"])
    fabric_manager = gather_fabric_manager(host, probes, dpkg, len(nvswitches))
    container = {
        "toolkit": gather_toolkit(host, probes, dpkg),
        "containerd": gather_containerd(host, probes),
        "docker": gather_docker(host, probes),
        "crio": gather_crio(host, probes),
        "k3s": gather_rancher(host, probes, "k3s"),
        "rke2": gather_rancher(host, probes, "rke2"),
    }
    kernel_facts, driver_libraries = kernels.gather(host, probes, dpkg, driver["version"])
    return {
        "schema": FACTS_SCHEMA,
        "host_root": host.root,
        "gpus": gpus,
        "gpu_count": len(gpus),
        "nvswitches": {"count": len(nvswitches), "bus_ids": nvswitches},
        "topology": topology,
        "fabric_manager": fabric_manager,
        "driver": driver,
        "container": container,
        "os": os_facts,
        "kernel": kernel,
        "secure_boot": secure_boot,
        "kernels": kernel_facts,
        "driver_libraries": driver_libraries,
        "nvml_reload": day2.gather_nvml_reload(host, probes, container),
        "probes": dict(sorted(probes.items())),
    }
