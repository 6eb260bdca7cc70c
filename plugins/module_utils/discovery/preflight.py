# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight: what would stop the declared NVIDIA stack from working on a host, all at once.

:func:`evaluate` compares a desired state (driver version or branch, flavour, install method,
CUDA versions, container runtime) with a host's ``gpufleet_nvidia`` facts and returns every
problem, each with its rule id, severity (``blocking`` or ``warning``), message, reason and fix,
plus each rule's outcome. :func:`enforce` raises GpuFleetError when blocking problems remain
after the user's waivers. Nothing here touches the host.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import gpu_table as table
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import day2, security_floor
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.driver import found_of
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import lifecycle, systems, versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

BLOCKING = "blocking"
WARNING = "warning"

# Rule id -> what it checks. The order is the order of ``checks`` and of the problems.
RULES = (
    ("driver_version_format", "driver_version is a driver release or branch"),
    ("cuda_version_format", "every entry of cuda_versions is a CUDA release"),
    ("os_supported", "the OS release supports the driver install method"),
    ("driver_missing", "driver_method preinstalled finds a working driver"),
    ("driver_not_package_owned", "driver_method package finds no driver installed by other means"),
    ("driver_drift", "the pre-installed driver is the declared version and flavour"),
    ("operator_driver", "the GPU Operator's driver container does not serve a node prepared on the host"),
    ("gpu_open_modules", "the driver flavour can drive every GPU"),
    ("gpu_driver_branch", "the driver branch supports every GPU"),
    ("cuda_driver", "the driver runs every CUDA release asked for"),
    ("gpu_cuda", "every GPU runs the CUDA releases asked for"),
    ("driver_lifecycle", "the declared and the pre-installed driver branches are before their end of life"),
    ("nouveau", "nouveau does not hold the GPUs"),
    ("secure_boot", "Secure Boot lets the driver's kernel modules load"),
    ("kernel_headers", "kernel headers are there for DKMS to build the modules"),
    ("containerd_cri", "containerd's CRI plugin is enabled"),
    ("container_runtime", "the container runtime asked for is installed"),
    ("fabric_manager_missing", "a host with NVSwitches gets the fabric manager, and it runs"),
    ("fabric_manager_version", "the fabric manager is at the driver's version on a host with NVSwitches"),
)
RULES = RULES + security_floor.PREFLIGHT_RULES + day2.PREFLIGHT_RULES
RULE_IDS = tuple(rule[0] for rule in RULES)

# Rules about the GPUs themselves, skipped on a host without one.
NO_GPU_SKIPPED = ("gpu_open_modules", "gpu_driver_branch", "gpu_cuda", "nouveau")
FABRIC_MANAGER_RULES = ("fabric_manager_missing", "fabric_manager_version")
FABRIC_MANAGER_UNIT = "nvidia-fabricmanager"

FACT_KEYS = ("gpus", "driver", "container", "os", "kernel", "secure_boot")

# driver_lifecycle: a branch past its end of life is a warning (warn) or blocking (fail).
LIFECYCLE_MODES = ("warn", "fail")


class Report(object):
    def __init__(self, waive):
        self.waive = set(waive or ())
        self.problems = []
        self.checks = dict((rule, {"outcome": "pass", "detail": ""}) for rule in RULE_IDS)

    def problem(self, rule, severity, message, reason, fix):
        waived = rule in self.waive
        self.problems.append(
            {
                "rule": rule,
                "severity": severity,
                "message": message,
                "reason": reason,
                "fix": fix,
                "waived": waived,
            }
        )
        # A rule's outcome is its worst problem; its detail that problem's message.
        check = self.checks[rule]
        outcome = "waived" if waived else severity
        order = ("pass", "skipped", "waived", WARNING, BLOCKING)
        if order.index(outcome) > order.index(check["outcome"]):
            check["outcome"] = outcome
            check["detail"] = message

    def skip(self, rule, detail):
        if self.checks[rule]["outcome"] == "pass":
            self.checks[rule] = {"outcome": "skipped", "detail": detail}

    def passed(self, rule, detail):
        if self.checks[rule]["outcome"] == "pass":
            self.checks[rule]["detail"] = detail


