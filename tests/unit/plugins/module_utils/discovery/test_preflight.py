"""Tests of module_utils/discovery/preflight.py: every rule passes on one case and fails on another.

The facts are those of the host captures (tests/unit/fixtures/hosts), replayed by
``CaptureHost``; a case that needs a host we have no capture of edits a copy of them.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import preflight as pf

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_driver import (

    _driver_drift,

    _driver_whereabouts,

    _fabric_manager_not_checked,

)

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_gpus import _driver_minimums

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.preflight_report import (

    BLOCKING,

    FABRIC_MANAGER_RULES,

    NO_GPU_SKIPPED,

    RULE_IDS,

)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.discovery.captures import fixture_facts

H200 = "ubuntu2404-h200-preinstalled"
H200_DOWN = "ubuntu2404-h200-smi-failing"
L40S = "debian12-l40s-x2-package"
V100 = "ubuntu2204-v100-nouveau"
H100 = "rocky9-h100x8-rpm-rke2"
NOGPU = "debian12-nogpu"

# A desired state that passes on each capture.
GOOD = {
    H200: dict(
        driver_version="580", driver_method="preinstalled", cuda_versions=["12.4", "13.0"], container_runtime="none"
    ),
    L40S: dict(driver_version="550", driver_method="package", cuda_versions=["12.4"], container_runtime="docker"),
    H100: dict(driver_version="570", driver_method="package", cuda_versions=["12.8"], container_runtime="rke2"),
    V100: dict(driver_version="580", driver_flavor="auto", driver_method="package", container_runtime="none"),
}


def without_fixes(msg, problems):
    """A blocking message as it read before each problem's fix and the waiver were added to it."""
    for problem in problems:
        msg = msg.replace(" (fix: %s)" % problem["fix"], "")
    return msg.split(". To accept ")[0]


def run(name, edit=None, **kwargs):
    facts = fixture_facts(name)
    if edit:
        edit(facts)
    return pf.evaluate(facts, **kwargs)


def problems(result, rule):
    return [(p["severity"], p["message"]) for p in result["problems"] if p["rule"] == rule]


def outcome(result, rule):
    return result["checks"][rule]["outcome"]


def with_headers(facts):
    facts["kernel"]["headers_installed"] = True


# --- the captures pass with a matching desired state ------------------------------------------


@pytest.mark.parametrize("name", [H200, L40S, H100, V100])
def test_matching_desired_state_has_no_blocking_problem(name):
    def edit(facts):
        if name == L40S:  # the runtime asked for is docker; keep containerd's CRI out of it
            facts["container"]["containerd"].update(cri_disabled=False)
        if name == H100:
            with_headers(facts)

    result = run(name, edit, **GOOD[name])
    assert [p for p in result["problems"] if p["severity"] == "blocking"] == []
    assert result["ok"] is True
    assert pf.enforce(result) is result


def test_h200_capture_passes_cleanly_but_for_its_security_floor():
    result = run(H200, **GOOD[H200])
    # the lent machine's 580.159.04 (2026-11-29) is below the floor of NVIDIA's September 2026 bulletin
    assert [(p["rule"], p["severity"], p["message"][:77]) for p in result["problems"]] == [
        ("security_floor", "warning", "installed driver 580.159.04 is below R580's security floor 580.178.04: NVIDIA")]
    assert "NVIDIA security bulletin 5861" in result["problems"][0]["message"]
    assert "install 580.178.04 or later of the branch" in result["problems"][0]["message"]
    assert result["problems"][0]["fix"].startswith("Declare that release or a later one in nvidia_driver_version")
    assert result["msg"] == "1 GPU: 0 blocking, 1 warning, 0 waived"
    assert result["resolved"] == {
        "driver_method": "preinstalled",
        "driver_flavor": "open",
        "driver_version": "580.159.04",
        "driver_version_source": "installed",
    }
    assert set(result["checks"]) == set(RULE_IDS)
    assert outcome(result, "cuda_driver") == "pass"
    assert result["checks"]["cuda_driver"]["detail"] == "CUDA 12.4 needs 550.54.14; CUDA 13.0 needs 580.65.06"
    assert outcome(result, "kernel_headers") == "skipped"


def test_no_gpu_skips_the_gpu_rules_only():
    result = run(NOGPU, with_headers, driver_version="580", cuda_versions=["13.0"])
    assert result["ok"] is True
    assert result["gpu_count"] == 0
    assert result["msg"] == "no NVIDIA GPU on this host, desired state checked: 0 blocking, 0 warnings, 0 waived"
    assert result["problems"] == []
    for rule in NO_GPU_SKIPPED:
        assert outcome(result, rule) == "skipped"
        assert result["checks"][rule]["detail"] == "no NVIDIA GPU on this host"
    assert outcome(result, "os_supported") == "pass"
    assert outcome(result, "cuda_driver") == "pass"


def test_no_gpu_still_fails_a_desired_state_that_cannot_work():
    # What the molecule scenario `discover` runs on its Debian containers.
    result = run(NOGPU, driver_version="535.261.03", driver_method="preinstalled", cuda_versions=["12.4", "13.0"])
    assert result["ok"] is False
    assert result["msg"] == "no NVIDIA GPU on this host, desired state checked: 2 blocking, 2 warnings, 0 waived"
    # Debian 12's 535.261.03 is below the floor of NVIDIA's May 2026 driver bulletin
    assert [m[:73] for dummy, m in problems(result, "security_floor")] == [
        "declared driver 535.261.03 is below R535's security floor 535.309.01: NVI"]
    assert problems(result, "driver_missing") == [
        ("blocking", "driver_method is preinstalled but no NVIDIA driver is installed or loaded")
    ]
    # Without an installed driver, the declared one is what CUDA is checked against.
    assert problems(result, "cuda_driver") == [
        (
            "warning",
            "CUDA 12.4 asks for driver 550.54.14; driver_version 535.261.03 is older and runs it only "
            "through minor-version compatibility",
        ),
        (
            "blocking",
            "CUDA 13.0 needs driver 580.65.06 or newer (at least 580 for any CUDA 13.x); "
            "driver_version 535.261.03 is older",
        ),
    ]
    assert outcome(result, "gpu_driver_branch") == "skipped"


def test_no_gpu_still_rejects_a_malformed_version():
    result = run(NOGPU, with_headers, driver_version="5x5")
    assert result["msg"] == "no NVIDIA GPU on this host, desired state checked: 1 blocking, 0 warnings, 0 waived"
    assert result["ok"] is False


