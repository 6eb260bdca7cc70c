# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a node loses NVML in its running containers after ``systemctl daemon-reload``:
``gpufleet_nvidia.nvml_reload``.

With the systemd cgroup driver, systemd owns the containers' device cgroups; a
``daemon-reload`` rewrites them from the units, which know nothing of the GPU device nodes
the NVIDIA runtime added in legacy mode, and the containers get "Failed to initialize NVML:
Unknown Error" (NVIDIA's container toolkit issue 48). A node is protected when the runtime
injects devices through CDI (``mode = "cdi"`` in the toolkit's config), or when every nvidia
device node has its ``/dev/char/<major>:<minor>`` link (``nvidia-ctk system
create-dev-char-symlinks``), through which systemd finds the device again. Read only.

The rule itself is :func:`reload_exposed`, the one that preflight, validation and the
toolkit layer's ``dev_char_symlinks`` all apply: a runtime under the systemd cgroup driver
whose devices reach the container through the legacy hook. The hook is used in ``legacy``
mode, in ``auto`` mode before toolkit 1.18 (from 1.18 on ``auto`` is JIT-CDI:
:func:`effective_mode`), and by Docker's ``docker run --gpus`` in any mode. In ``cdi`` and
``jit-cdi`` modes the device nodes are in the container's OCI spec, so a reload keeps them.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import stat

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import toml_subset
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import kernels
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.container import CRIO_CONFIG, CRIO_DROPIN_DIR, DOCKER_CONFIG, TOOLKIT_CONFIG
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.libraries import fix_text

RANCHER_CONFIG = "/var/lib/rancher/%s/agent/etc/containerd/config.toml"
CGROUP_V2_MARK = "/sys/fs/cgroup/cgroup.controllers"
FIX_CDI = ('create the /dev/char links: nvidia-ctk system create-dev-char-symlinks --create-all, and a udev rule that keeps '
           "them (the container_toolkit role does both: container_toolkit_dev_char_symlinks, auto by default), or have the "
           'runtime inject devices through CDI: mode = "cdi" under [nvidia-container-runtime] in %s (container_toolkit_enable_cdi), '
           "or toolkit 1.18 or later in auto mode" % TOOLKIT_CONFIG)
#: The first toolkit release whose ``auto`` mode is JIT-CDI rather than legacy.
JIT_CDI_DEFAULT = (1, 18, 0)
#: The modes in which the runtime writes the device nodes into the container's OCI spec (CDI,
#: JIT-CDI, and Tegra's csv, which edits the spec from its CSV files): a reload keeps them.
SPEC_MODES = ("cdi", "jit-cdi", "csv")
_TOOLKIT_VERSION_RE = re.compile(r"^(?:\d+:)?(\d+)\.(\d+)\.(\d+)(?:[-~+][0-9A-Za-z.~+-]*)?$")


def _toml(host, path):
    try:
        return toml_subset.loads(host.read_text(path))
    except (IOError, OSError, ValueError, RecursionError):
        return None


def _systemd_cgroup(data):
    """True / False where a runtime table of ``data`` sets ``SystemdCgroup``, None where none does."""
    found = None
    stack = [data]
    while stack:
        table = stack.pop()
        for key, value in table.items():
            if key == "SystemdCgroup" and isinstance(value, bool):
                found = found or value
            elif isinstance(value, dict):
                stack.append(value)
    return found


def _containerd_files(host, container):
    containerd = container.get("containerd") or {}
    files = [containerd.get("config_path")] if containerd.get("config_exists") else []
    for pattern in containerd.get("imports") or []:
        files.extend(host.glob(pattern) if any(c in pattern for c in "*?[") else [pattern])
    for name in ("k3s", "rke2"):
        if dig(container, name, "installed") and host.isfile(RANCHER_CONFIG % name):
            files.append(RANCHER_CONFIG % name)
    return files


def containerd_driver(host, container):
    """``systemd``, ``cgroupfs`` or None (no containerd) for containerd, k3s and RKE2."""
    if not any(dig(container, n, "installed") for n in ("containerd", "k3s", "rke2")):
        return None
    values = [_systemd_cgroup(d) for d in (_toml(host, p) for p in _containerd_files(host, container)) if d]
    return "systemd" if any(values) else "cgroupfs"


def crio_driver(host, container):
    """CRI-O's ``cgroup_manager`` (its default is ``systemd``), or None without CRI-O."""
    if not dig(container, "crio", "installed"):
        return None
    manager = "systemd"
    files = [CRIO_CONFIG] + [posixpath.join(CRIO_DROPIN_DIR, n) for n in host.names(CRIO_DROPIN_DIR) if n.endswith(".conf")]
    for path in files:
        data = _toml(host, path) if host.isfile(path) else None
        value = dig(data or {}, "crio", "runtime", "cgroup_manager")
        if isinstance(value, str) and value:
            manager = value
    return manager


def docker_driver(host, container):
    """Docker's cgroup driver: ``exec-opts native.cgroupdriver``, else its default (systemd on cgroup v2)."""
    if not dig(container, "docker", "installed"):
        return None
    try:
        data = json.loads(host.read_text(DOCKER_CONFIG) or "{}")
    except (IOError, OSError, ValueError, RecursionError):
        data = {}
    for option in (data.get("exec-opts") if isinstance(data, dict) else None) or []:
        if isinstance(option, str) and option.replace(" ", "").startswith("native.cgroupdriver="):
            return option.split("=", 1)[1].strip()
    return "systemd" if host.exists(CGROUP_V2_MARK, kernel=True) else "cgroupfs"


def device_links(host):
    """``(present, missing)``: the nvidia device nodes with and without their /dev/char link."""
    present, missing = [], []
    for node in _dev_nodes(host):
        number = device_number(host, node)
        if number is None:
            continue
        link = "/dev/char/%d:%d" % number
        (present if os.path.lexists(host.dlocal(link)) else missing).append("%s (%s)" % (node, link))
    return present, missing


def device_number(host, node):
    """``(major, minor)`` of a character device node of the host, or None for anything else."""
    try:
        info = os.stat(host.dlocal(node))
    except OSError:
        return None
    if not stat.S_ISCHR(info.st_mode):
        return None
    return os.major(info.st_rdev), os.minor(info.st_rdev)


def _dev_nodes(host):
    nodes = []
    for folder in ("/dev", "/dev/nvidia-caps"):
        try:
            names = sorted(os.listdir(host.dlocal(folder)))
        except OSError:
            continue
        nodes.extend(posixpath.join(folder, n) for n in names if folder != "/dev" or n.startswith("nvidia"))
    return nodes


def toolkit_mode(host):
    """The NVIDIA runtime's ``mode`` (auto, legacy, cdi, csv); ``auto`` where the config does not say."""
    data = _toml(host, TOOLKIT_CONFIG) if host.isfile(TOOLKIT_CONFIG) else None
    mode = dig(data or {}, "nvidia-container-runtime", "mode")
    return mode if isinstance(mode, str) and mode else "auto"


def toolkit_release(version):
    """``(major, minor, patch)`` of a toolkit version (``1.20.0``, the package's ``1.20.0-1``), or None."""
    match = _TOOLKIT_VERSION_RE.match(str(version or "").strip())
    return tuple(int(part) for part in match.groups()) if match else None


def effective_mode(mode, toolkit_version):
    """The toolkit runtime's mode once ``auto`` is resolved: ``jit-cdi`` from toolkit 1.18 on,
    ``legacy`` before; None for ``auto`` where the version is not a toolkit version."""
    if mode != "auto":
        return mode
    release = toolkit_release(toolkit_version)
    if release is None:
        return None
    return "jit-cdi" if release >= JIT_CDI_DEFAULT else "legacy"


def legacy_hook(runtime, mode):
    """Whether the devices reach a container of ``runtime`` through the legacy hook in the
    (effective) ``mode``: any mode but those of :data:`SPEC_MODES`, and always on Docker
    (``docker run --gpus`` calls the hook directly)."""
    return mode not in SPEC_MODES or runtime == "docker"


def reload_exposed(runtime, cgroup_driver, mode):
    """THE rule: a ``runtime`` under ``cgroup_driver`` with the toolkit in the effective ``mode``
    loses its containers' GPUs on ``systemctl daemon-reload`` unless every device has its link."""
    return cgroup_driver == "systemd" and legacy_hook(runtime, mode)


def gather_nvml_reload(host, probes, container):
    """``gpufleet_nvidia.nvml_reload``: ``state`` exposed, protected, not_exposed or unknown, with why and the fix."""
    drivers = {
        "containerd": containerd_driver(host, container),
        "crio": crio_driver(host, container),
        "docker": docker_driver(host, container),
    }
    present, missing = device_links(host)
    facts = {
        "state": "not_exposed",
        "systemd": host.isdir("/run/systemd/system"),
        "cgroup_drivers": drivers,
        "toolkit_mode": toolkit_mode(host),
        "dev_char_links": present,
        "dev_char_missing": missing,
        "reason": "",
        "fix": None,
    }
    systemd_runtimes = sorted(n for n, d in drivers.items() if d == "systemd")
    facts["state"], facts["reason"] = _verdict(facts, systemd_runtimes, dig(container, "toolkit", "version"))
    if facts["state"] == "exposed":
        facts["fix"] = FIX_CDI
    (probes.ok if facts["state"] != "unknown" else probes.missing)("nvml_reload", "%s: %s" % (facts["state"], facts["reason"]))
    return facts


def _verdict(facts, systemd_runtimes, toolkit_version=None):
    if not facts["systemd"]:
        return "not_exposed", "systemd is not the init (no /run/systemd/system): nothing runs daemon-reload"
    if not systemd_runtimes:
        return "not_exposed", "no container runtime here uses the systemd cgroup driver"
    mode, mode_words = _mode_words(facts["toolkit_mode"], toolkit_version)
    hooked = [r for r in systemd_runtimes if reload_exposed(r, "systemd", mode)]
    if not hooked:
        return "protected", "the NVIDIA runtime injects devices through CDI (%s)" % mode_words
    if not facts["dev_char_links"] and not facts["dev_char_missing"]:
        return "unknown", "no nvidia device node under /dev (driver not loaded): the links cannot be checked"
    if not facts["dev_char_missing"]:
        return "protected", "every nvidia device node has its /dev/char link"
    return "exposed", (
        "exposed to NVML loss after systemctl daemon-reload: %s use%s the systemd cgroup driver, the NVIDIA runtime is in "
        "%s%s, and %s %s no /dev/char link" % (
            ", ".join(hooked), "" if len(hooked) > 1 else "s", mode_words,
            " (docker run --gpus uses the legacy hook in any mode)" if hooked == ["docker"] and mode in SPEC_MODES else "",
            ", ".join(facts["dev_char_missing"][:4]), "have" if len(facts["dev_char_missing"]) > 1 else "has"))


def _mode_words(configured, toolkit_version):
    """``(effective mode, words)``: ``auto`` of an unknown toolkit is taken as legacy, and said so."""
    mode = effective_mode(configured, toolkit_version)
    if configured != "auto":
        return mode, 'mode = "%s"' % configured
    if mode is None:
        return "legacy", "auto mode of a toolkit of unknown version (taken as legacy; JIT-CDI from 1.18)"
    return mode, "auto mode, %s for toolkit %s" % (mode, toolkit_version)


# --- preflight ---------------------------------------------------------------------------------

#: The day-2 rules of preflight: id -> what it checks (all warnings: the change itself can work).
PREFLIGHT_RULES = (
    ("next_boot_module", "the kernel the node boots next has an nvidia module of the driver's version"),
    ("driver_library_mismatch", "the loaded nvidia module is the version of the libraries on disk"),
    ("nvml_reload_exposure", "running containers keep NVML after systemctl daemon-reload"),
)


def check_preflight(report, facts):
    """The day-2 rules on a preflight ``report`` (discovery.preflight.Report), as warnings."""
    _preflight_next_boot(report, facts.get("kernels"))
    _preflight_libraries(report, facts.get("driver_libraries"))
    _preflight_nvml(report, facts.get("nvml_reload"))


def _preflight_next_boot(report, facts_kernels):
    boot = (facts_kernels or {}).get("next_boot") or {}
    if not boot.get("release"):
        report.skip("next_boot_module", "next boot kernel unknown: %s" % (boot.get("detail") or "no kernel facts"))
        return
    problem = kernels.next_boot_problem(facts_kernels)
    if problem:
        report.problem("next_boot_module", "warning", *problem)
    else:
        report.passed("next_boot_module", "%s has the nvidia module %s" % (boot["release"], facts_kernels.get("driver_version")))


def _preflight_libraries(report, mismatch):
    state = (mismatch or {}).get("state")
    if state == "drift":
        report.problem(
            "driver_library_mismatch", "warning", "driver/library version mismatch: %s" % mismatch["detail"],
            "Every NVML and CUDA call fails until the loaded module is the libraries' version; validation fails the node.",
            fix_text(mismatch))
    elif state == "ok":
        report.passed("driver_library_mismatch", mismatch["detail"])
    else:
        report.skip("driver_library_mismatch", (mismatch or {}).get("detail") or "no facts")


def _preflight_nvml(report, exposure):
    state = (exposure or {}).get("state")
    if state == "exposed":
        report.problem(
            "nvml_reload_exposure", "warning", exposure["reason"],
            "systemd rewrites the containers' device cgroups on daemon-reload (a package install runs one); running GPU "
            "containers then fail with \"Failed to initialize NVML: Unknown Error\" until restarted.",
            exposure["fix"])
    elif state in ("protected", "not_exposed"):
        report.passed("nvml_reload_exposure", exposure["reason"])
    else:
        report.skip("nvml_reload_exposure", (exposure or {}).get("reason") or "no facts")
