# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What Debian and Ubuntu call the driver's packages (:class:`DebianLayout`, :class:`UbuntuLayout`):
the core set of a branch and flavour, the kernel module's choices, the headers DKMS builds with,
the packages of an older driver; and the driver apt installed (:func:`packaged_driver`).
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import kernels
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.dpkg import DPKG_QUERY, parse_dpkg_query
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


class DebianLayout(object):
    """Debian's packaging of the driver (source packages nvidia-graphics-drivers and, for the open
    kernel module, nvidia-open-gpu-kernel-modules)."""

    name = "apt-debian"
    archive = "Debian's non-free, contrib and non-free-firmware"
    components = ("contrib", "non-free", "non-free-firmware")
    kernel_packages = {
        "proprietary": ("nvidia-kernel-dkms", "nvidia-kernel-support"),
        "open": ("nvidia-open-kernel-dkms", "nvidia-open-kernel-support"),
    }
    # The headless user space: nvidia-smi, libcuda1 and libnvidia-ml1 with every package they
    # depend on at the same version (Depends "= version"), so that each one is pinned and held.
    common = (
        "firmware-nvidia-gsp",
        "libcuda1",
        "libnvidia-cfg1",
        "libnvidia-ml1",
        "libnvidia-pkcs11-openssl3",
        "libnvidia-ptxjitcompiler1",
        "nvidia-alternative",
        "nvidia-legacy-check",
        "nvidia-smi",
    )
    # NVIDIA's tools packaged from their own sources, at their own versions.
    companions = ("nvidia-persistenced", "nvidia-modprobe")

    # Debian does not package NVIDIA's fabric manager (no fabric-manager source package in the
    # archive); NVIDIA's CUDA repository for Debian does, under its own names.
    fm_repository = "cuda-apt"
    fm_archive = "the configured apt sources"

    def __init__(self, kernel, fabric_manager=False):
        self.kernel = kernel

    def is_marker(self, name):
        """Whether ``name`` tells which driver is installed (its version is the driver's)."""
        return name in ("libcuda1", "nvidia-smi", "libnvidia-ml1")

    def core(self, branch, flavor, modules):
        return sorted(self.kernel_packages[flavor] + self.common)

    def family(self, name):
        """Whether ``name`` is one of the driver's packages this layout installs (any flavour)."""
        return name in self.common or any(name in names for names in self.kernel_packages.values())

    def stale_module_package(self, name, want):
        return False

    def map_extra(self, name, branch):
        return name

    def headers(self):
        names = ["linux-headers-%s" % self.kernel]
        match = re.match(r"^\d+\.\d+\.\d+-\d+-(.+)$", self.kernel)
        if match:  # the flavour's metapackage brings the headers of every later kernel
            names.append("linux-headers-%s" % match.group(1))
        return names

    def modules_choice(self, requested):
        if requested == "precompiled":
            raise GpuFleetError(
                "kernel_modules: precompiled is not offered by Debian, whose driver packages build the kernel "
                "module with DKMS (use auto or dkms)"
            )
        return "dkms"


