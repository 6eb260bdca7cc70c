# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver on a host: the loaded kernel module and its version, the module on disk
(``modinfo``), nvidia-smi, libcuda, the package that owns them, and where the driver came from.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.modinfo import parse_modinfo
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.nvidia_smi import gather_nvidia_smi
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.packages import dpkg_owner, rpm_owner
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import command_detail, first_line

LIBCUDA_PATHS = (
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/lib/libcuda.so.1",
    "/usr/local/nvidia/lib64/libcuda.so.1",
)
# Installed packages reported under driver.packages.
_DRIVER_PACKAGE_RE = re.compile(r"(nvidia|^cuda-drivers|^libcuda|^libnvidia)")


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
            probes.missing("modinfo", "no nvidia kernel module for this kernel (%s)" % first_line(err or out))
        else:
            facts["state"] = "error"
            probes.error("modinfo", command_detail(argv, rc, out, err))
        return facts
    info = parse_modinfo(out)
    facts["state"] = "ok"
    facts["version"] = info.get("version")
    facts["filename"] = info.get("filename")
    facts["signer"] = info.get("signer") or None
    license_ = info.get("license")
    if license_:
        facts["flavor"] = "proprietary" if license_.strip() == "NVIDIA" else "open"
    probes.ok("modinfo", "%s %s" % (facts["filename"], facts["version"]))
    return facts


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
    facts["found"] = found_driver(facts)
    return facts


def found_driver(driver):
    """``{version, from, flavor, flavor_from}`` of the driver facts ``driver``: the one driver
    version that preflight, the validation and the fleet report read, so that all three say the same.

    The driver on disk first, the one the host runs after a reboot: the nvidia module of the running
    kernel (``modinfo``), else the package that owns nvidia-smi or libcuda; then, where nothing on
    disk says, what runs: nvidia-smi, else the loaded module. ``from`` names the one that said
    (``modinfo``, ``package``, ``nvidia-smi``, ``loaded module``). The flavour is the module's on
    disk, else the loaded one's, else that of the kernel-module packages installed; ``flavor_from``
    names it (``modinfo``, ``loaded module``, ``packages``). None where nothing says.
    """
    installed = driver.get("installed") or {}
    candidates = (
        ("modinfo", installed.get("version")),
        ("package", versions.upstream_version(str((driver.get("package") or {}).get("version") or ""))),
        ("nvidia-smi", (driver.get("nvidia_smi") or {}).get("driver_version")),
        ("loaded module", driver.get("version")),
    )
    flavors = (
        ("modinfo", installed.get("flavor")),
        ("loaded module", driver.get("flavor")),
        ("packages", packages_flavor(driver.get("packages"))),
    )
    found = {"version": None, "from": None, "flavor": None, "flavor_from": None}
    found["flavor_from"], found["flavor"] = next(((s, f) for s, f in flavors if f), (None, None))
    for source, value in candidates:
        parsed = versions.try_parse_driver_version(value)
        if parsed is not None:
            found.update(version=parsed.text, **{"from": source})
            break
    return found


def found_of(facts):
    """``driver.found`` of the ``gpufleet_nvidia`` facts ``facts`` (:func:`found_driver`); derived here
    from the driver facts where they were gathered before gpu_facts published it (a fact cache)."""
    driver = (facts or {}).get("driver") or {}
    return driver.get("found") or found_driver(driver)


#: Packages of the driver's kernel modules (Debian's and Ubuntu's DKMS and prebuilt modules, EL's
#: kmod): an "open" in the name is the open flavour, as the driver role chooses them.
_KERNEL_PACKAGE = re.compile(r"(dkms|kernel|linux-modules-nvidia|kmod-nvidia)")


def packages_flavor(packages):
    """The flavour of the installed kernel-module packages (``open``, ``proprietary``), or None."""
    names = [str(p.get("name") or "") for p in packages or [] if isinstance(p, dict)]
    modules = [n for n in names if "nvidia" in n and _KERNEL_PACKAGE.search(n)]
    if not modules:
        return None
    return "open" if any("open" in n for n in modules) else "proprietary"


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
