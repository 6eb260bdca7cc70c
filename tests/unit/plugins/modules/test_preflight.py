"""Tests of the gpufleet.nvidia.preflight module."""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.modules import preflight
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.discovery.captures import (
    CaptureHost,
    fixture_facts,
)
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.utils import AnsibleFailJson, run_module

from ansible.module_utils import basic

# The date the driver branches' end of life is compared with, fixed so that the tests do not
# follow the clock (the module's default is the node's date).
TODAY = "2026-12-01"


def without_fixes(msg, problems):
    """A blocking message as it read before each problem's fix and the waiver were added to it."""
    for problem in problems:
        msg = msg.replace(" (fix: %s)" % problem["fix"], "")
    return msg.split(". To accept ")[0]


@pytest.mark.parametrize("check_mode", [False, True])
def test_h200_passes_with_its_preinstalled_driver(check_mode):
    result = run_module(
        preflight,
        {
            "driver_version": "580",
            "driver_method": "preinstalled",
            "cuda_versions": ["12.4", "13.0"],
            "container_runtime": "none",
            "facts": fixture_facts("ubuntu2404-h200-preinstalled"),
        },
        check_mode=check_mode,
    )
    assert result["changed"] is False
    assert result["ok"] is True
    # 580.159.04 is below the floor of NVIDIA's September 2026 driver bulletin (5861)
    assert [p["rule"] for p in result["problems"]] == ["security_floor"]
    assert result["msg"] == "1 GPU: 0 blocking, 1 warning, 0 waived"
    assert result["resolved"]["driver_version"] == "580.159.04"
    assert result["checks"]["gpu_driver_branch"] == {
        "outcome": "pass",
        "detail": "the installed driver 580.159.04 supports the 1 GPU",
    }


def test_blocking_problems_fail_with_all_of_them():
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(
            preflight,
            {
                "driver_version": "570",
                "cuda_versions": ["13.0"],
                "container_runtime": "none",
                "today": TODAY,
                "facts": fixture_facts("ubuntu2404-h200-preinstalled"),
            },
        )
    result = exc.value.result
    assert without_fixes(result["msg"], result["problems"]) == (
        "preflight: 2 blocking problems: "
        "[driver_not_package_owned] a driver that no package installed is present (nvidia-smi at "
        "/usr/local/nvidia/bin/nvidia-smi, kernel module 580.159.04 loaded) and driver_method is package; "
        "[cuda_driver] CUDA 13.0 needs driver 580.65.06 or newer (at least 580 for any CUDA 13.x); "
        "driver_version 570 is older"
    )
    assert result["blocking_count"] == 2
    # R570's end of life (February 2026) passed: a warning, which does not add to the failure
    assert [p["rule"] for p in result["problems"]] == ["driver_not_package_owned", "cuda_driver", "driver_lifecycle"]
    assert result["checks"]["cuda_driver"]["outcome"] == "blocking"
    # Ansible reads `warnings` and `deprecations` in a result as lists of messages; a count
    # there made ansible-core 2.19 fail the task with "Event.msg must be <class 'str'>".
    assert "warnings" not in result and "deprecations" not in result
    assert result["warning_count"] == 1


def test_waived_problems_do_not_fail():
    result = run_module(
        preflight,
        {
            "driver_version": "570",
            "container_runtime": "rke2",
            "waive": ["kernel_headers"],
            "today": "2026-01-15",  # before R570's end of life
            "facts": fixture_facts("rocky9-h100x8-rpm-rke2"),
        },
    )
    assert result["ok"] is True
    assert [(p["rule"], p["waived"]) for p in result["problems"]] == [("kernel_headers", True)]


def test_malformed_driver_version_fails_with_the_format_message():
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(preflight, {"driver_version": "5x5", "facts": fixture_facts("debian12-l40s-x2-package")})
    assert without_fixes(exc.value.result["msg"], exc.value.result["problems"]).startswith(
        "preflight: 2 blocking problems: [driver_version_format] driver_version: version '5x5' is not a "
        "driver version (expected e.g. 580 or 580.95.05); "
    )


