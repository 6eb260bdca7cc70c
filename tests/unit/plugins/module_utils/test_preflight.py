"""Tests of module_utils/discovery/preflight.py: every rule passes on one case and fails on another.

The facts are those of the host captures (tests/unit/fixtures/hosts), replayed by
``CaptureHost``; a case that needs a host we have no capture of edits a copy of them.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import preflight as pf
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.test_gpu_facts import fixture_facts

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


def test_h200_capture_passes_cleanly():
    result = run(H200, **GOOD[H200])
    assert result["problems"] == []
    assert result["msg"] == "1 GPU: 0 blocking, 0 warnings, 0 waived"
    assert result["resolved"] == {
        "driver_method": "preinstalled",
        "driver_flavor": "open",
        "driver_version": "580.159.04",
        "driver_version_source": "installed",
    }
    assert set(result["checks"]) == set(pf.RULE_IDS)
    assert outcome(result, "cuda_driver") == "pass"
    assert result["checks"]["cuda_driver"]["detail"] == "CUDA 12.4 needs 550.54.14; CUDA 13.0 needs 580.65.06"
    assert outcome(result, "kernel_headers") == "skipped"


def test_no_gpu_skips_the_gpu_rules_only():
    result = run(NOGPU, with_headers, driver_version="580", cuda_versions=["13.0"])
    assert result["ok"] is True
    assert result["gpu_count"] == 0
    assert result["msg"] == "no NVIDIA GPU on this host, desired state checked: 0 blocking, 0 warnings, 0 waived"
    assert result["problems"] == []
    for rule in pf.NO_GPU_SKIPPED:
        assert outcome(result, rule) == "skipped"
        assert result["checks"][rule]["detail"] == "no NVIDIA GPU on this host"
    assert outcome(result, "os_supported") == "pass"
    assert outcome(result, "cuda_driver") == "pass"


def test_no_gpu_still_fails_a_desired_state_that_cannot_work():
    # What the molecule scenario `discover` runs on its Debian containers.
    result = run(NOGPU, driver_version="535.261.03", driver_method="preinstalled", cuda_versions=["12.4", "13.0"])
    assert result["ok"] is False
    assert result["msg"] == "no NVIDIA GPU on this host, desired state checked: 2 blocking, 1 warning, 0 waived"
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
            "Ubuntu 22.04/24.04, RHEL/Rocky/AlmaLinux 8/9)",
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
    assert exc.value.msg == (
        "preflight: 2 blocking problems: "
        "[gpu_open_modules] the Volta GPU GV100GL [Tesla V100 SXM2 16GB] at 0000:00:1e.0 cannot be driven by the "
        "open kernel modules; "
        "[gpu_driver_branch] the Volta GPU GV100GL [Tesla V100 SXM2 16GB] at 0000:00:1e.0 is not supported by "
        "drivers after R580; driver_version 590 is R590"
    )
    assert exc.value.details["problems"] == result["problems"]
    assert exc.value.details["checks"] == result["checks"]
    assert exc.value.details["ok"] is False


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
        assert problem["rule"] in pf.RULE_IDS
        assert problem["reason"] and problem["fix"]
    order = [pf.RULE_IDS.index(p["rule"]) for p in result["problems"]]
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


def test_operator_method_warns_about_a_host_driver():
    result = run(H200, driver_version="580", driver_method="operator", container_runtime="none")
    assert problems(result, "driver_not_package_owned") == [
        (
            "warning",
            "a host driver is present (nvidia-smi at /usr/local/nvidia/bin/nvidia-smi, kernel module "
            "580.159.04 loaded) and driver_method is operator",
        )
    ]
    assert result["ok"] is True


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
    for rule in pf.FABRIC_MANAGER_RULES:
        assert outcome(result, rule) == "skipped"
        assert result["checks"][rule]["detail"] == detail


# --- the steps of the rules ----------------------------------------------------------------------


def test_driver_whereabouts_names_what_shows_of_the_driver():
    driver = {"nvidia_smi": {"path": "/usr/bin/nvidia-smi"}, "loaded": True, "version": "580.95.05"}
    assert pf._driver_whereabouts(driver) == "nvidia-smi at /usr/bin/nvidia-smi, kernel module 580.95.05 loaded"
    assert pf._driver_whereabouts({"installed": {"state": "ok", "version": "550.1"}}) == "kernel module 550.1 installed"
    assert pf._driver_whereabouts({}) == "driver files present"


def test_driver_drift_lists_version_and_flavour():
    installed = pf.versions.parse_driver_version("580.95.05")
    assert pf._driver_drift(installed, "open", pf.versions.parse_driver_version("575"), "proprietary") == [
        "version 580.95.05, declared 575", "flavour open, declared proprietary"]
    assert pf._driver_drift(installed, "open", pf.versions.parse_driver_version("580"), "auto") == []
    assert pf._driver_drift(None, None, None, "open") == []


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
    assert pf._fabric_manager_not_checked(switches, fm, method) == why


def test_driver_minimums_are_the_architectures_and_the_products():
    assert pf._driver_minimums("Hopper", 0x2335) == [("525", "Hopper GPUs"), ("550", "H200")]
    assert pf._driver_minimums("Ada Lovelace", 0x26B9) == []


def test_unknown_waived_rules_are_refused():
    pf._check_waive(["secure_boot"])
    pf._check_waive(None)
    with pytest.raises(GpuFleetError, match="^waive: unknown rule 'nope' "):
        pf._check_waive(["secure_boot", "nope"])