# --- one pass and one failure per rule --------------------------------------------------------


def test_driver_version_format():
    assert outcome(run(H200, **GOOD[H200]), "driver_version_format") == "pass"
    result = run(H200, driver_version="5x5", driver_method="preinstalled")
    assert problems(result, "driver_version_format") == [
        ("blocking", "driver_version: version '5x5' is not a driver version (expected e.g. 580 or 580.95.05)")
    ]


def test_cuda_version_format():
    assert outcome(run(H200, **GOOD[H200]), "cuda_version_format") == "pass"
    result = run(H200, driver_method="preinstalled", cuda_versions=["12.4", "12", "cuda13"])
    assert problems(result, "cuda_version_format") == [
        ("blocking", "cuda_versions: version '12' is not a CUDA version (expected e.g. 12.4, 12.4.1 or 13.0)"),
        ("blocking", "cuda_versions: version 'cuda13' is not a CUDA version (expected e.g. 12.4, 12.4.1 or 13.0)"),
    ]
    # the well-formed one is still checked
    assert outcome(result, "cuda_driver") == "pass"


def test_os_supported():
    assert outcome(run(L40S, **GOOD[L40S]), "os_supported") == "pass"
    assert outcome(run(H100, with_headers, **GOOD[H100]), "os_supported") == "pass"

    def focal(facts):
        facts["os"].update(version_id="20.04", version_major="20", pretty_name="Ubuntu 20.04.6 LTS")

    result = run(H200, focal, driver_version="580", container_runtime="none")
    assert problems(result, "os_supported") == [
        (
            "blocking",
            "driver_method package is not supported on Ubuntu 20.04.6 LTS (supported: Debian 12/13, "
            "Ubuntu 22.04/24.04, RHEL/Rocky/AlmaLinux 8/9/10)",
        )
    ]
    # any OS will do for a pre-installed driver
    assert outcome(run(H200, focal, **GOOD[H200]), "os_supported") == "pass"


def test_os_supported_unidentified_os():
    def unknown(facts):
        facts["os"].update(id=None, version_id=None, version_major=None, pretty_name=None)

    result = run(L40S, unknown, **GOOD[L40S])
    assert problems(result, "os_supported")[0][1].startswith(
        "driver_method package is not supported on an unidentified OS"
    )


def test_driver_missing():
    assert outcome(run(H200, **GOOD[H200]), "driver_missing") == "pass"
    result = run(V100, driver_method="preinstalled", container_runtime="none")
    assert problems(result, "driver_missing") == [
        ("blocking", "driver_method is preinstalled but no NVIDIA driver is installed or loaded")
    ]
    result = run(H200_DOWN, driver_method="preinstalled", container_runtime="none")
    assert problems(result, "driver_missing") == [
        (
            "blocking",
            "driver_method is preinstalled and a driver is installed (nvidia-smi at "
            "/usr/local/nvidia/bin/nvidia-smi) but its kernel module is not loaded",
        )
    ]


def test_driver_missing_warns_when_nvidia_smi_fails_with_the_module_loaded():
    def smi_down(facts):
        facts["driver"]["nvidia_smi"].update(
            state="error", detail="Failed to initialize NVML: Driver/library version mismatch"
        )

    result = run(H200, smi_down, **GOOD[H200])
    assert problems(result, "driver_missing") == [
        (
            "warning",
            "the pre-installed driver is loaded but nvidia-smi fails: Failed to initialize NVML: "
            "Driver/library version mismatch",
        )
    ]


def test_driver_not_package_owned():
    assert outcome(run(L40S, **GOOD[L40S]), "driver_not_package_owned") == "pass"
    result = run(H200, driver_version="580", driver_method="package", container_runtime="none")
    assert problems(result, "driver_not_package_owned") == [
        (
            "blocking",
            "a driver that no package installed is present (nvidia-smi at /usr/local/nvidia/bin/nvidia-smi, "
            "kernel module 580.159.04 loaded) and driver_method is package",
        )
    ]


def test_driver_drift():
    assert outcome(run(H200, **GOOD[H200]), "driver_drift") == "pass"
    result = run(
        H200, driver_version="570", driver_flavor="proprietary", driver_method="preinstalled", container_runtime="none"
    )
    assert problems(result, "driver_drift") == [
        (
            "warning",
            "the pre-installed driver has drifted from the declared one: version 580.159.04, declared 570; "
            "flavour open, declared proprietary",
        )
    ]
    assert result["ok"] is True  # drift only warns


def test_gpu_open_modules():
    assert outcome(run(H200, **GOOD[H200]), "gpu_open_modules") == "pass"
    result = run(V100, driver_version="580", driver_flavor="open", container_runtime="none")
    assert problems(result, "gpu_open_modules") == [
        (
            "blocking",
            "the Volta GPU GV100GL [Tesla V100 SXM2 16GB] at 0000:00:1e.0 cannot be driven by the open kernel modules",
        )
    ]
    # auto picks the proprietary modules for Volta
    assert run(V100, **GOOD[V100])["resolved"]["driver_flavor"] == "proprietary"


def blackwell(facts):
    facts["gpus"][0].update(device_id="0x2901", name="GB100 [B200]", architecture="Blackwell")


def test_gpu_open_modules_blackwell_needs_open():
    result = run(L40S, blackwell, driver_version="580", driver_flavor="proprietary", container_runtime="none")
    assert problems(result, "gpu_open_modules") == [
        (
            "blocking",
            "the Blackwell GPU GB100 [B200] at 0000:41:00.0 needs the open kernel modules, not the proprietary ones",
        )
    ]
    assert outcome(run(L40S, blackwell, driver_version="580", container_runtime="none"), "gpu_open_modules") == "pass"


def test_gpu_open_modules_grace_hopper_needs_open():
    def gh200(facts):
        facts["gpus"][0].update(device_id="0x2342", name="GH100 [GH200 120GB / 480GB]", architecture="Hopper")

    result = run(L40S, gh200, driver_version="580", driver_flavor="proprietary", container_runtime="none")
    assert problems(result, "gpu_open_modules") == [
        (
            "blocking",
            "the GH200 (Grace Hopper) GPU GH100 [GH200 120GB / 480GB] at 0000:41:00.0 needs the open kernel "
            "modules, not the proprietary ones",
        )
    ]


