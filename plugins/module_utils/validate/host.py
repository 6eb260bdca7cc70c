# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host validation: what NVIDIA's validator checks on a node, read only, in one pass.

:func:`validate_host` takes a :class:`~ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host.Host`, gathers fresh ``gpufleet_nvidia``
facts and checks, in order:

- ``gpus``: the node has the GPUs it is declared to have (``gpu_count``); a node without GPU
  and none declared has nothing to validate, and says so;
- ``driver``: ``nvidia-smi`` answers and sees every GPU of the PCI bus, and the loaded kernel
  module is the version nvidia-smi's libraries are (the "driver/library version mismatch");
- ``driver_version``: the loaded driver is the declared release or branch (drift otherwise);
- ``driver_installed``: the driver on disk is the loaded one (drift otherwise: a reboot is due);
- ``toolkit_version``: the NVIDIA Container Toolkit is the declared version;
- ``runtime``: the container runtime has a handler named ``nvidia`` running
  nvidia-container-runtime (containerd through ``containerd config dump``, so drop-ins count;
  k3s / RKE2 from their generated config; CRI-O from its config and drop-ins; Docker from
  ``daemon.json``);
- ``cdi``: where CDI is enabled (by the runtime's config, the toolkit's ``mode = "cdi"``, a spec
  on disk, or the caller) a spec of kind ``nvidia.com/gpu`` parses, names every GPU and was
  written for the loaded driver;
- ``cuda``: with ``nvcc`` on the node, a vector-add CUDA program built in a temporary folder runs
  on every GPU and prints ``Test PASSED``;
