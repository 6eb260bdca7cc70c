# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What preflight reports: its rules (:data:`RULES`, with those of the security floors and of
day 2), each rule's outcome and every problem with its severity, message, reason and fix
(:class:`Report`).
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import day2, security_floor

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