def test_gpu_open_modules_auto_with_no_common_flavour():
    def mixed(facts):
        blackwell(facts)
        facts["gpus"][1].update(device_id="0x1db1", name="GV100GL [Tesla V100 SXM2 16GB]", architecture="Volta")

    result = run(L40S, mixed, driver_version="580", container_runtime="none")
    assert problems(result, "gpu_open_modules") == [
        (
            "blocking",
            "no driver flavour drives every GPU: GV100GL [Tesla V100 SXM2 16GB] at 0000:c1:00.0 needs the "
            "proprietary modules, GB100 [B200] at 0000:41:00.0 needs the open modules",
        )
    ]
    assert result["resolved"]["driver_flavor"] is None


def test_gpu_driver_branch():
    assert outcome(run(H200, **GOOD[H200]), "gpu_driver_branch") == "pass"
    result = run(V100, driver_version="590", driver_flavor="proprietary", container_runtime="none")
    assert problems(result, "gpu_driver_branch") == [
        (
            "blocking",
            "the Volta GPU GV100GL [Tesla V100 SXM2 16GB] at 0000:00:1e.0 is not supported by drivers after R580; "
            "driver_version 590 is R590",
        )
    ]


@pytest.mark.parametrize(
    "name, edit, version, message",
    [
        (
            H200,
            None,
            "535",
            "the GPU GH100 [H200 SXM 141GB] at 0000:00:06.0 needs driver 550 or newer; driver_version 535 is older",
        ),
        (
            H100,
            with_headers,
            "520.61.05",
            "the GPU GH100 [H100 SXM5 80GB] at 0000:18:00.0 needs driver 525 or newer; driver_version 520.61.05 is older",
        ),
        (
            L40S,
            blackwell,
            "565",  # below both Blackwell's 570 and HGX B200's 570.133.20: the stricter is reported
            "the GPU GB100 [B200] at 0000:41:00.0 needs driver 570.133.20 or newer; driver_version 565 is older",
        ),
        (
            L40S,
            blackwell,
            "570.124.06",
            "the GPU GB100 [B200] at 0000:41:00.0 needs driver 570.133.20 or newer; driver_version 570.124.06 is older",
        ),
    ],
)
def test_gpu_driver_branch_minimums(name, edit, version, message):
    def package(facts):
        if edit:
            edit(facts)
        facts["driver"]["source"] = "absent"

    result = run(name, package, driver_version=version, container_runtime="none")
    assert problems(result, "gpu_driver_branch") == [("blocking", message)]


def test_gpu_driver_branch_unknown_architecture_warns():
    def unknown(facts):
        facts["gpus"][0].update(device_id="0x2bff", name=None, name_source="unknown", architecture=None)

    result = run(L40S, unknown, **GOOD[L40S])
    assert problems(result, "gpu_driver_branch") == [
        (
            "warning",
            "the GPU device 0x2bff at 0000:41:00.0 has an unknown architecture: its driver support was not checked",
        )
    ]


def test_cuda_driver():
    assert outcome(run(H200, **GOOD[H200]), "cuda_driver") == "pass"
    result = run(
        H200,
        driver_version="570",
        driver_method="package",
        cuda_versions=["13.0"],
        container_runtime="none",
        waive=["driver_not_package_owned"],
    )
    assert problems(result, "cuda_driver") == [
        (
            "blocking",
            "CUDA 13.0 needs driver 580.65.06 or newer (at least 580 for any CUDA 13.x); driver_version 570 is older",
        )
    ]


def test_cuda_driver_minor_version_compatibility_warns():
    result = run(L40S, driver_version="550", cuda_versions=["12.8"], container_runtime="docker")
    assert problems(result, "cuda_driver") == [
        (
            "warning",
            "CUDA 12.8 asks for driver 570.26; driver_version 550 is older and runs it only through "
            "minor-version compatibility",
        )
    ]


def test_cuda_driver_compares_the_installed_driver_when_preinstalled():
    result = run(H200, driver_method="preinstalled", cuda_versions=["13.1"], container_runtime="none")
    assert problems(result, "cuda_driver") == [
        (
            "warning",
            "CUDA 13.1 asks for driver 590.44.01; the installed driver 580.159.04 is older and runs it only "
            "through minor-version compatibility",
        )
    ]


def test_cuda_driver_unknown_release_warns():
    result = run(H200, driver_method="preinstalled", cuda_versions=["14.0"], container_runtime="none")
    assert problems(result, "cuda_driver") == [
        ("warning", "CUDA 14.0 is not in the collection's CUDA-to-driver table: its minimum driver was not checked")
    ]


def test_nouveau():
    assert outcome(run(H200, **GOOD[H200]), "nouveau") == "pass"
    result = run(V100, driver_method="preinstalled", container_runtime="none")
    assert problems(result, "nouveau") == [("blocking", "the nouveau driver is loaded and the NVIDIA driver is not")]


def test_nouveau_with_package_method_warns():
    result = run(V100, **GOOD[V100])
    assert problems(result, "nouveau") == [
        ("warning", "the nouveau driver is loaded; the driver role will blacklist it and the host needs a reboot")
    ]


def test_secure_boot():
    result = run(L40S, **GOOD[L40S])
    assert outcome(result, "secure_boot") == "pass"
    assert result["checks"]["secure_boot"]["detail"] == (
        "Secure Boot enabled; DKMS signs with /var/lib/dkms/mok.pub (enrolment not verified)"
    )

    def no_key(facts):
        facts["secure_boot"].update(dkms_mok_key=False, mok_keys=[])

    result = run(L40S, no_key, **GOOD[L40S])
    assert problems(result, "secure_boot") == [
        (
            "blocking",
            "Secure Boot is enabled and DKMS would build unsigned nvidia modules (no /var/lib/dkms/mok.pub)",
        )
    ]


def test_secure_boot_ubuntu_precompiled_modules():
    result = run(V100, **GOOD[V100])
    assert outcome(result, "secure_boot") == "pass"
    assert result["checks"]["secure_boot"]["detail"] == (
        "Secure Boot enabled; Ubuntu's precompiled signed modules apply"
    )