def _gpus(count):
    return "%d GPU%s" % (count, "" if count == 1 else "s")


def _gpu_label(gpu):
    name = gpu.get("name") or "device %s" % (gpu.get("device_id") or "unknown")
    return "%s at %s" % (name, gpu.get("bus_id"))


def _device_int(gpu):
    try:
        return int(gpu.get("device_id") or "", 16)
    except ValueError:
        return None


def found_version(facts):
    """The version (a DriverVersion) of the driver that discovery found (``driver.found``), or None."""
    return versions.try_parse_driver_version(found_of(facts)["version"])


def found_flavor(facts):
    """The flavour of the driver that discovery found (``driver.found``), or None."""
    return found_of(facts)["flavor"]


def _needs_open(gpu):
    dev = _device_int(gpu)
    if dev in table.OPEN_MODULES_REQUIRED_DEVICES:
        return table.OPEN_MODULES_REQUIRED_DEVICES[dev]
    if gpu.get("architecture") in table.OPEN_MODULES_REQUIRED_ARCHITECTURES:
        return gpu["architecture"]
    return None


def _pre_turing(gpu):
    rank = table.architecture_rank(gpu.get("architecture"))
    return rank is not None and rank < table.architecture_rank(table.OPEN_MODULES_MIN_ARCHITECTURE)


def _check_format(report, driver_version, cuda_versions):
    declared = None
    if driver_version in (None, ""):
        report.skip("driver_version_format", "no driver_version given")
    else:
        try:
            declared = versions.parse_driver_version(driver_version)
            report.passed(
                "driver_version_format", "%s is a %s" % (declared, "branch" if declared.is_branch else "release")
            )
        except GpuFleetError as exc:
            report.problem(
                "driver_version_format",
                BLOCKING,
                "driver_version: %s" % exc.msg,
                "Nothing about the driver can be checked or installed without a valid version.",
                "Set driver_version to a branch (580) or a release (580.95.05).",
            )
    cudas = []
    for value in cuda_versions or ():
        try:
            versions.parse_cuda_version(value)
            cudas.append(str(value).strip())
        except GpuFleetError as exc:
            report.problem(
                "cuda_version_format",
                BLOCKING,
                "cuda_versions: %s" % exc.msg,
                "The driver's CUDA support cannot be checked against a malformed CUDA version.",
                "Write each CUDA version as major.minor or major.minor.update (12.4, 12.4.1, 13.0).",
            )
    if not cuda_versions:
        report.skip("cuda_version_format", "no cuda_versions given")
    else:
        report.passed("cuda_version_format", "well-formed: %s" % ", ".join(cudas))
    return declared, cudas


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


def _resolve_flavor(report, gpus, method, declared_flavor, facts, declared=None):
    """The flavour the checks use, and whether GPUs disagree on it.

    ``auto`` is what the driver role installs: the open modules where a GPU needs them, the
    proprietary ones where a GPU is older than Turing, else NVIDIA's default for the declared
    branch (open from R560, proprietary before).
    """
    if method == "preinstalled":
        return found_flavor(facts)
    if declared_flavor in ("open", "proprietary"):
        return declared_flavor
    needs_prop = [g for g in gpus if _pre_turing(g)]
    needs_open = [g for g in gpus if _needs_open(g)]
    if needs_prop and needs_open:
        report.problem(
            "gpu_open_modules",
            BLOCKING,
            "no driver flavour drives every GPU: %s needs the proprietary modules, %s needs the open modules"
            % (_gpu_label(needs_prop[0]), _gpu_label(needs_open[0])),
            "One host loads one flavour of the nvidia kernel module.",
            "Move the GPUs so that a host has either pre-Turing or Blackwell/Grace Hopper GPUs, not both.",
        )
        return None
    if needs_open:
        return "open"
    if needs_prop or (declared is not None and declared.branch < table.OPEN_DEFAULT_BRANCH):
        return "proprietary"
    return "open"


