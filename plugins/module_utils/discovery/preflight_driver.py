# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight's rules of the driver: the OS against the install method, the driver there is against
the method (missing, installed by other means, the GPU Operator's, drifted from the declared one)
and NVIDIA's fabric manager on hosts with NVSwitches.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.driver import found_of
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import systems, versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_report import (
    BLOCKING,
    FABRIC_MANAGER_RULES,
    WARNING,
)

FABRIC_MANAGER_UNIT = "nvidia-fabricmanager"


def found_version(facts):
    """The version (a DriverVersion) of the driver that discovery found (``driver.found``), or None."""
    return versions.try_parse_driver_version(found_of(facts)["version"])


def found_flavor(facts):
    """The flavour of the driver that discovery found (``driver.found``), or None."""
    return found_of(facts)["flavor"]


def _check_os(report, facts, method):
    os_facts = facts.get("os") or {}
    os_id = os_facts.get("id")
    if method != "package":
        report.passed("os_supported", "driver_method %s works on any OS" % method)
        return
    label = os_facts.get("pretty_name") or ("%s %s" % (os_id, os_facts.get("version_id"))).strip()
    if systems.package_supported(os_facts):
        report.passed("os_supported", "%s supports driver_method package" % label)
        return
    report.problem(
        "os_supported",
        BLOCKING,
        "driver_method package is not supported on %s (supported: %s)"
        % (label if os_id else "an unidentified OS", systems.PACKAGE_OS_NAMES),
        "The driver role only knows the package repositories and names of those releases.",
        "Use driver_method: preinstalled and provide the driver yourself, or move the host to a supported release.",
    )


def _check_driver_presence(report, facts, method, declared, declared_flavor):
    """driver_missing, driver_not_package_owned and driver_drift: the driver there is, against the method."""
    source = (facts.get("driver") or {}).get("source") or "absent"
    where = _driver_whereabouts(facts.get("driver") or {})
    _check_operator_driver(report, method, source, (facts.get("driver") or {}).get("operator_root"))
    if method == "package":
        _check_driver_for_package(report, source, where)
    elif method == "operator":
        _check_driver_for_operator(report, source, where)
    elif source == "operator":
        report.skip("driver_not_package_owned", "driver_method preinstalled keeps the driver there is")
        report.skip("driver_missing", "the GPU Operator's driver serves the node now (rule operator_driver)")
        report.skip("driver_drift", "the GPU Operator's driver serves the node now (rule operator_driver)")
    else:
        _check_preinstalled_driver(report, facts, source, where, declared, declared_flavor)


def _check_operator_driver(report, method, source, root):
    """operator_driver: the GPU Operator's driver container on a node declared prepared on the host
    (a node moving from the operator to the host): the cluster layer moves the operator off first."""
    if method == "operator":
        report.skip("operator_driver", "driver_method operator: the GPU Operator's driver is the one wanted")
        return
    if source != "operator":
        report.passed("operator_driver", "no GPU Operator driver container on the node")
        return
    report.problem(
        "operator_driver",
        WARNING,
        "the GPU Operator's driver container serves this node (driver root %s) and driver_method is %s" % (root, method),
        "The node moves from the operator's driver to the host's: both must never hold the GPUs at once.",
        "site.yml's gpu_operator layer labels the node nvidia.com/gpu.deploy.driver=false, drains its GPU pods and "
        "waits until the operator's driver pod has left before the driver layer runs; with another cluster layer, "
        "take the operator's driver off this node first (label it so, and wait for its driver pod to go).",
    )


def _driver_whereabouts(driver):
    """Where the host's driver shows, for the messages (``nvidia-smi at ..., kernel module ... loaded``)."""
    smi = driver.get("nvidia_smi") or {}
    installed = driver.get("installed") or {}
    where = []
    if smi.get("path"):
        where.append("nvidia-smi at %s" % smi["path"])
    if driver.get("loaded"):
        where.append("kernel module %s loaded" % (driver.get("version") or ""))
    elif installed.get("state") == "ok":
        where.append("kernel module %s installed" % (installed.get("version") or ""))
    return ", ".join(w.strip() for w in where) or "driver files present"


def _check_driver_for_package(report, source, where):
    report.skip("driver_missing", "driver_method package installs the driver")
    report.skip("driver_drift", "driver_method package manages the version")
    if source == "operator":
        report.passed("driver_not_package_owned", "driver source: the GPU Operator's container (rule operator_driver)")
        return
    if source != "preinstalled":
        report.passed("driver_not_package_owned", "driver source: %s" % source)
        return
    report.problem(
        "driver_not_package_owned",
        BLOCKING,
        "a driver that no package installed is present (%s) and driver_method is package" % where,
        "Installing the driver packages over a driver from a .run file, a container or an image "
        "leaves two drivers fighting over the same files and kernel modules.",
        "Remove the pre-installed driver first (for a .run install: nvidia-uninstall), or set "
        "driver_method: preinstalled to keep it.",
    )


def _check_driver_for_operator(report, source, where):
    # The GPU Operator's driver container provides the driver. A host driver makes the
    # operator label the node pre-installed and skip its own, so the declared version is
    # not what the node runs.
    report.skip("driver_missing", "driver_method operator: the GPU Operator deploys the driver")
    report.skip("driver_drift", "driver_method operator: the GPU Operator manages the version")
    if source in ("absent", "operator"):
        report.passed("driver_not_package_owned", "no host driver for the GPU Operator's to fight with (driver source: %s)" % source)
        return
    report.problem(
        "driver_not_package_owned",
        BLOCKING,
        "a host driver is present (%s) and driver_method is operator" % where,
        "The GPU Operator finds the host driver, labels the node "
        "nvidia.com/gpu.deploy.driver=pre-installed and does not deploy its own: the node runs "
        "the host's driver, not the declared one, and the collection does not remove a driver under "
        "running GPU pods.",
        "Move the node to the operator in steps: drain it (kubectl drain, or the upgrade playbook's "
        "gpu_drain), remove the host driver (its packages, or nvidia-uninstall for a .run install) and "
        "reboot, then run again; or keep driver_method: package / preinstalled for this node.",
    )


def _check_preinstalled_driver(report, facts, source, where, declared, declared_flavor):
    report.skip("driver_not_package_owned", "driver_method preinstalled keeps the driver there is")
    if source == "absent":
        report.problem(
            "driver_missing",
            BLOCKING,
            "driver_method is preinstalled but no NVIDIA driver is installed or loaded",
            "With driver_method preinstalled nothing installs a driver, so the GPUs stay unusable.",
            "Install the driver (in the image, or with a .run file) before this play, or set driver_method: package.",
        )
        report.skip("driver_drift", "no driver to compare")
        return
    installed = found_version(facts)
    _check_driver_loaded(report, facts.get("driver") or {}, where, installed)
    _check_driver_drift(report, installed, found_flavor(facts), declared, declared_flavor)


def _check_driver_loaded(report, driver, where, installed):
    """driver_missing for a pre-installed driver that is there: loaded, and nvidia-smi answers."""
    smi = driver.get("nvidia_smi") or {}
    if not driver.get("loaded"):
        report.problem(
            "driver_missing",
            BLOCKING,
            "driver_method is preinstalled and a driver is installed (%s) but its kernel module is not loaded" % where,
            "Without the nvidia kernel module no GPU can be used.",
            "Load it (modprobe nvidia) or reboot, and check dmesg for why it did not load.",
        )
    elif smi.get("state") == "error":
        report.problem(
            "driver_missing",
            WARNING,
            "the pre-installed driver is loaded but nvidia-smi fails: %s" % (smi.get("detail") or "unknown error"),
            "nvidia-smi failing usually means the user-space driver and the kernel module do not match.",
            "Reinstall the driver's user-space part of the loaded version, or reboot after an upgrade.",
        )
    else:
        report.passed("driver_missing", "driver %s loaded" % (driver.get("version") or installed))


def _driver_drift(installed, flavor, declared, declared_flavor):
    """What of the pre-installed driver differs from what is declared (version, flavour)."""
    drift = []
    if declared is not None and installed is not None and not versions.matches(declared, installed):
        drift.append("version %s, declared %s" % (installed, declared))
    if declared_flavor in ("open", "proprietary") and flavor and flavor != declared_flavor:
        drift.append("flavour %s, declared %s" % (flavor, declared_flavor))
    return drift


def _check_driver_drift(report, installed, flavor, declared, declared_flavor):
    drift = _driver_drift(installed, flavor, declared, declared_flavor)
    if drift:
        report.problem(
            "driver_drift",
            WARNING,
            "the pre-installed driver has drifted from the declared one: %s" % "; ".join(drift),
            "The fleet no longer runs the driver its inventory says; CUDA and GPU checks use the installed one.",
            "Update the host's image or driver, or change driver_version / driver_flavor to what is installed.",
        )
    elif declared is None and declared_flavor not in ("open", "proprietary"):
        report.passed("driver_drift", "nothing declared to compare with driver %s" % installed)
    else:
        report.passed("driver_drift", "installed driver %s %s matches what is declared" % (installed, flavor or ""))


def _check_fabric_manager(report, facts, method, compared, compared_label):
    """NVIDIA's fabric manager on a host whose GPUs are joined by NVSwitches.

    Without it the NVSwitches stay unconfigured and CUDA fails on every GPU; it refuses to start
    with a driver of another version than its own. The facts' ``nvswitches`` and
    ``fabric_manager`` (gpu_facts) say what the host has.
    """
    switches = (facts.get("nvswitches") or {}).get("count")
    fm = facts.get("fabric_manager")
    skipped = _fabric_manager_not_checked(switches, fm, method)
    if skipped:
        for rule in FABRIC_MANAGER_RULES:
            report.skip(rule, skipped)
        return
    nvswitches = "%d NVSwitch%s" % (switches, "" if switches == 1 else "es")
    if fm.get("installed"):
        _check_fabric_manager_service(report, fm, method, nvswitches)
    else:
        _check_fabric_manager_install(report, facts.get("os") or {}, method, nvswitches)
    _check_fabric_manager_version(report, fm, method, compared, compared_label, nvswitches)


def _fabric_manager_not_checked(switches, fm, method):
    """Why the fabric manager rules do not apply to the host, or None when they do."""
    if switches is None or not isinstance(fm, dict):
        return "the facts have no NVSwitch or fabric manager data (gathered by an older gpu_facts)"
    if not switches:
        return "no NVSwitch on this host"
    if method == "operator":
        return "driver_method operator: the GPU Operator's driver container runs the fabric manager"
    return None


def _check_fabric_manager_install(report, os_facts, method, nvswitches):
    """fabric_manager_missing where none is installed: who will install it."""
    if method == "preinstalled":
        report.problem(
            "fabric_manager_missing",
            BLOCKING,
            "the host has %s and no fabric manager, and driver_method preinstalled installs none" % nvswitches,
            "The GPUs of an NVSwitch system reach each other only once NVIDIA's fabric manager has configured "
            "the switches; until it runs, CUDA fails to initialise on every GPU ('system not yet initialized').",
            "Install NVIDIA's fabric manager at the driver's exact version in the host's image and enable its "
            "nvidia-fabricmanager service, or set driver_method: package so that the driver role installs it.",
        )
    elif os_facts.get("id") == "debian":
        report.problem(
            "fabric_manager_missing",
            WARNING,
            "the host has %s and Debian's archive does not package the fabric manager" % nvswitches,
            "The driver role installs the fabric manager with the driver from the apt sources; Debian's own "
            "archive has none, so the role fails before any change unless the sources carry NVIDIA's CUDA "
            "repository for Debian.",
            "Add NVIDIA's CUDA repository for Debian to the node's apt sources, or install the driver and its "
            "fabric manager by other means and set driver_method: preinstalled.",
        )
    else:
        report.passed("fabric_manager_missing",
                      "%s: the driver role installs the fabric manager with the driver" % nvswitches)


def _check_fabric_manager_service(report, fm, method, nvswitches):
    """fabric_manager_missing where one is installed: a pre-installed one must run."""
    service = fm.get("service")
    if method == "preinstalled" and service not in (None, "active", "unknown"):
        report.problem(
            "fabric_manager_missing",
            WARNING,
            "the fabric manager %s is installed but its service %s is %s"
            % (fm.get("version") or "", FABRIC_MANAGER_UNIT, service),
            "Until the fabric manager runs, CUDA fails to initialise on the GPUs of an NVSwitch system.",
            "Enable and start it (systemctl enable --now %s); if it does not stay up, its log says why "
            "(journalctl -u %s)." % (FABRIC_MANAGER_UNIT, FABRIC_MANAGER_UNIT),
        )
    else:
        report.passed("fabric_manager_missing", "%s: fabric manager %s installed%s" % (
            nvswitches, fm.get("version") or "", ", service %s" % service if service else ""))


def _check_fabric_manager_version(report, fm, method, compared, compared_label, nvswitches):
    """fabric_manager_version: the fabric manager at the driver's version."""
    if not fm.get("installed"):
        report.skip("fabric_manager_version", "no fabric manager installed")
        return
    fm_version = versions.try_parse_driver_version(fm.get("version"))
    if fm_version is None:
        report.skip("fabric_manager_version", "the fabric manager's version is unknown")
        return
    if compared is None:
        report.skip("fabric_manager_version", "no driver version to compare")
        return
    if versions.matches(compared, fm_version):
        report.passed("fabric_manager_version", "fabric manager %s matches %s" % (fm_version, compared_label))
        return
    message = "fabric manager %s does not match %s on a host with %s" % (fm_version, compared_label, nvswitches)
    if method == "preinstalled":
        report.problem(
            "fabric_manager_version",
            BLOCKING,
            message,
            "The fabric manager compares its version with the loaded driver's when it starts and exits when they "
            "differ; without it the NVSwitches stay unconfigured and CUDA fails on every GPU.",
            "Install the fabric manager of the driver's exact version (%s) and restart %s, or bring the driver to "
            "%s." % (compared, FABRIC_MANAGER_UNIT, fm_version),
        )
        return
    # driver_method package: the driver role moves the fabric manager packages it manages to
    # the driver's version in the same run, so an older one is the normal state before an
    # upgrade; only one it does not manage stays behind.
    report.problem(
        "fabric_manager_version",
        WARNING,
        message,
        "The driver role moves the fabric manager packages to the driver's version with the driver "
        "(nvidia_driver_fabric_manager auto or always); a fabric manager installed by other means, or one "
        "kept with nvidia_driver_fabric_manager never, stays at %s and exits at start with the new driver."
        % fm_version,
        "Keep nvidia_driver_fabric_manager at auto (the default), or remove a fabric manager that no "
        "package of the driver's repository installed.",
    )