def test_kernel_headers():
    assert outcome(run(L40S, **GOOD[L40S]), "kernel_headers") == "pass"
    result = run(H100, **GOOD[H100])
    assert problems(result, "kernel_headers") == [
        (
            "blocking",
            "the headers of the running kernel 5.14.0-427.13.1.el9_4.x86_64 are not installed "
            "(/lib/modules/5.14.0-427.13.1.el9_4.x86_64/build is missing)",
        )
    ]
    fix = [p["fix"] for p in result["problems"] if p["rule"] == "kernel_headers"][0]
    assert (
        fix == "Install kernel-devel-5.14.0-427.13.1.el9_4.x86_64, or reboot into a kernel whose headers are installed."
    )
    # Ubuntu uses precompiled modules: nothing to build
    assert outcome(run(V100, **GOOD[V100]), "kernel_headers") == "skipped"


def test_containerd_cri():
    def cri_on(facts):
        facts["container"]["containerd"].update(cri_disabled=False, disabled_plugins=[])

    assert outcome(run(L40S, cri_on, driver_version="550", container_runtime="containerd"), "containerd_cri") == "pass"
    result = run(L40S, driver_version="550", container_runtime="containerd")
    assert problems(result, "containerd_cri") == [
        ("blocking", "containerd's CRI plugin is disabled in /etc/containerd/config.toml (disabled_plugins = ['cri'])")
    ]
    # not a problem when the NVIDIA runtime goes into Docker
    assert outcome(run(L40S, driver_version="550", container_runtime="docker"), "containerd_cri") == "skipped"


def test_container_runtime():
    assert outcome(run(H100, with_headers, **GOOD[H100]), "container_runtime") == "pass"
    result = run(H100, with_headers, driver_version="570", container_runtime="crio")
    assert problems(result, "container_runtime") == [
        ("warning", "container_runtime is crio but crio was not found on the host")
    ]


# --- waivers, failure, input checks ------------------------------------------------------------


def test_waive_keeps_the_problem_with_its_reason_but_does_not_block():
    result = run(H100, driver_version="570", container_runtime="rke2", waive=["kernel_headers"])
    assert result["ok"] is True
    assert result["blocking_count"] == 0
    (problem,) = result["problems"]
    assert problem["waived"] is True
    assert problem["rule"] == "kernel_headers"
    assert problem["reason"].startswith("DKMS builds the nvidia modules against the running kernel's headers")
    assert outcome(result, "kernel_headers") == "waived"
    assert result["msg"] == "8 GPUs: 0 blocking, 0 warnings, 1 waived"


def test_unknown_waiver_is_refused():
    with pytest.raises(GpuFleetError) as exc:
        run(H200, driver_method="preinstalled", waive=["kernel_headers", "nope"])
    assert exc.value.msg.startswith("waive: unknown rule 'nope' (expected some of driver_version_format, ")


def test_enforce_lists_every_blocking_problem():
    result = run(V100, driver_version="590", driver_flavor="open", container_runtime="none")
    with pytest.raises(GpuFleetError) as exc:
        pf.enforce(result)
    assert without_fixes(exc.value.msg, result["problems"]) == (
        "preflight: 2 blocking problems: "
        "[gpu_open_modules] the Volta GPU GV100GL [Tesla V100 SXM2 16GB] at 0000:00:1e.0 cannot be driven by the "
        "open kernel modules; "
        "[gpu_driver_branch] the Volta GPU GV100GL [Tesla V100 SXM2 16GB] at 0000:00:1e.0 is not supported by "
        "drivers after R580; driver_version 590 is R590"
    )
    assert exc.value.details["problems"] == result["problems"]
    assert exc.value.details["checks"] == result["checks"]
    assert exc.value.details["ok"] is False


def test_enforce_says_each_problems_fix_and_how_to_waive_them():
    result = run(V100, driver_version="590", driver_flavor="open", container_runtime="none")
    with pytest.raises(GpuFleetError) as exc:
        pf.enforce(result)
    blocking = [p for p in result["problems"] if p["severity"] == BLOCKING]
    for problem in blocking:
        assert "[%s] %s (fix: %s)" % (problem["rule"], problem["message"], problem["fix"]) in exc.value.msg
    assert exc.value.msg.endswith(
        ". To accept them on purpose instead: waive: [gpu_open_modules, gpu_driver_branch] (the discover role's discover_waive)")


@pytest.mark.parametrize(
    "facts, message",
    [
        ([], "facts: expected a gpufleet_nvidia facts dict, got list"),
        (
            {"gpus": []},
            "facts: not a gpufleet_nvidia facts dict (missing driver, container, os, kernel, secure_boot); "
            "pass the gpufleet_nvidia fact of gpufleet.nvidia.gpu_facts",
        ),
    ],
)
def test_facts_are_checked(facts, message):
    with pytest.raises(GpuFleetError) as exc:
        pf.evaluate(facts, driver_version="580")
    assert exc.value.msg == message


def test_every_problem_has_the_full_shape():
    result = run(
        V100, driver_version="590", driver_flavor="open", cuda_versions=["13.0", "x"], container_runtime="docker"
    )
    assert len(result["problems"]) >= 5
    for problem in result["problems"]:
        assert set(problem) == {"rule", "severity", "message", "reason", "fix", "waived"}
        assert problem["severity"] in ("blocking", "warning")
        assert problem["rule"] in RULE_IDS
        assert problem["reason"] and problem["fix"]
    order = [RULE_IDS.index(p["rule"]) for p in result["problems"]]
    assert order == sorted(order)


# --- driver_method operator: the GPU Operator's driver container -------------------------------


def test_operator_method_on_a_host_without_driver_passes():
    result = run(H200_DOWN, driver_version="580", driver_method="operator", container_runtime="none",
                 edit=lambda f: f["driver"].update(source="absent", loaded=False))
    assert problems(result, "driver_not_package_owned") == []
    assert outcome(result, "driver_missing") == "skipped"
    assert outcome(result, "kernel_headers") == "skipped"
    assert result["checks"]["kernel_headers"]["detail"] == (
        "driver_method operator: the driver container brings what it builds with"
    )


def test_operator_method_refuses_a_host_driver():
    # A node moving from the host to the operator: the collection does not remove a driver under
    # running GPU pods, so the change is refused with the steps to take (waivable).
    result = run(H200, driver_version="580", driver_method="operator", container_runtime="none")
    assert problems(result, "driver_not_package_owned") == [
        (
            "blocking",
            "a host driver is present (nvidia-smi at /usr/local/nvidia/bin/nvidia-smi, kernel module "
            "580.159.04 loaded) and driver_method is operator",
        )
    ]
    assert result["ok"] is False
    assert "remove the host driver" in [p for p in result["problems"] if p["rule"] == "driver_not_package_owned"][0]["fix"]