def test_package_method_requires_driver_version():
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(preflight, {"facts": fixture_facts("debian12-nogpu")})
    assert exc.value.result["msg"] == "driver_method is package but all of the following are missing: driver_version"


def test_unknown_waiver_is_refused_by_the_argument_spec():
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(
            preflight, {"driver_method": "preinstalled", "waive": ["nope"], "facts": fixture_facts("debian12-nogpu")}
        )
    assert "waive" in exc.value.result["msg"] and "nope" in exc.value.result["msg"]


def test_not_a_facts_dict_fails_cleanly():
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(preflight, {"driver_version": "580", "facts": {"gpus": []}})
    assert exc.value.result["msg"] == (
        "facts: not a gpufleet_nvidia facts dict (missing driver, container, os, kernel, secure_boot); "
        "pass the gpufleet_nvidia fact of gpufleet.nvidia.gpu_facts"
    )
    assert exc.value.result["missing"] == ["driver", "container", "os", "kernel", "secure_boot"]


def test_gathers_the_facts_itself_without_facts(monkeypatch):
    seen = {}

    def for_module(cls, module, root="/", timeout=None):
        seen["root"] = root
        return CaptureHost("debian12-nogpu")

    monkeypatch.setattr(common_host.Host, "for_module", classmethod(for_module))
    result = run_module(preflight, {"driver_version": "580", "host_root": "/host", "waive": ["kernel_headers", "security_floor"]})
    assert seen["root"] == "/host"
    assert result["msg"] == "no NVIDIA GPU on this host, desired state checked: 0 blocking, 0 warnings, 2 waived"
    assert result["gpu_count"] == 0


def test_fabric_manager_of_another_version_fails_a_preinstalled_hgx_node():
    facts = fixture_facts("rocky9-h100x8-rpm-rke2")
    facts["fabric_manager"]["version"] = "570.133.20"
    args = {"driver_version": "570", "driver_method": "preinstalled", "container_runtime": "rke2", "facts": facts}
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(preflight, args)
    assert without_fixes(exc.value.result["msg"], exc.value.result["problems"]) == (
        "preflight: 1 blocking problem: [fabric_manager_version] fabric manager 570.133.20 does not match the "
        "installed driver 570.172.08 on a host with 4 NVSwitches"
    )
    assert exc.value.result["blocking_count"] == 1
    # the new rule ids are waivable through the module's argument spec
    result = run_module(preflight, dict(args, waive=["fabric_manager_version"]))
    assert result["ok"] is True
    assert result["checks"]["fabric_manager_version"]["outcome"] == "waived"
    assert "warnings" not in result


# --- driver_lifecycle: the date is an input; the warnings reach Ansible's output ----------------


@pytest.fixture
def warned(monkeypatch):
    """The warnings the module gives Ansible (AnsibleModule.warn), in order."""
    seen = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, warning, **kwargs: seen.append(warning))
    return seen


def _nogpu_args(**extra):
    # Debian 12's containerd 1.6.20~ds1 is past its line's end of life: security_floor is waived here
    # and tested on its own below.
    return dict({"driver_version": "535", "waive": ["kernel_headers", "security_floor"],
                 "facts": fixture_facts("debian12-nogpu")}, **extra)


def test_a_branch_past_its_end_of_life_is_an_ansible_warning_by_default(warned):
    result = run_module(preflight, _nogpu_args(today=TODAY))
    assert result["ok"] is True and result["warning_count"] == 1
    assert result["checks"]["driver_lifecycle"]["outcome"] == "warning"
    assert [e["state"] for e in result["lifecycle"]] == ["past"]
    line = (
        "preflight [driver_lifecycle]: driver_version 535 is on a branch past its end of life: R535: long-term "
        "support branch, end of life June 2026 (past on 2026-12-01); CUDA 12 at most. Move the node to a supported "
        "branch for its GPUs: R620 (long-term support branch until September 2029), R595 (production branch until "
        "March 2027), R580 (long-term support branch until June 2028). Where the OS's own repository has none, take "
        "the driver from NVIDIA's repository, or keep this one and waive driver_lifecycle."
    )
    assert warned == [line]


