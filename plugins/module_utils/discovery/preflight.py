# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight: what would stop the declared NVIDIA stack from working on a host, all at once.

:func:`evaluate` compares a desired state (driver version or branch, flavour, install method,
CUDA versions, container runtime) with a host's ``gpufleet_nvidia`` facts and returns every
problem, each with its rule id, severity (``blocking`` or ``warning``), message, reason and fix,
plus each rule's outcome. :func:`enforce` raises GpuFleetError when blocking problems remain
after the user's waivers. Nothing here touches the host. The rules live beside it, one file a
subject: the driver (:mod:`.preflight_driver`), the GPUs and CUDA (:mod:`.preflight_gpus`), the
host under them (:mod:`.preflight_host`), on :class:`.preflight_report.Report`.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import day2, security_floor
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_driver import (
    _check_driver_presence,
    _check_fabric_manager,
    _check_os,
    found_version,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_gpus import (
    LIFECYCLE_MODES,
    _check_cuda,
    _check_gpu_cuda,
    _check_gpus,
    _check_lifecycle,
    _lifecycle_inputs,
    _lifecycle_subjects,
    _resolve_flavor,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_host import (
    _check_headers,
    _check_nouveau,
    _check_runtime,
    _check_secure_boot,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_report import (
    BLOCKING,
    NO_GPU_SKIPPED,
    RULE_IDS,
    Report,
    WARNING,
)

FACT_KEYS = ("gpus", "driver", "container", "os", "kernel", "secure_boot")


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