def _operator_container(facts):
    facts["driver"].update(source="operator", operator_root="/run/nvidia/driver", package=None)


@pytest.mark.parametrize("method", ["package", "preinstalled"])
def test_the_operators_driver_container_on_a_host_prepared_node_is_named(method):
    # A node moving from the operator to the host: the operator's driver serves it until the
    # cluster layer moves it off; nothing blocks, the warning says the order.
    result = run(H200, _operator_container, driver_version="580", driver_method=method, container_runtime="none")
    assert problems(result, "operator_driver") == [
        ("warning", "the GPU Operator's driver container serves this node (driver root /run/nvidia/driver) and "
                    "driver_method is %s" % method)]
    assert problems(result, "driver_not_package_owned") == [] and problems(result, "driver_missing") == []


def test_the_operators_own_driver_on_an_operator_node_passes():
    result = run(H200, _operator_container, driver_version="580", driver_method="operator", container_runtime="none")
    assert problems(result, "driver_not_package_owned") == [] and outcome(result, "operator_driver") == "skipped"


def test_operator_method_blocks_on_nouveau():
    result = run(V100, driver_version="580", driver_method="operator", driver_flavor="proprietary",
                 container_runtime="none")
    assert problems(result, "nouveau") == [("blocking", "the nouveau driver is loaded and driver_method is operator")]


# --- the fabric manager on a host with NVSwitches (the derived HGX H100 host: 4 NVSwitches, ----------
# --- fabric manager 570.172.08 active) ---------------------------------------------------------------

H100_PREINSTALLED = dict(driver_version="570", driver_method="preinstalled", container_runtime="rke2")


def fm_missing(facts):
    facts["fabric_manager"].update(installed=False, path=None, version=None, version_source=None, service=None)


def test_fabric_manager_missing():
    result = run(H100, with_headers, **GOOD[H100])
    assert outcome(result, "fabric_manager_missing") == "pass"
    assert result["checks"]["fabric_manager_missing"]["detail"] == (
        "4 NVSwitches: fabric manager 570.172.08 installed, service active"
    )
    result = run(H100, fm_missing, **H100_PREINSTALLED)
    assert problems(result, "fabric_manager_missing") == [
        ("blocking", "the host has 4 NVSwitches and no fabric manager, and driver_method preinstalled installs none")
    ]
    assert result["ok"] is False
    assert outcome(result, "fabric_manager_version") == "skipped"
    assert result["checks"]["fabric_manager_version"]["detail"] == "no fabric manager installed"


def test_fabric_manager_missing_is_installed_by_the_package_method():
    result = run(H100, lambda f: (fm_missing(f), with_headers(f)), **GOOD[H100])
    assert problems(result, "fabric_manager_missing") == []
    assert result["checks"]["fabric_manager_missing"]["detail"] == (
        "4 NVSwitches: the driver role installs the fabric manager with the driver"
    )


def test_fabric_manager_missing_on_debian_warns():
    def debian(facts):
        fm_missing(facts)
        with_headers(facts)
        facts["os"].update(id="debian", version_id="12", version_major="12", family="debian", pretty_name="Debian 12")

    result = run(H100, debian, **GOOD[H100])
    assert problems(result, "fabric_manager_missing") == [
        ("warning", "the host has 4 NVSwitches and Debian's archive does not package the fabric manager")
    ]


def test_fabric_manager_service_not_running_warns():
    result = run(H100, lambda f: f["fabric_manager"].update(service="failed"), **H100_PREINSTALLED)
    assert problems(result, "fabric_manager_missing") == [
        ("warning", "the fabric manager 570.172.08 is installed but its service nvidia-fabricmanager is failed")
    ]
    assert result["ok"] is True


def test_fabric_manager_version():
    result = run(H100, **H100_PREINSTALLED)
    assert outcome(result, "fabric_manager_version") == "pass"
    assert result["checks"]["fabric_manager_version"]["detail"] == (
        "fabric manager 570.172.08 matches the installed driver 570.172.08"
    )
    result = run(H100, lambda f: f["fabric_manager"].update(version="570.133.20"), **H100_PREINSTALLED)
    assert problems(result, "fabric_manager_version") == [
        ("blocking", "fabric manager 570.133.20 does not match the installed driver 570.172.08 on a host with "
                     "4 NVSwitches")
    ]
    assert result["ok"] is False
    with pytest.raises(GpuFleetError) as raised:
        pf.enforce(result)
    assert "[fabric_manager_version] fabric manager 570.133.20 does not match" in raised.value.msg


def test_fabric_manager_version_with_the_package_method_warns():
    # the driver role moves the fabric manager with the driver: not a reason to refuse the upgrade
    result = run(H100, with_headers, driver_version="580", driver_method="package", container_runtime="rke2")
    assert problems(result, "fabric_manager_version") == [
        ("warning", "fabric manager 570.172.08 does not match driver_version 580 on a host with 4 NVSwitches")
    ]
    assert outcome(run(H100, with_headers, **GOOD[H100]), "fabric_manager_version") == "pass"


def test_fabric_manager_version_waived():
    result = run(H100, lambda f: f["fabric_manager"].update(version="570.133.20"), waive=["fabric_manager_version"],
                 **H100_PREINSTALLED)
    assert result["ok"] is True
    assert outcome(result, "fabric_manager_version") == "waived"


@pytest.mark.parametrize(
    "name, edit, kwargs, detail",
    [
        (H200, None, GOOD[H200], "no NVSwitch on this host"),
        (H100, None, dict(driver_version="570", driver_method="operator", container_runtime="rke2"),
         "driver_method operator: the GPU Operator's driver container runs the fabric manager"),
        (H100, lambda f: (f.pop("nvswitches"), f.pop("fabric_manager")), H100_PREINSTALLED,
         "the facts have no NVSwitch or fabric manager data (gathered by an older gpu_facts)"),
    ],
)
def test_fabric_manager_rules_skipped(name, edit, kwargs, detail):
    result = run(name, edit, **kwargs)
    for rule in FABRIC_MANAGER_RULES:
        assert outcome(result, rule) == "skipped"
        assert result["checks"][rule]["detail"] == detail


# --- the steps of the rules ----------------------------------------------------------------------


