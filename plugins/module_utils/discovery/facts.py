# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only discovery of a host's NVIDIA GPUs, driver, container stack, OS and kernel: the
``gpufleet_nvidia`` facts, gathered by :func:`gather_facts` from the readers of this folder.

Runs daily on thousands of nodes, so it reads files wherever it can and starts a process only
for a binary that exists: at most ``nvidia-smi -q -x``, ``modinfo nvidia``, one ``--version``
per container runtime found, and ``rpm -qf`` on RPM hosts. Every probe ends in a state
(``ok``, ``missing`` or ``error``) with a detail under ``probes``; nothing it reads can make it
raise.

All host access goes through :class:`~ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host.Host`.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import day2, kernels
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.container import (
    gather_containerd,
    gather_crio,
    gather_docker,
    gather_rancher,
    gather_toolkit,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.driver import gather_driver
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.machine import (
    gather_kernel,
    gather_os,
    gather_secure_boot,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.packages import gather_dpkg
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.pci import NVIDIA_VENDOR, gather_pci
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import Probes
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.topology import (
    gather_fabric_manager,
    gather_topology,
)

FACTS_SCHEMA = 1


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
