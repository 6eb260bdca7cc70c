"""Tests of runtime/cdi_refresh.py: who keeps the CDI spec current, and when it is written again.

The host trees are built under tmp_path; the spec text is the H200 capture nvidia-ctk 1.20 wrote
(/work/shared/reference/golden/h200/nvidia-cdi.yaml, the test skips visibly without it) or a
spec derived from it for another driver version.
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi_refresh as cr

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "shared", "reference", "golden", "h200", "nvidia-cdi.yaml")
LOADED = "580.159.04"
NVRM = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build  (dvs-builder@U22-I3-AE18-23-3)  Mon Sep 29 2025\n"


def state(**values):
    base = {"unit": "/usr/lib/systemd/system/nvidia-cdi-refresh.path", "loaded": LOADED, "toolkit_spec": LOADED,
            "toolkit_spec_exists": True, "module_spec_exists": False, "module_spec_ours": False}
    base.update(values)
    return base


@pytest.mark.parametrize(
    "source, values, driver_changed, reboot, method, refresh, why",
    [
        ("auto", {}, False, False, "toolkit", False, "is current (driver 580.159.04)"),
        ("auto", {"unit": None}, False, False, "module", True, "builds the spec on every run"),
        ("auto", {}, True, False, "toolkit", True, "the driver changed in this run"),
        ("auto", {"toolkit_spec_exists": False, "toolkit_spec": None}, False, False, "toolkit", True, "does not exist"),
        ("auto", {"toolkit_spec": "580.95.05"}, False, False, "toolkit", True, "was written for driver 580.95.05, the loaded driver is 580.159.04"),
        ("auto", {}, True, True, "toolkit", False, "waits for a reboot"),
        ("module", {}, False, False, "module", True, "builds the spec on every run"),
        ("module", {}, True, True, "module", False, "the next run after it"),
        ("toolkit", {}, False, False, "toolkit", False, "is current"),
        # CDI is on by default: a node with no driver loaded (prepared without GPU, an image build)
        # has no spec to write, whichever way, and is not failed for it
        ("auto", {"loaded": None, "toolkit_spec_exists": False, "toolkit_spec": None}, False, False, "toolkit", False,
         "no NVIDIA driver is loaded"),
        ("auto", {"unit": None, "loaded": None}, True, False, "module", False, "no NVIDIA driver is loaded"),
    ],
)
def test_the_refresh_decision(source, values, driver_changed, reboot, method, refresh, why):
    found = cr.decide(True, source, state(**values), driver_changed, reboot)
    assert (found["method"], found["refresh"]) == (method, refresh)
    assert why in found["reason"]
    assert found["output"] == (cr.TOOLKIT_SPEC if method == "toolkit" else cr.MODULE_SPEC)


def test_the_modules_output_is_where_cdi_spec_writes():
    assert cr.decide(True, "module", state(), module_output="/etc/cdi/gpus.json")["output"] == "/etc/cdi/gpus.json"
    assert cr.decide(True, "toolkit", state(), module_output="/etc/cdi/gpus.json")["output"] == cr.TOOLKIT_SPEC


def test_cdi_not_enabled_does_nothing():
    assert cr.decide(False, "toolkit", state(unit=None)) == {
        "enabled": False, "method": "none", "refresh": False, "output": None, "remove_module_spec": False,
        "reason": "CDI is not enabled"}


def test_the_toolkit_asked_for_without_its_units_is_refused_by_name():
    with pytest.raises(GpuFleetError) as error:
        cr.decide(True, "toolkit", state(unit=None))
    assert "nvidia-cdi-refresh.path" in error.value.msg and "1.18 or later" in error.value.msg


def test_the_modules_spec_goes_when_the_toolkit_takes_over():
    assert cr.decide(True, "auto", state(module_spec_ours=True, module_spec_exists=True))["remove_module_spec"] is True
    # a spec the site wrote itself at the module's path is not ours to remove
    assert cr.decide(True, "auto", state(module_spec_ours=False, module_spec_exists=True))["remove_module_spec"] is False
    assert cr.decide(True, "module", state(module_spec_ours=True))["remove_module_spec"] is False


def test_spec_driver_version_of_nvidia_ctks_spec():
    if not os.path.isfile(GOLDEN):
        pytest.skip("the H200 capture %s is not beside this checkout" % GOLDEN)
    with open(GOLDEN, encoding="utf-8") as handle:
        text = handle.read()
    assert cr.spec_driver_version(text) == LOADED
    assert cr.spec_driver_version(text.replace(LOADED, "580.95.05")) == "580.95.05"
    assert cr.spec_driver_version("cdiVersion: 0.5.0\n") is None


def _tree(root, files):
    for path, text in files.items():
        os.makedirs(os.path.dirname(root + path), exist_ok=True)
        with open(root + path, "w", encoding="utf-8") as handle:
            handle.write(text)
    return Host(root, runner=lambda argv, env=None: (127, "", ""), kernel_root=root)


def test_read_state_of_a_node_with_the_toolkits_units(tmp_path):
    root = str(tmp_path)
    host = _tree(root, {
        "/usr/lib/systemd/system/nvidia-cdi-refresh.path": "[Path]\n",
        "/usr/lib/systemd/system/nvidia-cdi-refresh.service": "[Service]\n",
        "/proc/driver/nvidia/version": NVRM % LOADED,
        "/var/run/cdi/nvidia.yaml": "hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05\n",
        "/etc/cdi/nvidia.yaml": "---\n# Managed by gpufleet.nvidia.cdi_spec (driver 580.95.05); local changes are overwritten.\n",
    })
    found = cr.read_state(host)
    assert found == {"unit": "/usr/lib/systemd/system/nvidia-cdi-refresh.path", "loaded": LOADED, "toolkit_spec": "580.95.05",
                     "toolkit_spec_exists": True, "module_spec_exists": True, "module_spec_ours": True}
    decided = cr.decide(True, "auto", found)
    assert decided["refresh"] and decided["remove_module_spec"]


def test_read_state_without_units_nor_driver(tmp_path):
    host = _tree(str(tmp_path), {"/lib/systemd/system/nvidia-cdi-refresh.path": "[Path]\n"})  # no .service beside it
    assert cr.read_state(host) == {"unit": None, "loaded": None, "toolkit_spec": None, "toolkit_spec_exists": False,
                                   "module_spec_exists": False, "module_spec_ours": False}