- ``kernel_next_boot``, ``driver_libraries``, ``nvml_reload``, ``runtime_drift``, ``isolation``:
  the day-2 checks of :mod:`validate.day2` (the next boot kernel's module, the loaded module
  against the libraries, NVML after ``systemctl daemon-reload``, the runtime files changed by
  someone else, the toolkit's isolation of unprivileged containers against the declared one).

The checks live beside this file, one subject each (:mod:`.driver`, :mod:`.runtime`, :mod:`.cdi`,
:mod:`.cuda`, on :class:`.checks.Checks`). Each ends in ``ok``, ``drift``, ``failed`` or ``skipped`` with a
message that says what was found and why; the node's status is the worst of them. Nothing on the node changes (the
CUDA test's folder is removed). Nothing here raises because of the node's state; only bad
arguments raise :class:`GpuFleetError`.
"""

from __future__ import annotations

import collections

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import facts as gpu_facts
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.driver import found_of
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate import day2 as day2_checks
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.cdi import CDI_DIRS, CDI_MODES, check_cdi
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import Checks, DRIFT, FAILED, OK, SKIPPED
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.cuda import check_cuda
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.driver import (
    check_driver,
    check_driver_version,
    check_gpus,
    check_prepared_driver,
    check_toolkit_version,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.runtime import check_runtime

SCHEMA = 1
RUNTIMES = ("containerd", "crio", "docker", "k3s", "rke2", "none")
DRIVER_METHODS = ("package", "preinstalled", "operator")
NO_GPU_MESSAGE = "no GPU: nothing to validate"
PREPARED_NO_GPU_MESSAGE = (
    "no GPU: the node was prepared without one (prepared_without_gpu); the driver cannot load and no "
    "CUDA work can run until it has a GPU, so only what is installed and configured was checked"
)


def check_params(params):
    """Raise GpuFleetError for arguments that cannot be right, before anything runs."""
    version = params.get("driver_version")
    if version:
        try:
            versions.parse_driver_version(version)
        except GpuFleetError as exc:
            raise GpuFleetError("driver_version: " + exc.msg, **exc.details)
    count = params.get("gpu_count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        raise GpuFleetError("gpu_count: %r is not a number of GPUs (expected 0 or more)" % (count,), value=count)
    for key, choices in (("container_runtime", RUNTIMES), ("driver_method", DRIVER_METHODS), ("cdi", CDI_MODES)):
        if params.get(key) not in choices:
            raise GpuFleetError(
                "%s: %r is not one of %s" % (key, params.get(key), ", ".join(choices)), value=params.get(key)
            )


# The options of gpufleet.nvidia.host_validate, also those of gpu_facts' ``validate`` (less
# what gpu_facts has of its own) and those its action plugin checks on the control host.
ARGUMENT_SPEC = dict(
    gpu_count=dict(type="int"),
    driver_version=dict(type="str", default=""),
    driver_method=dict(type="str", choices=list(DRIVER_METHODS), default="package"),
    toolkit_version=dict(type="str", default=""),
    container_runtime=dict(type="str", choices=list(RUNTIMES), default="containerd"),
    runtime_handler=dict(type="str", default="nvidia"),
    cdi=dict(type="str", choices=list(CDI_MODES), default="auto"),
    cdi_spec_dirs=dict(type="list", elements="path", default=list(CDI_DIRS)),
    cuda_test=dict(type="bool", default=True),
    nvml_reload_test=dict(type="bool", default=False),
    nvml_reload_test_image=dict(type="str", default=""),
    isolate_unprivileged=dict(type="bool"),
    prepared_without_gpu=dict(type="bool", default=False),
    nvcc_path=dict(type="path"),
    cuda_test_timeout=dict(type="int", default=180),
    command_timeout=dict(type="int", default=60),
    host_root=dict(type="path", default="/"),
    cluster_expect=dict(type="dict", default={}),
)
# Every option's default, for callers of validate_host() that give only some (from the spec).
DEFAULTS = dict(
    (k, v.get("default")) for k, v in ARGUMENT_SPEC.items() if k not in ("cuda_test_timeout", "command_timeout", "host_root")
)
# What gpu_facts takes under ``validate``: its own host_root and command_timeout serve both.
GPU_FACTS_SPEC = dict((k, v) for k, v in ARGUMENT_SPEC.items() if k not in ("host_root", "command_timeout"))


def merged_params(params):
    """``params`` over :data:`DEFAULTS` (an unset option takes its default; ``gpu_count`` may be None)."""
    merged = dict(DEFAULTS)
    merged.update(dict((k, v) for k, v in (params or {}).items() if v is not None or k == "gpu_count"))
    return merged


def runtime_summary(runtime):
    """What the result says of the runtime check."""
    return dict((k, runtime.get(k)) for k in ("name", "handler", "present", "source", "default_runtime"))


def validate_host(host, params=None, facts=None, cuda_runner=None):
    """Validate the node ``host``; returns ``(validation, facts)``."""
    p = merged_params(params)
    check_params(p)
    if facts is None:
        facts = gpu_facts.gather_facts(host)
    checks = Checks()
    result = _unchecked_result(p, facts)
    found = check_gpus(checks, facts, p["gpu_count"])
    if not found and not p["gpu_count"] and p["prepared_without_gpu"]:
        _check_prepared_node(checks, result, host, facts, p)
    elif not found and not p["gpu_count"]:
        checks.add("gpus", SKIPPED, NO_GPU_MESSAGE)
    else:
        _check_gpu_node(checks, result, host, facts, p, cuda_runner or host.run)
    _conclude(result, checks)
    return result, facts


def _unchecked_result(p, facts):
    """The validation before any check: what is declared, and what the facts say of the driver and toolkit."""
    smi = _dig(facts, "driver", "nvidia_smi") or {}
    return {
        "schema": SCHEMA,
        "status": SKIPPED,
        "summary": "",
        "gpu_count": facts.get("gpu_count") or 0,
        "declared": {
            "driver_version": p["driver_version"] or None,
            "driver_method": p["driver_method"],
            "toolkit_version": p["toolkit_version"] or None,
            "container_runtime": p["container_runtime"],
            "runtime_handler": p["runtime_handler"],
            "gpu_count": p["gpu_count"],
            "isolate_unprivileged": day2_checks.declared_isolation(p["isolate_unprivileged"], p["container_runtime"])[0],
        },
        "driver": {
            "loaded": _dig(facts, "driver", "version"),
            "installed": found_of(facts)["version"],
            "nvidia_smi": smi.get("driver_version"),
            "cuda": smi.get("cuda_version"),
        },
        "toolkit": {"installed": _dig(facts, "container", "toolkit", "version")},
        "runtime": {"name": p["container_runtime"], "handler": p["runtime_handler"], "present": None},
        "cdi": {"enabled": None, "why": [], "specs": []},
        "cuda": {"ran": False, "passed": None, "nvcc": None, "output": None},
        "checks": [],
        "failed": [],
        "drifted": [],
        "not_checked": [],
        "cluster_expect": dict(p["cluster_expect"] or {}),
    }


def _check_prepared_node(checks, result, host, facts, p):
    """A node without GPU that the host layers prepared: what is installed and configured."""
    checks.add("gpus", SKIPPED, PREPARED_NO_GPU_MESSAGE)
    check_prepared_driver(checks, facts, p["driver_version"], p["driver_method"])
    check_toolkit_version(checks, facts, p["toolkit_version"])
    runtime = check_runtime(checks, host, facts, p["container_runtime"], p["runtime_handler"])
    result["runtime"] = runtime_summary(runtime)
    day2_checks.check_prepared_day2(checks, host, facts, p)


def _check_gpu_node(checks, result, host, facts, p, cuda_runner):
    """A node with GPUs (or declared to have some): every check."""
    driver_ok = check_driver(checks, facts, p["driver_method"])
    check_driver_version(checks, facts, p["driver_version"], p["driver_method"])
    check_toolkit_version(checks, facts, p["toolkit_version"])
    runtime = check_runtime(checks, host, facts, p["container_runtime"], p["runtime_handler"])
    result["runtime"] = runtime_summary(runtime)
    result["cdi"] = check_cdi(checks, host, facts, p["cdi"], p["cdi_spec_dirs"], runtime)
    result["cuda"] = check_cuda(checks, host, p["cuda_test"], p["nvcc_path"], driver_ok, cuda_runner)
    day2_checks.check_day2(checks, host, facts, p)


def _conclude(result, checks):
    """The checks into the result: each check, the node's status, the messages by status, the summary."""
    result["checks"] = checks.items
    result["status"] = checks.status()
    result["failed"] = checks.messages(FAILED)
    result["drifted"] = checks.messages(DRIFT)
    result["not_checked"] = checks.messages(SKIPPED)
    result["summary"] = summary_line(result)


def check_options(params):
    """Raise GpuFleetError for validation options that cannot be right, before anything is read."""
    check_params(merged_params(params))
    timeout = params.get("cuda_test_timeout")
    if timeout is not None and timeout < 1:
        raise GpuFleetError(
            "cuda_test_timeout: %s is not a number of seconds (expected 1 or more)" % timeout,
            cuda_test_timeout=timeout,
        )


def validate_node(host, params, option_prefix=""):
    """Validate the node ``host`` (``Host.for_module``) with the module options ``params``: ``(validation, facts)``.

    A bad option fails before anything is read, named with ``option_prefix`` (gpu_facts passes
    ``validate.``, the name of the option that holds them).
    """
    try:
        check_options(params)
    except GpuFleetError as exc:
        raise GpuFleetError(option_prefix + exc.msg, **exc.details)
    timeout = params.get("cuda_test_timeout") or ARGUMENT_SPEC["cuda_test_timeout"]["default"]
    return validate_host(host, params, cuda_runner=common_host.subprocess_runner(host.root, timeout))


def summary_line(result):
    if result["status"] == SKIPPED:
        return (result["not_checked"] or [NO_GPU_MESSAGE])[0]
    counts = collections.Counter(check["status"] for check in result["checks"])
    text = "%s: %d ok, %d drifted, %d failed, %d not checked" % (
        result["status"], counts[OK], counts[DRIFT], counts[FAILED], counts[SKIPPED])
    first = (result["failed"] or result["drifted"] or [None])[0]
    return text + (" - " + first if first else "")