def _check_gpus(report, gpus, flavor, compared, compared_label):
    """gpu_open_modules and gpu_driver_branch: the flavour and the driver against every GPU."""
    _check_open_modules(report, gpus, flavor)
    _check_driver_branch(report, gpus, compared, compared_label)


def _check_open_modules(report, gpus, flavor):
    if flavor is None:
        report.skip("gpu_open_modules", "driver flavour unknown")
        return
    bad = False
    for gpu in gpus:
        bad = _check_gpu_flavor(report, gpu, flavor) or bad
    if not bad:
        report.passed("gpu_open_modules", "%s modules drive the %s" % (flavor, _gpus(len(gpus))))


def _check_gpu_flavor(report, gpu, flavor):
    """Whether the driver flavour cannot drive ``gpu`` (a problem reported)."""
    needs = _needs_open(gpu)
    if flavor == "open" and _pre_turing(gpu):
        report.problem(
            "gpu_open_modules",
            BLOCKING,
            "the %s GPU %s cannot be driven by the open kernel modules" % (gpu["architecture"], _gpu_label(gpu)),
            "The open kernel modules need the GPU System Processor, which Turing introduced; "
            "Maxwell, Pascal and Volta GPUs need the proprietary modules.",
            "Set driver_flavor: proprietary (or auto).",
        )
        return True
    if flavor == "proprietary" and needs:
        report.problem(
            "gpu_open_modules",
            BLOCKING,
            "the %s GPU %s needs the open kernel modules, not the proprietary ones" % (needs, _gpu_label(gpu)),
            "NVIDIA supports Blackwell and Grace Hopper only with the open kernel modules.",
            "Set driver_flavor: open (or auto).",
        )
        return True
    return False


def _check_driver_branch(report, gpus, compared, compared_label):
    if compared is None:
        report.skip("gpu_driver_branch", "no driver version to compare")
        return
    seen = set()
    bad = False
    for gpu in gpus:
        model = (gpu.get("architecture"), _device_int(gpu))
        if model not in seen:
            seen.add(model)
            bad = _check_gpu_branch(report, gpu, compared, compared_label) or bad
    if not bad:
        report.passed("gpu_driver_branch", "%s supports the %s" % (compared_label, _gpus(len(gpus))))


def _check_gpu_branch(report, gpu, compared, compared_label):
    """Whether the driver ``compared`` is too new or too old for ``gpu`` (the problems reported)."""
    arch = gpu.get("architecture")
    if not arch:
        report.problem(
            "gpu_driver_branch",
            WARNING,
            "the GPU %s has an unknown architecture: its driver support was not checked" % _gpu_label(gpu),
            "Neither pci.ids, the collection's table nor nvidia-smi named its architecture.",
            "Install pci.ids (pciutils / hwdata) or check NVIDIA's supported-GPU list for this driver by hand.",
        )
        return False
    too_new = _check_newest_branch(report, gpu, arch, compared, compared_label)
    too_old = _check_oldest_driver(report, gpu, arch, compared, compared_label)
    return too_new or too_old


def _check_newest_branch(report, gpu, arch, compared, compared_label):
    newest = table.ARCHITECTURE_MAX_BRANCH.get(arch)
    if newest is None or compared.branch <= newest:
        return False
    report.problem(
        "gpu_driver_branch",
        BLOCKING,
        "the %s GPU %s is not supported by drivers after R%d; %s is R%d"
        % (arch, _gpu_label(gpu), newest, compared_label, compared.branch),
        "NVIDIA's R%d is the last driver branch for %s GPUs: R590 and newer do not drive them." % (newest, arch),
        "Set driver_version to %d (%s), or move the workloads to Turing or newer GPUs."
        % (newest, lifecycle.judge(newest, None)["text"]),
    )
    return True


def _driver_minimums(arch, dev):
    """``[(oldest driver, what needs it)]`` of a GPU: its architecture's, its product's."""
    minimums = []
    if arch in table.ARCHITECTURE_MIN_DRIVER:
        minimums.append((table.ARCHITECTURE_MIN_DRIVER[arch], "%s GPUs" % arch))
    if dev in table.DEVICE_MIN_DRIVER:
        minimums.append(table.DEVICE_MIN_DRIVER[dev])
    return minimums


