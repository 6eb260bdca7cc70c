# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host validation's checks of the GPUs, the driver (nvidia-smi, the loaded module against its
libraries, the declared version, the one on disk) and the Container Toolkit's version.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig, plural as _plural
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.driver import found_of
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import DRIFT, FAILED, OK, SKIPPED


def check_gpus(checks, facts, expected):
    found = facts.get("gpu_count") or 0
    if expected is None or (expected == 0 and found == 0):
        if found:
            checks.add("gpus", OK, "%s on the PCI bus" % _plural(found, "NVIDIA GPU"))
        return found
    if found == expected:
        checks.add("gpus", OK, "%s on the PCI bus, as declared" % _plural(found, "NVIDIA GPU"))
    else:
        checks.add(
            "gpus",
            FAILED,
            "expected %s (gpu_count), found %s on the PCI bus" % (_plural(expected, "GPU"), found or "none"),
        )
    return found


def check_driver(checks, facts, driver_method):
    """The driver check: nvidia-smi answers, at the kernel module's version, and sees every GPU
    of the PCI bus. True when it passed, False when not, None when it is not the host's to check."""
    if driver_method == "operator":
        checks.add(
            "driver",
            SKIPPED,
            "driver: not checked on the host: the GPU Operator runs it in a container "
            "(driver_method operator); the cluster checks cover it",
        )
        return None
    driver = facts.get("driver") or {}
    smi = driver.get("nvidia_smi") or {}
    seen = smi.get("gpus") or []
    problem = _smi_problem(smi) or _library_mismatch(driver.get("version"), smi) or _unseen_gpus(facts.get("gpus") or [], seen)
    if problem:
        checks.add("driver", FAILED, problem)
        return False
    checks.add(
        "driver",
        OK,
        "nvidia-smi answers: driver %s, CUDA %s, %s"
        % (smi.get("driver_version"), smi.get("cuda_version"), _plural(len(seen), "GPU")),
    )
    return True


def _smi_problem(smi):
    """Why nvidia-smi gave no answer, or None."""
    state = smi.get("state")
    if state == "missing":
        return "nvidia-smi not found (looked in PATH, /usr/local/nvidia/bin and /usr/bin): the driver is not installed"
    if state != "ok":
        return "nvidia-smi failed: %s" % (smi.get("detail") or "no answer")
    return None


def _library_mismatch(loaded, smi):
    """The "driver/library version mismatch": the kernel module is not nvidia-smi's version; or None."""
    if loaded and smi.get("driver_version") and loaded != smi.get("driver_version"):
        return (
            "driver/library version mismatch: the kernel module is %s, nvidia-smi's libraries %s "
            "(reboot, or reload the nvidia modules)" % (loaded, smi.get("driver_version"))
        )
    return None


def _unseen_gpus(pci, seen):
    """Which GPUs of the PCI bus nvidia-smi does not see, as a problem; or None."""
    if not pci or len(seen) >= len(pci):
        return None
    missing = sorted(set(g.get("bus_id") for g in pci) - set(g.get("bus_id") for g in seen))
    return "nvidia-smi sees %d of the %d GPUs on the PCI bus (not seen: %s)" % (
        len(seen), len(pci), ", ".join(b for b in missing if b) or "unknown")


def check_prepared_driver(checks, facts, declared, driver_method):
    """A node prepared without a GPU: the driver on disk against the declared one (none can load)."""
    if driver_method != "package":
        checks.add(
            "driver_version",
            SKIPPED,
            "driver version: not checked on a node without GPU (driver_method %s)" % driver_method,
        )
        return
    installed = found_of(facts)["version"]
    if not installed:
        checks.add("driver_version", FAILED, "no NVIDIA driver is installed (driver_method package)")
    elif not declared:
        checks.add("driver_version", OK, "driver %s installed (none declared), not loaded: no GPU" % installed)
    elif versions.matches(declared, installed):
        checks.add(
            "driver_version", OK, "installed driver %s is the declared %s (not loaded: no GPU)" % (installed, declared)
        )
    else:
        checks.add("driver_version", DRIFT, "declared driver %s, installed %s" % (declared, installed))


def check_driver_version(checks, facts, declared, driver_method):
    driver = facts.get("driver") or {}
    loaded = driver.get("version") or (driver.get("nvidia_smi") or {}).get("driver_version")
    if driver_method == "operator":
        checks.add("driver_version", SKIPPED, "driver version: not checked on the host (driver_method operator)")
        return
    if not declared:
        checks.add("driver_version", SKIPPED, "driver version: none declared (nvidia_driver_version)")
    elif not loaded:
        checks.add("driver_version", SKIPPED, "driver version: no driver loaded to compare with %s" % declared)
    elif versions.try_parse_driver_version(loaded) is None:
        checks.add("driver_version", DRIFT, "declared driver %s, loaded %r (not a driver version)" % (declared, loaded))
    elif versions.matches(declared, loaded):
        checks.add("driver_version", OK, "loaded driver %s is the declared %s" % (loaded, declared))
    else:
        checks.add("driver_version", DRIFT, "declared driver %s, loaded %s" % (declared, loaded))
    installed = (driver.get("installed") or {}).get("version")
    if not loaded or not installed:
        return
    if installed == loaded:
        checks.add("driver_installed", OK, "the driver on disk (%s) is the loaded one" % installed)
    else:
        checks.add(
            "driver_installed",
            DRIFT,
            "driver %s is installed but %s is loaded: reboot (or reload the nvidia modules) to run it"
            % (installed, loaded),
        )


def _without_epoch(version):
    return version.rsplit(":", maxsplit=1)[-1]


def _toolkit_matches(declared, installed):
    """``1.17.8`` matches 1.17.8-1 and 1.17.8; ``1.17`` any 1.17.x; ``1.17.8-1`` matches 1.17.8-1,
    and 1.17.8 where the installed version has no package revision (read from nvidia-ctk)."""
    declared, installed = _without_epoch(declared), _without_epoch(installed)
    if installed == declared:
        return True
    if "-" in declared and "-" in installed:
        return False
    upstream = installed.split("-", maxsplit=1)[0].split("~", maxsplit=1)[0]
    wanted = declared.split("-", maxsplit=1)[0]
    return upstream == wanted or upstream.startswith(wanted + ".")


def check_toolkit_version(checks, facts, declared):
    toolkit = _dig(facts, "container", "toolkit") or {}
    installed = toolkit.get("version")
    if not declared:
        return
    if not installed:
        checks.add(
            "toolkit_version", FAILED, "NVIDIA Container Toolkit %s is declared but none is installed" % declared
        )
    elif _toolkit_matches(str(declared), str(installed)):
        checks.add("toolkit_version", OK, "NVIDIA Container Toolkit %s is the declared %s" % (installed, declared))
    else:
        checks.add("toolkit_version", DRIFT, "declared NVIDIA Container Toolkit %s, installed %s" % (declared, installed))
