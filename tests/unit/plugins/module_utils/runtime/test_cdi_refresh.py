"""Tests of runtime/cdi_refresh.py: who keeps the CDI spec current, when it is written again, and the toolkit's units.

The units' state is what systemd 252 printed for them (tests/unit/fixtures/cdi/README.md), on cdi_node.py's node.

The host trees are built under tmp_path; the spec texts are written for the test (only their
``libcuda.so.<version>`` mount and the module's header line are read here).
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi, cdi_refresh as cr
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.cdi_node import (  # pylint: disable=unused-import
    PATH_UNIT,
    SERVICE,
    node,
)

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
        ("auto", {"unit": None}, False, False, "module", True, "runs nvidia-ctk cdi generate on every run"),
        ("auto", {}, True, False, "toolkit", True, "the driver changed in this run"),
        ("auto", {"toolkit_spec_exists": False, "toolkit_spec": None}, False, False, "toolkit", True, "does not exist"),
        ("auto", {"toolkit_spec": "580.95.05"}, False, False, "toolkit", True, "was written for driver 580.95.05, the loaded driver is 580.159.04"),
        ("auto", {}, True, True, "toolkit", False, "waits for a reboot"),
        ("module", {}, False, False, "module", True, "runs nvidia-ctk cdi generate on every run"),
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
    assert found["output"] == (cdi.TOOLKIT_SPEC if method == "toolkit" else cr.MODULE_SPEC)


def test_the_modules_output_is_where_cdi_spec_writes():
    assert cr.decide(True, "module", state(), module_output="/etc/cdi/gpus.json")["output"] == "/etc/cdi/gpus.json"
    assert cr.decide(True, "toolkit", state(), module_output="/etc/cdi/gpus.json")["output"] == cdi.TOOLKIT_SPEC


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


def test_the_loaded_driver_from_sys_when_proc_has_none(tmp_path):
    host = _tree(str(tmp_path), {"/sys/module/nvidia/version": LOADED + "\n"})
    assert cr.read_state(host)["loaded"] == LOADED


@pytest.mark.parametrize("state, problems", [
    ("show-healthy.txt", []),
    ("show-start-limit-hit.txt", [
        "%s failed (Result=unit-start-limit-hit, NRestarts=0): it no longer starts the refresh when the driver or the "
        "toolkit changes" % PATH_UNIT,
        "%s failed (Result=exit-code, NRestarts=5)" % SERVICE]),
    ("show-after-first-failure.txt", ["%s keeps failing and restarting (Result=exit-code, NRestarts=0)" % SERVICE]),
    ("show-loaded-never-started.txt", ["%s is inactive: the spec is not refreshed when the driver or the toolkit changes" % PATH_UNIT]),
    ("show-after-reset-failed.txt", ["%s is inactive: the spec is not refreshed when the driver or the toolkit changes" % PATH_UNIT]),
])
def test_the_units_verdicts(node, state, problems):
    node.units = state
    assert cr.check_units(cr.read_units(node.host())) == problems
    assert node.calls == [["systemctl", "show", "-p", cr.UNIT_PROPERTIES, SERVICE, PATH_UNIT]]


def test_units_that_are_not_installed_are_named(node):
    node.units = "show-not-installed.txt"
    with pytest.raises(GpuFleetError) as error:
        cr.read_units(node.host())
    assert "systemd has no %s and no %s (LoadState not-found, not-found)" % (PATH_UNIT, SERVICE) in error.value.msg
    assert "1.18 or later" in error.value.msg


def test_units_on_a_node_without_systemd(node):
    node.units = None
    with pytest.raises(GpuFleetError) as error:
        cr.read_units(node.host())
    assert error.value.msg.endswith("(rc 1): System has not been booted with systemd as init system (PID 1). Can't operate.\n"
                                    "Failed to connect to bus: Host is down")


@pytest.mark.parametrize("state, steps", [
    ("show-start-limit-hit.txt", [["systemctl", "reset-failed", PATH_UNIT, SERVICE], ["systemctl", "restart", SERVICE],
                                  ["systemctl", "start", PATH_UNIT]]),
    # reset-failed of a unit that is not failed fails (rc 1, "not loaded"): it is left out
    ("show-loaded-never-started.txt", [["systemctl", "restart", SERVICE], ["systemctl", "start", PATH_UNIT]]),
    ("show-healthy.txt", [["systemctl", "restart", SERVICE]]),
])
def test_the_repair(node, state, steps):
    node.units = state
    host = node.host()
    assert cr.repair_units(host, cr.read_units(host)) == [" ".join(s) for s in steps]
    assert node.calls[1:] == steps


def test_a_repair_that_fails_says_where_to_look(node):
    node.units, node.restart_fails = "show-start-limit-hit.txt", True
    host = node.host()
    with pytest.raises(GpuFleetError) as error:
        cr.repair_units(host, cr.read_units(host))
    assert error.value.msg == (
        "cdi_spec: `systemctl restart %s` failed (rc 1): Job for %s failed because the control process exited with error "
        "code.\nSee \"systemctl status %s\" and \"journalctl -xeu %s\" for details. (journalctl -u %s says why)"
        % ((SERVICE,) * 5))