def _check_oldest_driver(report, gpu, arch, compared, compared_label):
    unmet = [m for m in _driver_minimums(arch, _device_int(gpu)) if not versions.satisfies(compared, m[0])]
    if not unmet:
        return False
    # only the strictest of the GPU's minimums
    minimum, what = max(unmet, key=lambda m: versions.parse_driver_version(m[0]).key())
    report.problem(
        "gpu_driver_branch",
        BLOCKING,
        "the GPU %s needs driver %s or newer; %s is older" % (_gpu_label(gpu), minimum, compared_label),
        "%s are not supported by older drivers." % what,
        "Set driver_version to %s or a newer branch." % versions.parse_driver_version(minimum).branch,
    )
    return True


def _check_cuda(report, cudas, compared, compared_label):
    if not cudas:
        report.skip("cuda_driver", "no cuda_versions given")
        return
    if compared is None:
        report.skip("cuda_driver", "no driver version to compare")
        return
    notes = []
    for cuda in cudas:
        result = versions.check_cuda(compared, cuda)
        minimum = result["minimum"]
        family = result["family_minimum"]
        if result["outcome"] == "ok":
            notes.append("CUDA %s needs %s" % (cuda, minimum))
        elif result["outcome"] == "too_old":
            report.problem(
                "cuda_driver",
                BLOCKING,
                "CUDA %s needs driver %s or newer (at least %s for any CUDA %d.x); %s is older"
                % (cuda, minimum or family, family, result["release"][0], compared_label),
                "Below the CUDA major's family minimum even minor-version compatibility does not apply: "
                "CUDA %s applications fail to initialise." % cuda,
                "Set driver_version to %s or newer." % versions.parse_driver_version(minimum or family).branch,
            )
        elif result["outcome"] == "minor_version_compat":
            report.problem(
                "cuda_driver",
                WARNING,
                "CUDA %s asks for driver %s; %s is older and runs it only through minor-version compatibility"
                % (cuda, minimum, compared_label),
                "Minor-version compatibility runs applications built with a newer CUDA %d.x, but not those "
                "that need PTX JIT compilation or features of the newer driver." % result["release"][0],
                "Set driver_version to %s or newer for full support." % minimum,
            )
        else:
            report.problem(
                "cuda_driver",
                WARNING,
                "CUDA %s is not in the collection's CUDA-to-driver table: its minimum driver was not checked" % cuda,
                "The table lists CUDA releases up to 13.2 Update 2.",
                "Check the CUDA release notes for its minimum driver.",
            )
    report.passed("cuda_driver", "; ".join(notes))


def _check_gpu_cuda(report, gpus, cudas):
    """gpu_cuda: CUDA 13 and newer dropped Maxwell, Pascal and Volta (gpu_table.ARCHITECTURE_MAX_CUDA_MAJOR)."""
    if not cudas:
        report.skip("gpu_cuda", "no cuda_versions given")
        return
    bad = False
    for cuda in cudas:
        major = versions.parse_cuda_version(cuda)[0]
        for arch in sorted(set(g.get("architecture") for g in gpus if g.get("architecture"))):
            newest = table.ARCHITECTURE_MAX_CUDA_MAJOR.get(arch)
            if newest is None or major <= newest:
                continue
            gpu = next(g for g in gpus if g.get("architecture") == arch)
            report.problem(
                "gpu_cuda",
                BLOCKING,
                "CUDA %s does not support the %s GPU %s: CUDA %d.x is the last toolkit for %s GPUs"
                % (cuda, arch, _gpu_label(gpu), newest, arch),
                "CUDA %d.0 dropped Maxwell, Pascal and Volta: its compiler builds no code for them and its "
                "runtime does not run on them." % (newest + 1),
                "Build this node's workloads with CUDA %d.x, or run CUDA %s on Turing or newer GPUs." % (newest, cuda),
            )
            bad = True
    if not bad:
        report.passed("gpu_cuda", "the %s run CUDA %s" % (_gpus(len(gpus)), ", ".join(cudas)))