def test_driver_whereabouts_names_what_shows_of_the_driver():
    driver = {"nvidia_smi": {"path": "/usr/bin/nvidia-smi"}, "loaded": True, "version": "580.95.05"}
    assert _driver_whereabouts(driver) == "nvidia-smi at /usr/bin/nvidia-smi, kernel module 580.95.05 loaded"
    assert _driver_whereabouts({"installed": {"state": "ok", "version": "550.1"}}) == "kernel module 550.1 installed"
    assert _driver_whereabouts({}) == "driver files present"


def test_driver_drift_lists_version_and_flavour():
    installed = pf.versions.parse_driver_version("580.95.05")
    assert _driver_drift(installed, "open", pf.versions.parse_driver_version("575"), "proprietary") == [
        "version 580.95.05, declared 575", "flavour open, declared proprietary"]
    assert _driver_drift(installed, "open", pf.versions.parse_driver_version("580"), "auto") == []
    assert _driver_drift(None, None, None, "open") == []


def test_compared_driver_is_the_installed_one_only_for_preinstalled():
    facts = fixture_facts(H200)
    declared = pf.versions.parse_driver_version("575")
    version, label, source = pf._compared_driver(facts, "preinstalled", declared)
    assert (str(version), label, source) == ("580.159.04", "the installed driver 580.159.04", "installed")
    assert pf._compared_driver(facts, "package", declared) == (declared, "driver_version 575", "declared")
    assert pf._compared_driver(facts, "package", None) == (None, "driver_version None", None)


@pytest.mark.parametrize("switches, fm, method, why", [
    (None, {}, "package", "the facts have no NVSwitch or fabric manager data (gathered by an older gpu_facts)"),
    (4, None, "package", "the facts have no NVSwitch or fabric manager data (gathered by an older gpu_facts)"),
    (0, {}, "package", "no NVSwitch on this host"),
    (4, {}, "operator", "driver_method operator: the GPU Operator's driver container runs the fabric manager"),
    (4, {}, "preinstalled", None),
])
def test_fabric_manager_not_checked(switches, fm, method, why):
    assert _fabric_manager_not_checked(switches, fm, method) == why


def test_driver_minimums_are_the_architectures_and_the_products():
    assert _driver_minimums("Hopper", 0x2335) == [("525", "Hopper GPUs"), ("550", "H200")]
    assert _driver_minimums("Ada Lovelace", 0x26B9) == []


def test_unknown_waived_rules_are_refused():
    pf._check_waive(["secure_boot"])
    pf._check_waive(None)
    with pytest.raises(GpuFleetError, match="^waive: unknown rule 'nope' "):
        pf._check_waive(["secure_boot", "nope"])


# --- architecture refusals on the derived P100 and B200 hosts (tests/unit/fixtures/hosts) -------

P100 = "ubuntu2204-p100-nodriver"  # derived from ubuntu2204-v100-nouveau: one Tesla P100, no driver
B200 = "ubuntu2404-b200-preinstalled"  # derived from the real H200 capture: an HGX B200, open 580.159.04


def full(result, rule):
    return [(p["severity"], p["message"], p["reason"], p["fix"]) for p in result["problems"] if p["rule"] == rule]


@pytest.mark.parametrize("version", ["590", "595", "610.57.04", "620"])
def test_pascal_refuses_r590_and_newer_with_the_reason_and_the_fix(version):
    result = run(P100, driver_version=version, container_runtime="none")
    assert full(result, "gpu_driver_branch") == [
        (
            "blocking",
            "the Pascal GPU GP100GL [Tesla P100 PCIe 16GB] at 0000:00:1e.0 is not supported by drivers after R580; "
            "driver_version %s is R%s" % (version, version[:3]),
            "NVIDIA's R580 is the last driver branch for Pascal GPUs: R590 and newer do not drive them.",
            "Set driver_version to 580 (R580: long-term support branch, end of life June 2028; CUDA 13; the last "
            "branch for Maxwell, Pascal and Volta; an older NVIDIA page gives August 2028), or move the workloads "
            "to Turing or newer GPUs.",
        )
    ]
    assert result["ok"] is False


def test_maxwell_refuses_r590_too():
    def m60(facts):  # the P100 host with a Tesla M60 in its place (10de:13f2 in pci.ids)
        facts["gpus"][0].update(device_id="0x13f2", name="GM204GL [Tesla M60]", architecture="Maxwell")

    assert problems(run(P100, m60, driver_version="590", container_runtime="none"), "gpu_driver_branch") == [
        ("blocking", "the Maxwell GPU GM204GL [Tesla M60] at 0000:00:1e.0 is not supported by drivers after R580; "
                     "driver_version 590 is R590")
    ]
    assert outcome(run(P100, m60, driver_version="580", container_runtime="none"), "gpu_driver_branch") == "pass"


@pytest.mark.parametrize("version", ["535", "570", "580", "580.95.05"])
def test_pascal_takes_r580_and_older(version):
    result = run(P100, driver_version=version, container_runtime="none")
    assert outcome(result, "gpu_driver_branch") == "pass"
    assert result["resolved"]["driver_flavor"] == "proprietary"  # auto: Pascal needs them


def test_pascal_refuses_the_open_modules():
    result = run(P100, driver_version="580", driver_flavor="open", container_runtime="none")
    assert full(result, "gpu_open_modules") == [
        (
            "blocking",
            "the Pascal GPU GP100GL [Tesla P100 PCIe 16GB] at 0000:00:1e.0 cannot be driven by the open kernel modules",
            "The open kernel modules need the GPU System Processor, which Turing introduced; "
            "Maxwell, Pascal and Volta GPUs need the proprietary modules.",
            "Set driver_flavor: proprietary (or auto).",
        )
    ]
    assert outcome(run(P100, driver_version="580", driver_flavor="proprietary", container_runtime="none"),
                   "gpu_open_modules") == "pass"


@pytest.mark.parametrize("name", [P100, V100])
def test_cuda_13_is_refused_on_pascal_and_volta(name):
    result = run(name, driver_version="580", cuda_versions=["12.9", "13.0"], container_runtime="none")
    arch, label = ("Pascal", "GP100GL [Tesla P100 PCIe 16GB]") if name == P100 else ("Volta", "GV100GL [Tesla V100 SXM2 16GB]")
    assert full(result, "gpu_cuda") == [
        (
            "blocking",
            "CUDA 13.0 does not support the %s GPU %s at 0000:00:1e.0: CUDA 12.x is the last toolkit for %s GPUs"
            % (arch, label, arch),
            "CUDA 13.0 dropped Maxwell, Pascal and Volta: its compiler builds no code for them and its runtime "
            "does not run on them.",
            "Build this node's workloads with CUDA 12.x, or run CUDA 13.0 on Turing or newer GPUs.",
        )
    ]
    # the driver itself runs both: the refusal is the GPU's, not the driver's
    assert outcome(result, "cuda_driver") == "pass"
    passing = run(name, driver_version="580", cuda_versions=["12.9"], container_runtime="none")
    assert passing["checks"]["gpu_cuda"] == {"outcome": "pass", "detail": "the 1 GPU run CUDA 12.9"}


