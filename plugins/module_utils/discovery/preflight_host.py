# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight's rules of the host under the driver: nouveau, Secure Boot and module signing, the
kernel headers DKMS builds with, and the container runtime asked for.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_report import BLOCKING, WARNING


def _check_nouveau(report, facts, method):
    driver = facts.get("driver") or {}
    if not driver.get("nouveau_loaded"):
        report.passed("nouveau", "nouveau not loaded")
        return
    if method == "package":
        report.problem(
            "nouveau",
            WARNING,
            "the nouveau driver is loaded; the driver role will blacklist it and the host needs a reboot",
            "nouveau holds the GPUs until it is unloaded, so the nvidia module cannot bind them.",
            "Allow the reboot that the driver role asks for (or blacklist nouveau and reboot beforehand).",
        )
    elif method == "operator":
        report.problem(
            "nouveau",
            BLOCKING,
            "the nouveau driver is loaded and driver_method is operator",
            "The GPU Operator's driver container cannot load the nvidia module while nouveau holds the GPUs.",
            "Blacklist nouveau (modprobe.d: blacklist nouveau, options nouveau modeset=0), rebuild the initramfs and reboot.",
        )
    elif not driver.get("loaded"):
        report.problem(
            "nouveau",
            BLOCKING,
            "the nouveau driver is loaded and the NVIDIA driver is not",
            "nouveau holds the GPUs, so the pre-installed NVIDIA driver cannot bind them.",
            "Blacklist nouveau (modprobe.d: blacklist nouveau, options nouveau modeset=0), rebuild the initramfs and reboot.",
        )
    else:
        report.passed("nouveau", "nouveau loaded beside the NVIDIA driver")


def _check_secure_boot(report, facts, method):
    """secure_boot: with Secure Boot on, the driver's modules must be signed by an enrolled key."""
    sb = facts.get("secure_boot") or {}
    state = sb.get("state")
    if state == "unknown":
        report.skip("secure_boot", "Secure Boot state unknown")
    elif state != "enabled":
        report.passed("secure_boot", "Secure Boot %s" % (state or "unknown"))
    elif method == "operator":
        report.problem(
            "secure_boot",
            WARNING,
            "Secure Boot is enabled and driver_method is operator",
            "The GPU Operator's driver container builds or loads modules that are not signed by a key "
            "this host enrolled, unless its precompiled, signed driver images are used.",
            "Use the operator's precompiled signed driver images (driver.usePrecompiled), or set "
            "driver_method: package and sign with a MOK key.",
        )
    elif method == "preinstalled":
        _check_preinstalled_signed(report, facts.get("driver") or {})
    else:
        _check_package_signing(report, (facts.get("os") or {}).get("id"), sb)


def _check_preinstalled_signed(report, driver):
    installed = driver.get("installed") or {}
    if (driver.get("source") or "absent") == "absent":
        report.skip("secure_boot", "Secure Boot enabled; no driver to check (see driver_missing)")
    elif driver.get("loaded") or installed.get("signer"):
        report.passed("secure_boot", "Secure Boot enabled; the driver's module is loaded or signed")
    else:
        report.problem(
            "secure_boot",
            WARNING,
            "Secure Boot is enabled and the pre-installed nvidia module is neither loaded nor known to be signed",
            "With Secure Boot the kernel refuses modules that are not signed by an enrolled key.",
            "Sign the module with a key enrolled in the MOK list (mokutil --import), or disable Secure Boot.",
        )


def _check_package_signing(report, os_id, sb):
    """driver_method package: Ubuntu's signed modules, or DKMS signing with its MOK key."""
    if os_id == "ubuntu":
        report.passed("secure_boot", "Secure Boot enabled; Ubuntu's precompiled signed modules apply")
        return
    if sb.get("dkms_mok_key"):
        report.passed(
            "secure_boot", "Secure Boot enabled; DKMS signs with /var/lib/dkms/mok.pub (enrolment not verified)"
        )
        return
    report.problem(
        "secure_boot",
        BLOCKING,
        "Secure Boot is enabled and DKMS would build unsigned nvidia modules (no /var/lib/dkms/mok.pub)",
        "The kernel refuses to load modules that are not signed by a key enrolled in the MOK list.",
        "Create and enroll a DKMS signing key (dkms generate_mok; mokutil --import /var/lib/dkms/mok.pub; "
        "reboot to confirm), or disable Secure Boot.",
    )


def _check_headers(report, facts, method):
    os_facts = facts.get("os") or {}
    kernel = facts.get("kernel") or {}
    if method != "package":
        report.skip(
            "kernel_headers",
            "driver_method %s builds nothing on the host" % method
            if method == "preinstalled"
            else "driver_method operator: the driver container brings what it builds with",
        )
        return
    if os_facts.get("id") == "ubuntu" or os_facts.get("family") not in ("debian", "redhat"):
        report.skip("kernel_headers", "no DKMS build on %s" % (os_facts.get("id") or "this OS"))
        return
    if kernel.get("headers_installed"):
        report.passed("kernel_headers", "%s exists" % kernel.get("headers_path"))
        return
    package = "linux-headers-%s" if os_facts.get("family") == "debian" else "kernel-devel-%s"
    report.problem(
        "kernel_headers",
        BLOCKING,
        "the headers of the running kernel %s are not installed (%s is missing)"
        % (kernel.get("release"), kernel.get("headers_path")),
        "DKMS builds the nvidia modules against the running kernel's headers; without them the driver "
        "installs but never loads.",
        "Install %s, or reboot into a kernel whose headers are installed." % (package % kernel.get("release")),
    )


def _check_runtime(report, facts, runtime):
    container = facts.get("container") or {}
    if runtime in (None, "none"):
        report.skip("containerd_cri", "container_runtime none")
        report.skip("container_runtime", "container_runtime none")
        return
    found = (container.get(runtime) or {}).get("installed")
    if found:
        report.passed("container_runtime", "%s installed" % runtime)
    else:
        report.problem(
            "container_runtime",
            WARNING,
            "container_runtime is %s but %s was not found on the host" % (runtime, runtime),
            "The NVIDIA runtime is configured into an existing container runtime, not installed with one.",
            "Install %s before the container runtime role runs, or set container_runtime to the one in use." % runtime,
        )
    if runtime != "containerd":
        report.skip("containerd_cri", "container_runtime %s" % runtime)
        return
    containerd = container.get("containerd") or {}
    if containerd.get("cri_disabled"):
        disabled = list(containerd.get("disabled_plugins") or [])
        report.problem(
            "containerd_cri",
            BLOCKING,
            "containerd's CRI plugin is disabled in %s (disabled_plugins = %s)"
            % (containerd.get("config_path"), disabled),
            "Kubernetes talks to containerd through the CRI plugin; Docker's containerd.io package ships "
            "it disabled.",
            "Let the container_runtime role remove the CRI plugin from disabled_plugins (its option for "
            "enabling the CRI plugin), or remove it from %s yourself and restart containerd."
            % containerd.get("config_path"),
        )
    else:
        report.passed("containerd_cri", "CRI plugin enabled")