def _lifecycle_subjects(facts, method, declared):
    """``[(of, version, label)]`` whose branches driver_lifecycle judges, one per branch.

    The declared driver always; the installed one where it is what the node keeps
    (driver_method preinstalled): the package method replaces it, the operator brings its own.
    """
    subjects = []
    installed = found_version(facts) if method == "preinstalled" else None
    if installed is not None:
        subjects.append(("installed", installed, "the installed driver %s" % installed))
    if declared is not None and not any(v.branch == declared.branch for dummy, v, dummy2 in subjects):
        subjects.append(("declared", declared, "driver_version %s" % declared))
    return subjects


def _lifecycle_inputs(mode, today):
    """The date driver_lifecycle judges on (None: not judged); GpuFleetError for a bad mode or date."""
    if mode not in LIFECYCLE_MODES:
        raise GpuFleetError("driver_lifecycle: '%s' is not a mode (expected %s)" % (mode, " or ".join(LIFECYCLE_MODES)),
                            value=mode, expected=list(LIFECYCLE_MODES))
    return lifecycle.parse_today(today) if today not in (None, "") else None


def _check_lifecycle(report, facts, method, declared, today, mode, gpus):
    """driver_lifecycle: each branch's type and end of life (common/lifecycle.py) on ``today``; the judged entries."""
    subjects = _lifecycle_subjects(facts, method, declared)
    if today is None or not subjects:
        report.skip("driver_lifecycle", "no date to compare end of life with" if subjects else "no driver version to judge")
        return [dict(lifecycle.judge(v.branch, None), of=of, version=str(v)) for of, v, dummy in subjects]
    # the branches offered are those every GPU of the node takes (Pascal: R580 at most)
    caps = [table.ARCHITECTURE_MAX_BRANCH[g["architecture"]] for g in gpus if g.get("architecture") in table.ARCHITECTURE_MAX_BRANCH]
    supported = ", ".join(lifecycle.supported_branches(today, min(caps) if caps else None)) or "none in the table"
    judged = []
    for of, version, label in subjects:
        entry = dict(lifecycle.judge(version.branch, today), of=of, version=str(version))
        judged.append(entry)
        _lifecycle_problem(report, entry, label, mode, supported)
    report.passed("driver_lifecycle", "; ".join(e["text"] for e in judged))
    return judged


def _lifecycle_problem(report, entry, label, mode, supported):
    """The problem of one judged branch: past its end of life, or not in the table."""
    if entry["state"] == "past":
        report.problem(
            "driver_lifecycle",
            BLOCKING if mode == "fail" else WARNING,
            "%s is on a branch past its end of life: %s" % (label, entry["text"]),
            "NVIDIA publishes no more security or bug fixes for a driver branch after its end of life "
            "(lifecycle table read %s)." % lifecycle.READ_ON,
            "Move the node to a supported branch for its GPUs: %s. Where the OS's own repository has none, take "
            "the driver from NVIDIA's repository, or keep this one and waive driver_lifecycle." % supported,
        )
    elif entry["state"] == "unknown":
        report.problem(
            "driver_lifecycle",
            WARNING,
            "%s: %s" % (label, entry["text"]),
            "The table holds the branches of NVIDIA's data-center driver pages (R535 to R620); nothing is "
            "guessed about the others.",
            "Check the branch on NVIDIA's data-center driver lifecycle page, or move to a supported branch: %s."
            % supported,
        )


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


def _check_facts(facts):
    if not isinstance(facts, dict):
        raise GpuFleetError("facts: expected a gpufleet_nvidia facts dict, got %s" % type(facts).__name__)
    missing = [key for key in FACT_KEYS if key not in facts]
    if missing:
        raise GpuFleetError(
            "facts: not a gpufleet_nvidia facts dict (missing %s); pass the gpufleet_nvidia fact "
            "of gpufleet.nvidia.gpu_facts" % ", ".join(missing),
            missing=missing,
        )