def test_cuda_13_runs_on_the_b200():
    result = run(B200, driver_version="580", driver_method="preinstalled", cuda_versions=["13.0"], container_runtime="none")
    assert outcome(result, "gpu_cuda") == "pass"
    assert outcome(run(NOGPU, driver_version="580", cuda_versions=["13.0"]), "gpu_cuda") == "skipped"


def test_b200_host_passes_with_its_open_driver():
    result = run(B200, driver_version="580", driver_method="preinstalled", container_runtime="none")
    assert [p["rule"] for p in result["problems"]] == ["security_floor"]  # 580.159.04: bulletin 5861
    assert result["resolved"]["driver_flavor"] == "open"
    assert result["checks"]["gpu_driver_branch"]["detail"] == "the installed driver 580.159.04 supports the 1 GPU"


def test_b200_refuses_the_proprietary_modules():
    result = run(B200, driver_version="580", driver_flavor="proprietary", driver_method="package", container_runtime="none")
    assert full(result, "gpu_open_modules") == [
        (
            "blocking",
            "the Blackwell GPU GB100 [B200] at 0000:00:06.0 needs the open kernel modules, not the proprietary ones",
            "NVIDIA supports Blackwell and Grace Hopper only with the open kernel modules.",
            "Set driver_flavor: open (or auto).",
        )
    ]
    # auto picks the open modules for Blackwell, whatever the branch's own default
    assert run(B200, driver_version="570.172.08", driver_method="package", container_runtime="none")["resolved"][
        "driver_flavor"
    ] == "open"


def test_grace_hopper_refuses_the_proprietary_modules_on_the_h200_capture():
    def gh200(facts):
        facts["gpus"][0].update(device_id="0x2348", name="GH100 [GH200 144G HBM3e]")

    result = run(H200, gh200, driver_version="580", driver_flavor="proprietary", container_runtime="none")
    assert full(result, "gpu_open_modules")[0][:2] == (
        "blocking",
        "the GH200 (Grace Hopper) GPU GH100 [GH200 144G HBM3e] at 0000:00:06.0 needs the open kernel modules, "
        "not the proprietary ones",
    )


@pytest.mark.parametrize("version, ok", [("570.86.15", False), ("570.133.20", True), ("565", False), ("580", True)])
def test_b200_needs_570_133_20(version, ok):
    result = run(B200, driver_version=version, driver_method="package", container_runtime="none")
    assert (outcome(result, "gpu_driver_branch") == "pass") is ok


# --- driver_flavor auto: what the driver role installs -------------------------------------------


@pytest.mark.parametrize(
    "name, version, flavor",
    [
        (L40S, "550", "proprietary"),  # Turing or newer, but R550 predates the open default (R560)
        (L40S, "560", "open"),
        (L40S, "580", "open"),
        (H100, "570", "open"),
        (P100, "580", "proprietary"),  # Pascal: proprietary on every branch
        (B200, "580", "open"),  # Blackwell: open on every branch
        (NOGPU, "535", "proprietary"),  # no GPU: the branch's default
        (NOGPU, "595", "open"),
    ],
)
def test_auto_flavour_follows_the_gpus_then_the_branch(name, version, flavor):
    result = run(name, driver_version=version, driver_method="package", container_runtime="none")
    assert result["resolved"]["driver_flavor"] == flavor


# --- CUDA against the branch (common/versions.py's table) -----------------------------------------


@pytest.mark.parametrize(
    "version, cuda, severity",
    [
        ("535", "13.0", "blocking"),  # CUDA 13 needs R580
        ("570", "13.0", "blocking"),
        ("580", "13.0", None),
        ("580", "13.1", "warning"),  # 13.1 asks for 590.44.01; R580 runs it by minor-version compatibility
        ("535", "12.4", "warning"),  # 12.4 asks for 550.54.14; R535 only through minor-version compatibility
        ("535", "12.2", None),
        ("520.61.05", "12.0", "blocking"),  # below CUDA 12's family minimum (525)
    ],
)
def test_cuda_against_the_declared_branch(version, cuda, severity):
    result = run(NOGPU, driver_version=version, cuda_versions=[cuda])
    assert [p[0] for p in problems(result, "cuda_driver")] == ([severity] if severity else [])


# --- driver_lifecycle ----------------------------------------------------------------------------

TODAY = "2026-12-01"


@pytest.mark.parametrize(
    "version, severity, state",
    [
        ("535", "warning", "past"),
        ("550.163.01", "warning", "past"),
        ("570", "warning", "past"),
        ("575", "warning", "past"),
        ("580", None, "supported"),
        ("590", None, "no_end_date"),
        ("595", None, "supported"),
        ("610", "warning", "past"),
        ("620", None, "supported"),
        ("470", "warning", "unknown"),
    ],
)
def test_driver_lifecycle_of_the_declared_branch(version, severity, state):
    result = run(NOGPU, driver_version=version, today=TODAY, waive=["kernel_headers"])
    assert [p[0] for p in problems(result, "driver_lifecycle")] == ([severity] if severity else [])
    assert [(e["of"], e["version"], e["state"]) for e in result["lifecycle"]] == [("declared", version, state)]


def test_driver_lifecycle_fail_blocks_past_branches_only():
    past = run(NOGPU, driver_version="535", today=TODAY, driver_lifecycle="fail")
    assert problems(past, "driver_lifecycle") == [
        (
            "blocking",
            "driver_version 535 is on a branch past its end of life: R535: long-term support branch, end of life "
            "June 2026 (past on 2026-12-01); CUDA 12 at most",
        )
    ]
    assert past["ok"] is False
    # a branch the table does not have stays a warning: nothing is known to block on
    unknown = run(NOGPU, driver_version="630", today=TODAY, driver_lifecycle="fail")
    assert problems(unknown, "driver_lifecycle") == [
        (
            "warning",
            "driver_version 630: R630: not in the collection's driver lifecycle table (read 2026-12-03): its support "
            "and end of life are unknown",
        )
    ]
    assert run(NOGPU, driver_version="595", today=TODAY, driver_lifecycle="fail")["checks"]["driver_lifecycle"] == {
        "outcome": "pass",
        "detail": "R595: production branch, end of life March 2027 (supported on 2026-12-01)",
    }


