# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight's rules of the GPUs and CUDA: the flavour each GPU needs, the driver branches that
drive it, the CUDA releases the driver and the GPUs run, and the driver branches' end of life.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import gpu_table as table
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import lifecycle, versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_driver import (
    found_flavor,
    found_version,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_report import (
    BLOCKING,
    WARNING,
    _gpu_label,
    _gpus,
)

# driver_lifecycle: a branch past its end of life is a warning (warn) or blocking (fail).
LIFECYCLE_MODES = ("warn", "fail")


def _device_int(gpu):
    try:
        return int(gpu.get("device_id") or "", 16)
    except ValueError:
        return None


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