def evaluate(
    facts,
    driver_version=None,
    driver_flavor="auto",
    driver_method="package",
    cuda_versions=None,
    container_runtime="containerd",
    waive=None,
    driver_lifecycle="warn",
    today=None,
    security_floors="warn",
    kubernetes_version=None,
    toolkit_version=None,
):
    """Every problem of the desired state on the host that ``facts`` describes.

    ``today`` (a date or ``YYYY-MM-DD``) is what the driver branches' end of life is compared
    with; without it the driver_lifecycle rule is skipped (security_floor counts every bulletin
    then, and judges no runtime line's end of life). ``kubernetes_version`` is the cluster's, for
    the Kubernetes / containerd pairing; ``toolkit_version`` the Container Toolkit to install. Returns ``{'ok', 'msg', 'gpu_count', 'problems', 'checks',
    'blocking_count', 'warning_count', 'resolved', 'lifecycle', 'security'}``; ``ok`` is False
    while a blocking problem is not waived.
    """
    _check_facts(facts)
    _check_waive(waive)
    security_floor.check_mode(security_floors)
    today = _lifecycle_inputs(driver_lifecycle, today)
    report = Report(waive)
    declared, cudas = _check_format(report, driver_version, cuda_versions)
    gpus = facts.get("gpus") or []
    # Without a GPU the rules about GPUs have nothing to look at; the desired state itself (OS
    # and method, the driver it declares or finds, CUDA, the runtime) is still checked, since a
    # caller that runs preflight on such a node asks whether that state could work there.
    _check_os(report, facts, driver_method)
    _check_driver_presence(report, facts, driver_method, declared, driver_flavor)
    flavor = _resolve_flavor(report, gpus, driver_method, driver_flavor, facts, declared)
    compared, label, source = _compared_driver(facts, driver_method, declared)
    resolved = {
        "driver_method": driver_method,
        "driver_flavor": flavor,
        "driver_version": str(compared) if compared else None,
        "driver_version_source": source,
    }
    _check_gpu_rules(report, facts, gpus, driver_method, flavor, compared, label, cudas)
    _check_cuda(report, cudas, compared, label)
    judged = _check_lifecycle(report, facts, driver_method, declared, today, driver_lifecycle, gpus)
    floors = security_floor.check_preflight(report, _lifecycle_subjects(facts, driver_method, declared), facts,
                                            {"toolkit": toolkit_version, "kubernetes": kubernetes_version}, today,
                                            security_floors)
    _check_secure_boot(report, facts, driver_method)
    _check_headers(report, facts, driver_method)
    _check_runtime(report, facts, container_runtime)
    _check_fabric_manager(report, facts, driver_method, compared, label)
    day2.check_preflight(report, facts)
    return dict(_result(report, len(gpus), resolved), lifecycle=judged, security=floors)


def _check_waive(waive):
    """Raise GpuFleetError for a waived rule that is not one."""
    unknown = [rule for rule in waive or () if rule not in RULE_IDS]
    if unknown:
        raise GpuFleetError(
            "waive: unknown rule %s (expected some of %s)"
            % (", ".join("'%s'" % r for r in unknown), ", ".join(RULE_IDS)),
            unknown=unknown,
        )


def _compared_driver(facts, method, declared):
    """``(version, label, source)`` of the driver that the GPU, CUDA and fabric manager rules judge."""
    installed = found_version(facts)
    if method == "preinstalled" and installed:
        return installed, "the installed driver %s" % installed, "installed"
    # package method, or a pre-installed driver that is not there (driver_missing says so):
    # what was declared is what the workloads would get.
    return declared, "driver_version %s" % declared, "declared" if declared else None


def _check_gpu_rules(report, facts, gpus, method, flavor, compared, label, cudas):
    """gpu_open_modules, gpu_driver_branch, gpu_cuda and nouveau; skipped on a host without GPU."""
    if not gpus:
        for rule in NO_GPU_SKIPPED:
            report.skip(rule, "no NVIDIA GPU on this host")
        return
    _check_gpus(report, gpus, flavor, compared, label)
    _check_gpu_cuda(report, gpus, cudas)
    _check_nouveau(report, facts, method)


