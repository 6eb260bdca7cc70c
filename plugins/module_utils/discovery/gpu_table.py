# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Data-center NVIDIA GPUs by PCI device id, for hosts without a pci.ids file.

Every row was checked against the NVIDIA (10de) block of the PCI ID database
(https://github.com/pciutils/pciids, ``pci.ids``) and, where listed, the "Compatible GPUs"
table of NVIDIA's open-gpu-kernel-modules README (release 550.40.82). Names keep pci.ids'
form ``CHIP [marketing name]`` so that a name reads the same whichever source gave it. Only
ids seen in those sources are here; anything else is reported as unknown, not guessed.

The driver requirements below are used by the preflight rules; each cites its source.
"""

from __future__ import annotations

import re

# Architectures from oldest to newest (the names nvidia-smi prints as product_architecture).
ARCHITECTURES = (
    "Kepler",
    "Maxwell",
    "Pascal",
    "Volta",
    "Turing",
    "Ampere",
    "Ada Lovelace",
    "Hopper",
    "Blackwell",
)

# pci.ids names start with the chip: GV100GL, TU104GL, GA100, GH100, AD102GL, GB100, GB202GL...
# (one prefix per architecture, in the same order).
CHIP_PREFIX_ARCHITECTURE = dict(zip(("GK", "GM", "GP", "GV", "TU", "GA", "AD", "GH", "GB"), ARCHITECTURES))
_CHIP_RE = re.compile(r"^(%s)\d" % "|".join(CHIP_PREFIX_ARCHITECTURE))
# The spellings nvidia-smi and pci.ids use for an architecture, lower-cased.
_SPELLINGS = dict([(arch.lower(), arch) for arch in ARCHITECTURES] + [("ada", "Ada Lovelace"), ("adalovelace", "Ada Lovelace")])

# device id -> (chip, marketing name, architecture)
GPUS = {
    # Maxwell
    0x13F2: ("GM204GL", "Tesla M60", "Maxwell"),
    0x17FD: ("GM200GL", "Tesla M40", "Maxwell"),
    # Pascal
    0x15F7: ("GP100GL", "Tesla P100 PCIe 12GB", "Pascal"),
    0x15F8: ("GP100GL", "Tesla P100 PCIe 16GB", "Pascal"),
    0x15F9: ("GP100GL", "Tesla P100 SXM2 16GB", "Pascal"),
    0x1B38: ("GP102GL", "Tesla P40", "Pascal"),
    0x1BB3: ("GP104GL", "Tesla P4", "Pascal"),
    # Volta
    0x1DB1: ("GV100GL", "Tesla V100 SXM2 16GB", "Volta"),
    0x1DB4: ("GV100GL", "Tesla V100 PCIe 16GB", "Volta"),
    0x1DB5: ("GV100GL", "Tesla V100 SXM2 32GB", "Volta"),
    0x1DB6: ("GV100GL", "Tesla V100 PCIe 32GB", "Volta"),
    0x1DF6: ("GV100GL", "Tesla V100S PCIe 32GB", "Volta"),
    # Turing
    0x1EB8: ("TU104GL", "Tesla T4", "Turing"),
    # Ampere
    0x20B0: ("GA100", "A100 SXM4 40GB", "Ampere"),
    0x20B1: ("GA100", "A100 PCIe 40GB", "Ampere"),
    0x20B2: ("GA100", "A100 SXM4 80GB", "Ampere"),
    0x20B5: ("GA100", "A100 PCIe 80GB", "Ampere"),
    0x20F1: ("GA100", "A100 PCIe 40GB", "Ampere"),
    0x20B7: ("GA100GL", "A30 PCIe", "Ampere"),
    0x2230: ("GA102GL", "RTX A6000", "Ampere"),
    0x2235: ("GA102GL", "A40", "Ampere"),
    0x2236: ("GA102GL", "A10", "Ampere"),
    0x2237: ("GA102GL", "A10G", "Ampere"),
    0x25B6: ("GA107GL", "A2 / A16", "Ampere"),
    # Ada Lovelace
    0x26B1: ("AD102GL", "RTX 6000 Ada Generation", "Ada Lovelace"),
    0x26B5: ("AD102GL", "L40", "Ada Lovelace"),
    0x26B9: ("AD102GL", "L40S", "Ada Lovelace"),
    0x26BA: ("AD102GL", "L20", "Ada Lovelace"),
    0x27B8: ("AD104GL", "L4", "Ada Lovelace"),
    # Hopper
    0x2321: ("GH100", "H100 NVL", "Hopper"),
    0x2322: ("GH100", "H800 PCIe", "Hopper"),
    0x2324: ("GH100", "H800", "Hopper"),
    0x2329: ("GH100", "H20", "Hopper"),
    0x2330: ("GH100", "H100 SXM5 80GB", "Hopper"),
    0x2331: ("GH100", "H100 PCIe", "Hopper"),
    0x2335: ("GH100", "H200 SXM 141GB", "Hopper"),
    0x2339: ("GH100", "H100 SXM5 94GB", "Hopper"),
    0x233B: ("GH100", "H200 NVL", "Hopper"),
    0x2342: ("GH100", "GH200 120GB / 480GB", "Hopper"),
    0x2348: ("GH100", "GH200 144G HBM3e", "Hopper"),
    # Blackwell
    0x2901: ("GB100", "B200", "Blackwell"),
    0x2941: ("GB100", "HGX GB200", "Blackwell"),
    0x2BB5: ("GB202GL", "RTX PRO 6000 Blackwell Server Edition", "Blackwell"),
    0x3182: ("GB110", "B300 SXM6 AC", "Blackwell"),
    0x31C2: ("GB110", "GB300", "Blackwell"),
}

# Chips whose GPUs can do MIG: the "Supported GPUs" table of NVIDIA's Multi-Instance GPU User
# Guide (docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-gpus.html, read 2026-12-03:
# A100 and A30 on GA100, H100 / H200 / H20 / GH200 on GH100, B200 / GB200 on GB100, RTX PRO
# 6000 / 5000 Blackwell on GB202, RTX PRO 4500 Blackwell on GB203) and its "Deployment
# Considerations" page (B300 and GB300, GB110). Every other chip of the table cannot: the guide
# says MIG starts with compute capability 8.0 and lists no other data-center chip.
MIG_CHIPS = ("GA100", "GH100", "GB100", "GB110", "GB202", "GB203")


def mig_capable(device_id):
    """Whether the GPU of PCI device id ``device_id`` (an int, or text such as ``0x27b8``) can do
    MIG, from its chip; None when the table does not know the device."""
    if isinstance(device_id, str):
        try:
            device_id = int(device_id, 16)
        except ValueError:
            return None
    row = GPUS.get(device_id)
    if row is None:
        return None
    return any(row[0].startswith(chip) for chip in MIG_CHIPS)


# (device, subsystem vendor, subsystem device) -> name, where one device id is several products
# (pci.ids comment on 25b6: "A16 - 25B6 10DE 14A9 / A2 - 25B6 10DE 157E").
SUBSYSTEM_NAMES = {
    (0x25B6, 0x10DE, 0x14A9): "A16",
    (0x25B6, 0x10DE, 0x157E): "A2",
}

# --- driver requirements used by preflight -------------------------------------------------

# The open kernel modules need the GSP, first in Turing: "Open GPU Kernel Modules are supported
# only on Turing and newer generations" (NVIDIA Driver Installation Guide, Kernel Modules,
# https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html).
OPEN_MODULES_MIN_ARCHITECTURE = "Turing"

# "For cutting-edge platforms such as NVIDIA Grace Hopper or NVIDIA Blackwell, you must use the
# open-source GPU kernel modules. The proprietary drivers are unsupported on these platforms."
# (NVIDIA technical blog, "NVIDIA Transitions Fully Towards Open-Source GPU Kernel Modules",
# 2024-07.) Grace Hopper is a device id, not a whole architecture.
OPEN_MODULES_REQUIRED_ARCHITECTURES = ("Blackwell",)
OPEN_MODULES_REQUIRED_DEVICES = {
    0x2342: "GH200 (Grace Hopper)",
    0x2348: "GH200 (Grace Hopper)",
}

# NVIDIA's driver installs the open kernel modules by default from R560 on ("the default since
# R560": NVIDIA Driver Installation Guide, Kernel Modules, above); older branches default to the
# proprietary ones. ``driver_flavor: auto`` follows it on GPUs that can run either.
OPEN_DEFAULT_BRANCH = 560

# Newest driver branch of an architecture: "Last Driver Support: R580" for Maxwell, Pascal and
# Volta, R470 for Kepler (NVIDIA Data Center Drivers, "CUDA Toolkit, Driver, and Architecture
# Matrix", https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html).
ARCHITECTURE_MAX_BRANCH = {
    "Kepler": 470,
    "Maxwell": 580,
    "Pascal": 580,
    "Volta": 580,
}

# Newest CUDA major of an architecture: "CUDA 12.x" is the last toolkit of Maxwell, Pascal and
# Volta, whose support CUDA 13.0 drops (same matrix; CUDA 13.0 release notes, "Deprecated or
# Dropped Architectures").
ARCHITECTURE_MAX_CUDA_MAJOR = {
    "Maxwell": 12,
    "Pascal": 12,
    "Volta": 12,
}

# Oldest driver of an architecture. Hopper: the R525 data center release notes are the first to
# list H100 (HGX H100 PG520) VBIOS (docs.nvidia.com/datacenter/tesla/tesla-release-notes-525-85-12).
# Blackwell: CUDA 12.8 is the first toolkit for Blackwell (architecture matrix above), and it
# needs driver >= 570.26.
ARCHITECTURE_MIN_DRIVER = {
    "Hopper": "525",
    "Blackwell": "570",
}

# Oldest driver of one product, where it is newer than its architecture's:
# - H200 (2335, 233b): first in the "Compatible GPUs" table of open-gpu-kernel-modules in the
#   R550 series (README of 550.40.82); not found in older tables we could read.
# - HGX B200 (2901): "HGX B200 requires a driver container version of 570.133.20 or later"
#   (NVIDIA GPU Operator platform support, github.com/NVIDIA/cloud-native-docs pull 184).
DEVICE_MIN_DRIVER = {
    0x2335: ("550", "H200"),
    0x233B: ("550", "H200 NVL"),
    0x2901: ("570.133.20", "HGX B200"),
}


def architecture_rank(architecture):
    """Position of an architecture in ARCHITECTURES, or None when unknown."""
    try:
        return ARCHITECTURES.index(architecture)
    except ValueError:
        return None


def normalise_architecture(value):
    """Map nvidia-smi's and pci.ids' spellings onto ARCHITECTURES; None when unknown."""
    return _SPELLINGS.get(str(value).strip().lower()) if value else None


def architecture_from_name(name):
    """The architecture that a pci.ids name's chip prefix (``GH100 [...]``) gives, or None."""
    match = _CHIP_RE.match(name) if name else None
    return CHIP_PREFIX_ARCHITECTURE[match.group(1)] if match else None


def lookup(device_id, subsystem_vendor=None, subsystem_device=None):
    """``(name, architecture)`` from the table, or ``(None, None)``."""
    row = GPUS.get(device_id)
    if row is None:
        return None, None
    chip, name, arch = row
    name = SUBSYSTEM_NAMES.get((device_id, subsystem_vendor, subsystem_device), name)
    return "%s [%s]" % (chip, name), arch
