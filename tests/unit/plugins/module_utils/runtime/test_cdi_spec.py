"""Tests of runtime/cdi_spec.py: the argv of ``nvidia-ctk cdi generate``, its spec and its failures, the options.

nvidia-ctk's answers are the recorded ones of cdi_node.py's node (tests/unit/fixtures/cdi/README.md).
"""

from __future__ import annotations

import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi, cdi_spec
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.cdi_node import (  # pylint: disable=unused-import
    SPEC,
    VERSION,
    fixture,
    node,
    params,
)


@pytest.mark.parametrize("strategy", sorted(cdi_spec.DEVICE_NAME_STRATEGIES))
def test_every_flag_passed_is_one_nvidia_ctk_1_20_has(node, strategy):
    argv = cdi_spec.generate_argv(params(node, device_name_strategy=strategy, disabled_hooks=["all"]), "/tmp/x.yaml")
    helped = set(re.findall(r"--[a-z][a-z-]+", fixture("nvidia-ctk", "cdi-generate-help.txt")))
    assert argv[1:3] == ["cdi", "generate"]
    assert {a.split("=")[0] for a in argv[3:]} <= helped
    assert [a for a in argv if a.startswith("--device-name-strategy=")] == [
        "--device-name-strategy=%s" % s for s in cdi_spec.DEVICE_NAME_STRATEGIES[strategy]]


def test_the_spec_is_nvidia_ctks_with_the_modules_header(node):
    text = cdi_spec.generate(node.host(), params(node), "/etc/cdi/nvidia.yaml")
    assert text == "---\n%s (driver %s); local changes are overwritten.\n%s" % (cdi.HEADER, VERSION, SPEC[len("---\n"):])
    assert yaml.safe_load(text) == yaml.safe_load(SPEC)
    argv = node.calls[0]
    assert argv[0] == node.local("/usr/bin/nvidia-ctk") and argv[3].startswith("--output=%s/cdi-" % node.root)


def test_a_json_spec_is_passed_on_as_nvidia_ctk_wrote_it(node):
    assert cdi_spec.generate(node.host(), params(node), "/etc/cdi/nvidia.json") == SPEC
    assert node.calls[0][3].endswith("/nvidia.json")  # nvidia-ctk takes the format from the name


def test_nvidia_ctk_failing_is_reported_with_its_error(node):
    node.generate = "no-nvml"
    with pytest.raises(GpuFleetError) as error:
        cdi_spec.generate(node.host(), params(node), "/etc/cdi/nvidia.yaml")
    assert error.value.msg.startswith("cdi_spec: `%s cdi generate --output=" % node.local("/usr/bin/nvidia-ctk"))
    assert error.value.msg.endswith(
        "failed (rc 1): failed to generate CDI spec: failed to create device CDI specs: failed to construct device spec "
        "generators: failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND")
    assert error.value.details["rc"] == 1


def test_nvidia_ctk_missing_is_named(node):
    os.remove(node.local("/usr/bin/nvidia-ctk"))
    with pytest.raises(GpuFleetError) as error:
        cdi_spec.generate(node.host(), params(node), "/etc/cdi/nvidia.yaml")
    assert "nvidia-ctk is not installed" in error.value.msg and "nvidia-container-toolkit-base" in error.value.msg
    assert node.calls == []


@pytest.mark.parametrize(
    "path, message",
    [
        ("etc/cdi/nvidia.yaml", "must be an absolute path"),
        ("/etc/cdi/nvidia.yml", "must end in .yaml or .json"),
        ("/etc/cdi/../nvidia.yaml", "without '.' or '..' parts"),
    ],
)
def test_check_output_path(path, message):
    with pytest.raises(GpuFleetError) as error:
        cdi_spec.check_output_path(path)
    assert message in error.value.msg