def _result(report, gpu_count, resolved):
    blocking = [p for p in report.problems if p["severity"] == BLOCKING and not p["waived"]]
    warnings = [p for p in report.problems if p["severity"] == WARNING and not p["waived"]]
    waived = [p for p in report.problems if p["waived"]]
    counts = "%d blocking, %d warning%s, %d waived" % (
        len(blocking),
        len(warnings),
        "" if len(warnings) == 1 else "s",
        len(waived),
    )
    if gpu_count:
        msg = "%d GPU%s: %s" % (gpu_count, "" if gpu_count == 1 else "s", counts)
    else:
        msg = "no NVIDIA GPU on this host, desired state checked: %s" % counts
    return {
        "ok": not blocking,
        "msg": msg,
        "gpu_count": gpu_count,
        "problems": report.problems,
        "checks": report.checks,
        "blocking_count": len(blocking),
        "warning_count": len(warnings),
        "resolved": resolved,
    }


# The module's options, shared by the module (run on the node when it must gather the facts
# itself) and its action plugin (which evaluates facts it is given on the control host).
ARGUMENT_SPEC = dict(
    driver_version=dict(type="str"),
    driver_flavor=dict(type="str", choices=["open", "proprietary", "auto"], default="auto"),
    driver_method=dict(type="str", choices=["package", "preinstalled", "operator"], default="package"),
    cuda_versions=dict(type="list", elements="str", default=[]),
    container_runtime=dict(type="str", choices=["containerd", "crio", "docker", "k3s", "rke2", "none"], default="containerd"),
    waive=dict(type="list", elements="str", choices=list(RULE_IDS), default=[]),
    driver_lifecycle=dict(type="str", choices=list(LIFECYCLE_MODES), default="warn"),
    security_floors=dict(type="str", choices=list(security_floor.MODES), default="warn"),
    kubernetes_version=dict(type="str"),
    toolkit_version=dict(type="str"),
    today=dict(type="str"),
    facts=dict(type="dict"),
    host_root=dict(type="path", default="/"),
)
REQUIRED_IF = [("driver_method", "package", ["driver_version"])]


def run(facts, params, today):
    """Evaluate and enforce: the module's result, or GpuFleetError naming the blocking problems.

    ``today`` is the date of the machine that runs the check (the caller reads its clock);
    ``params['today']``, when set, replaces it.
    """
    result = evaluate(
        facts,
        driver_version=params["driver_version"],
        driver_flavor=params["driver_flavor"],
        driver_method=params["driver_method"],
        cuda_versions=params["cuda_versions"],
        container_runtime=params["container_runtime"],
        waive=params["waive"],
        driver_lifecycle=params["driver_lifecycle"],
        today=params.get("today") or today,
        security_floors=params.get("security_floors") or "warn",
        kubernetes_version=params.get("kubernetes_version"),
        toolkit_version=params.get("toolkit_version"),
    )
    return enforce(result)


def warning_lines(result):
    """The warnings not waived, one line each, for Ansible's warnings of the task."""
    return ["preflight [%s]: %s. %s" % (p["rule"], p["message"], p["fix"])
            for p in result["problems"] if p["severity"] == WARNING and not p["waived"]]


def enforce(result):
    """Raise GpuFleetError naming every blocking problem that is not waived."""
    blocking = [p for p in result["problems"] if p["severity"] == BLOCKING and not p["waived"]]
    if not blocking:
        return result
    lines = "; ".join("[%s] %s%s" % (p["rule"], p["message"], " (fix: %s)" % p["fix"] if p.get("fix") else "") for p in blocking)
    waiver = "waive: [%s] (the discover role's discover_waive)" % ", ".join(p["rule"] for p in blocking)
    raise GpuFleetError(
        "preflight: %d blocking problem%s: %s. To accept %s on purpose instead: %s"
        % (len(blocking), "" if len(blocking) == 1 else "s", lines, "it" if len(blocking) == 1 else "them", waiver),
        **dict((k, v) for k, v in result.items() if k != "msg"),
    )