def test_driver_lifecycle_judges_the_installed_and_the_declared_branch_of_a_preinstalled_node():
    result = run(H200, driver_version="570", driver_method="preinstalled", container_runtime="none", today=TODAY)
    assert [(e["of"], e["version"], e["state"]) for e in result["lifecycle"]] == [
        ("installed", "580.159.04", "supported"),
        ("declared", "570", "past"),
    ]
    assert problems(result, "driver_lifecycle") == [
        (
            "warning",
            "driver_version 570 is on a branch past its end of life: R570: production branch, end of life "
            "February 2026 (past on 2026-12-01)",
        )
    ]
    # same branch declared and installed: judged once, as installed
    same = run(H200, driver_version="580", driver_method="preinstalled", container_runtime="none", today=TODAY)
    assert [(e["of"], e["version"]) for e in same["lifecycle"]] == [("installed", "580.159.04")]


def test_driver_lifecycle_of_the_package_method_judges_what_it_will_install():
    # the L40S host has 550.163.01 from packages; driver_method package replaces it with the declared 580
    result = run(L40S, driver_version="580", container_runtime="none", today=TODAY)
    assert [(e["of"], e["version"], e["state"]) for e in result["lifecycle"]] == [("declared", "580", "supported")]


def test_driver_lifecycle_fix_offers_only_branches_the_gpus_take():
    (fix,) = [p["fix"] for p in run(P100, driver_version="535", today=TODAY, container_runtime="none")["problems"]
              if p["rule"] == "driver_lifecycle"]
    assert fix.startswith("Move the node to a supported branch for its GPUs: R580 (long-term support branch until June 2028). ")
    (fix,) = [p["fix"] for p in run(B200, driver_version="570.172.08", today=TODAY, container_runtime="none")["problems"]
              if p["rule"] == "driver_lifecycle"]
    assert "R620 (long-term support branch until September 2029), R595 (production branch until March 2027), R580" in fix


def test_driver_lifecycle_without_a_date_is_skipped_and_still_says_the_branch():
    result = run(NOGPU, driver_version="535")
    assert result["checks"]["driver_lifecycle"] == {"outcome": "skipped", "detail": "no date to compare end of life with"}
    assert [e["state"] for e in result["lifecycle"]] == ["not_compared"]
    assert run(NOGPU, driver_method="operator", today=TODAY)["checks"]["driver_lifecycle"]["detail"] == (
        "no driver version to judge"
    )


def test_driver_lifecycle_refuses_a_bad_mode_and_a_bad_date():
    with pytest.raises(GpuFleetError, match="driver_lifecycle: 'block' is not a mode \\(expected warn or fail\\)"):
        run(NOGPU, driver_version="580", today=TODAY, driver_lifecycle="block")
    with pytest.raises(GpuFleetError, match=r"today: '2026-02-30' is not a date"):
        run(NOGPU, driver_version="580", today="2026-02-30")


def test_warning_lines_are_the_warnings_not_waived():
    result = run(NOGPU, driver_version="535", today=TODAY, cuda_versions=["12.4"])
    lines = pf.warning_lines(result)
    assert [line.split("]")[0] for line in lines] == [
        "preflight [cuda_driver", "preflight [driver_lifecycle", "preflight [security_floor"]
    # Debian 12's containerd 1.6.20~ds1: the 1.6 line's end of life was 2025-08-23
    assert "installed containerd 1.6.20~ds1: the 1.6 line's end of life was 2025-08-23" in lines[2]
    waived = run(NOGPU, driver_version="535", today=TODAY, waive=["driver_lifecycle", "security_floor"])
    assert pf.warning_lines(waived) == []


# --- security_floor: the table of common/security.py on the same date ----------------------------


def test_security_floor_passes_naming_what_it_judged_and_refuses_an_unknown_mode():
    result = run(H200, driver_version="580.178.04", driver_method="package", container_runtime="none", today=TODAY,
                 waive=["driver_not_package_owned", "driver_drift"])
    assert result["checks"]["security_floor"] == {
        "outcome": "pass",
        "detail": "declared 580.178.04: at or above every security floor (table read 2026-12-03)",
    }
    assert [e["state"] for e in result["security"]] == ["ok"]
    with pytest.raises(GpuFleetError, match="security_floors: 'loud' is not a mode \\(expected warn or fail\\)"):
        run(H200, **dict(GOOD[H200], security_floors="loud"))


def test_security_floor_is_skipped_with_nothing_to_judge():
    result = run(NOGPU, driver_version="580", driver_method="package", container_runtime="none",
                 edit=lambda facts: facts["container"]["containerd"].update(installed=False))
    assert result["checks"]["security_floor"] == {
        "outcome": "skipped",
        "detail": "no driver release (a branch alone installs its newest), toolkit or containerd version to judge",
    }


def test_security_floor_judges_the_declared_toolkit_instead_of_the_installed_one():
    l40s = "debian12-l40s-x2-package"  # toolkit 1.17.8-1 installed
    args = dict(driver_version="580", driver_method="package", container_runtime="docker", today=TODAY,
                waive=["driver_not_package_owned", "kernel_headers"])
    installed = [e for e in run(l40s, **args)["security"] if e["versions"] == ["1.17.8-1"]]
    assert [(e["of"], e["bulletins"]) for e in installed] == [("installed", ["nvidia-5850"])]
    declared = run(l40s, toolkit_version="1.20.0-1", **args)["security"]
    assert [(e["of"], e["versions"], e["state"]) for e in declared if e["versions"] == ["1.20.0-1"]] == [
        ("declared", ["1.20.0-1"], "ok")]
    old = [p["message"] for p in run(l40s, toolkit_version="1.17.7-1", **args)["problems"] if p["rule"] == "security_floor"]
    assert old[0].startswith("declared Container Toolkit 1.17.7-1 is below its security floor 1.19.1: NVIDIA security "
                             "bulletin 5659 (Container Toolkit, July 2025: CVE-2025-23266, CVE-2025-23267); NVIDIA security "
                             "bulletin 5850 (Container Toolkit, June 2026: CVE-2026-24260); install 1.19.1 or later")