def test_driver_lifecycle_fail_blocks_and_a_waiver_accepts_it():
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(preflight, _nogpu_args(today=TODAY, driver_lifecycle="fail"))
    assert exc.value.result["msg"].startswith(
        "preflight: 1 blocking problem: [driver_lifecycle] driver_version 535 is on a branch past its end of life: "
    )
    result = run_module(preflight, _nogpu_args(today=TODAY, driver_lifecycle="fail", waive=["kernel_headers", "driver_lifecycle"]))
    assert result["ok"] is True and result["checks"]["driver_lifecycle"]["outcome"] == "waived"


def test_before_the_end_of_life_the_same_branch_passes(warned):
    result = run_module(preflight, _nogpu_args(today="2026-06-30", driver_lifecycle="fail"))
    assert result["checks"]["driver_lifecycle"] == {
        "outcome": "pass",
        "detail": "R535: long-term support branch, end of life June 2026 (supported on 2026-06-30); CUDA 12 at most",
    }
    assert warned == []


@pytest.mark.parametrize("day, state", [(datetime.date(2026, 6, 30), "supported"), (datetime.date(2026, 7, 1), "past")])
def test_the_module_takes_the_nodes_date_without_today(monkeypatch, day, state):
    class Clock(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(day.year, day.month, day.day, 12, 0, tzinfo=tz)

    monkeypatch.setattr(preflight.datetime, "datetime", Clock)
    result = run_module(preflight, _nogpu_args())
    assert result["lifecycle"][0]["state"] == state
    assert ("on %s" % day.isoformat()) in result["checks"]["driver_lifecycle"]["detail"]


def test_a_version_below_a_security_floor_is_a_warning_naming_the_bulletin_and_the_fix(warned):
    args = dict(_nogpu_args(today=TODAY, driver_version="535.261.03", kubernetes_version="1.36.1"),
                waive=["kernel_headers", "driver_lifecycle"])
    result = run_module(preflight, args)
    assert result["ok"] is True and result["checks"]["security_floor"]["outcome"] == "warning"
    assert [f["kind"] for e in result["security"] for f in e["findings"]] == ["driver", "runtime", "pairing"]
    starts = (
        "preflight [security_floor]: declared driver 535.261.03 is below R535's security floor 535.309.01: NVIDIA security "
        "bulletin 5821 ",
        "preflight [security_floor]: installed containerd 1.6.20~ds1: the 1.6 line's end of life was 2025-08-23 "
        "(containerd's support horizon ",
        "preflight [security_floor]: installed containerd 1.6.20~ds1 cannot serve Kubernetes 1.36.1: Kubernetes v1.35's "
        "deprecation of containerd 1.x",
    )
    assert len(warned) == 3 and all(line.startswith(start) for line, start in zip(warned, starts))
    assert warned[0].endswith("install 535.309.01 or later of the branch. Declare that release or a later one in "
                              "nvidia_driver_version (on a pre-installed node, install it in the image), or waive security_floor.")


def test_security_floors_fail_blocks_naming_the_bulletin():
    args = dict(_nogpu_args(today=TODAY, driver_version="535.261.03", security_floors="fail"),
                waive=["kernel_headers", "driver_lifecycle"])
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(preflight, args)
    assert exc.value.result["msg"].startswith(
        "preflight: 2 blocking problems: [security_floor] declared driver 535.261.03 is below R535's security floor "
        "535.309.01: NVIDIA security bulletin 5821 (GPU Display Driver, May 2026: CVE-2026-24187 and 14 more)")


def test_a_malformed_today_fails_cleanly():
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(preflight, _nogpu_args(today="1 December"))
    assert exc.value.result["msg"] == "today: '1 December' is not a date (expected a date as YYYY-MM-DD, e.g. 2026-12-01)"