class UbuntuLayout(object):
    """Canonical's Enterprise Ready Driver packages (``-server``) in Ubuntu's restricted component."""

    name = "apt-ubuntu"
    archive = "Ubuntu's restricted"
    components = ("restricted",)
    companions = ()
    # The packages of the headless set, whatever their branch and flavour (the metapackages
    # nvidia-driver-* and nvidia-headless-* a user may have added move along as extras).
    _FAMILY = re.compile(
        r"^(nvidia-headless-no-dkms|nvidia-utils|libnvidia-compute|libnvidia-cfg1|"
        r"nvidia-compute-utils|nvidia-kernel-common|nvidia-kernel-source|nvidia-dkms)"
        r"-(\d+)-server(-open)?$"
    )
    _MODULES = re.compile(r"^linux-(modules|objects)-nvidia-(\d+)-server(-open)?-(.+)$")
    _BRANCHED = re.compile(r"-(\d+)-server")
    # Canonical packages the fabric manager and NSCQ per branch in multiverse (source packages
    # fabric-manager-<branch>, libnvidia-nscq-<branch>), at the -server driver's versions.
    fm_repository = "ubuntu"
    fm_archive = "Ubuntu's multiverse"

    def __init__(self, kernel, fabric_manager=False):
        self.kernel = kernel
        if fabric_manager:
            self.components = ("restricted", "multiverse")

    def core(self, branch, flavor, modules):
        open_ = "-open" if flavor == "open" else ""
        names = [
            "nvidia-headless-no-dkms-%d-server%s" % (branch, open_),
            "nvidia-utils-%d-server" % branch,
            "libnvidia-compute-%d-server" % branch,
            "libnvidia-cfg1-%d-server" % branch,
            "nvidia-compute-utils-%d-server" % branch,
            "nvidia-kernel-common-%d-server" % branch,
            "nvidia-kernel-source-%d-server%s" % (branch, open_),
        ]
        if modules == "dkms":
            names.append("nvidia-dkms-%d-server%s" % (branch, open_))
        return sorted(names)

    def precompiled(self, branch, flavor):
        return "linux-modules-nvidia-%d-server%s-%s" % (branch, "-open" if flavor == "open" else "", self.kernel)

    def family(self, name):
        return bool(self._FAMILY.match(name))

    def stale_module_package(self, name, want):
        """A precompiled module package to remove: another branch or flavour, or this kernel's when unwanted.

        Those of other kernels of the same branch and flavour stay (booting an older kernel keeps
        its modules). A ``linux-objects-nvidia-*`` package, which apt installs as a dependency of
        the modules package of the same name, is stale when that modules package is.
        """
        match = self._MODULES.match(name)
        if not match or name in want:
            return False
        if match.group(1) == "objects":
            return self.stale_module_package("linux-modules-" + name[len("linux-objects-"):], want)
        branch = re.search(r"-(\d+)-server(-open)?$", next((n for n in want if n.startswith("nvidia-kernel-source-")), ""))
        if not branch:
            return True
        same = int(match.group(2)) == int(branch.group(1)) and bool(match.group(3)) == bool(branch.group(2))
        return not same or match.group(4) == self.kernel

    def is_marker(self, name):
        return bool(re.match(r"^(libnvidia-compute|nvidia-utils)-\d+-server$", name))

    def map_extra(self, name, branch):
        if self._MODULES.match(name) or name.startswith("linux-signatures-nvidia-"):
            return None  # kernel modules: chosen per kernel, never carried along
        return self._BRANCHED.sub("-%d-server" % branch, name, count=1)

    def headers(self):
        return ["linux-headers-%s" % self.kernel]

    def modules_choice(self, requested):
        return requested


def next_boot_headers(system, running):
    """``[linux-headers-RELEASE]`` of the kernel the node boots next where it is another installed one
    (discovery.kernels reads it); installing them lets DKMS build the module for it before the reboot."""
    release = kernels.next_boot_other(system, running)
    return ["linux-headers-%s" % release] if release else []


def _next_kernel_of(name, running):
    """The kernel release of a ``linux-headers-RELEASE`` name other than the running kernel's, else None."""
    release = name[len("linux-headers-"):] if name.startswith("linux-headers-") else ""
    return release if release[:1].isdigit() and release != running else None


def layout_for(os_facts, kernel, fabric_manager=False):
    layout = UbuntuLayout if os_facts.get("id") == "ubuntu" else DebianLayout
    return layout(kernel, fabric_manager=fabric_manager)


# The libraries' package (its version is the driver's) and the kernel module's (its name tells the
# flavour), in Debian's and Canonical's names.
_DRIVER_LIBRARY = re.compile(r"^(libcuda1|libnvidia-compute-\d+(-server)?)$")
_DRIVER_MODULE = re.compile(r"^(nvidia(-open)?-kernel-dkms|nvidia-dkms-\d+.*|linux-modules-nvidia-\d+.*)$")


def packaged_driver(host):
    """``{'name', 'version', 'flavor'}`` of the driver's packages dpkg lists, or None (method preinstalled)."""
    rc, out, dummy = host.run(DPKG_QUERY)
    installed = parse_dpkg_query(out) if rc in (0, 1) else {}
    library = _first_match(installed, _DRIVER_LIBRARY)
    module = _first_match(installed, _DRIVER_MODULE)
    if not library and not module:
        return None
    return {
        "name": library or module,
        "version": installed[library]["version"] if library else None,
        "flavor": ("open" if "open" in module else "proprietary") if module else None,
    }


def _first_match(installed, pattern):
    return next((name for name in sorted(installed) if pattern.match(name)), None)
