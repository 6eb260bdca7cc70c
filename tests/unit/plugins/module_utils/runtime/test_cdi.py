"""Tests of runtime/cdi.py: the spec nvidia-ctk writes, and the guard of the spec the container runtimes use (node: cdi_node.py)."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.cdi_node import (  # pylint: disable=unused-import
    BUS,
    NODE_UUID,
    SPEC,
    SPEC_UUID,
    VERSION,
    fixture,
    node,
)


def guard(node, text=SPEC, path="/etc/cdi/nvidia.yaml"):
    return cdi.check_spec(node.host(), path, cdi.parse_spec(text, path), text)


def test_device_names_and_counts_of_nvidia_ctks_spec():
    data = yaml.safe_load(SPEC)
    listed = fixture("nvidia-ctk", "cdi-list-h200.stdout").split()
    assert ["%s=%s" % (cdi.KIND, n) for n in cdi.device_names(data)] == listed
    assert cdi.counts(data) == {"device_nodes": 4, "libraries": 26, "binaries": 5, "firmware": 2, "configs": 2, "ipc": 0,
                                "hooks": 6, "mounts": 35}


def test_spec_driver_version():
    assert cdi.spec_driver_version(SPEC) == VERSION
    assert cdi.spec_driver_version(SPEC.replace(VERSION, "580.95.05")) == "580.95.05"
    assert cdi.spec_driver_version("cdiVersion: 0.5.0\n") is None


def test_without_pyyaml_the_package_to_install_is_named(monkeypatch):
    monkeypatch.setattr(cdi, "HAS_YAML", False)
    with pytest.raises(GpuFleetError) as error:
        cdi.require_yaml()
    assert "python3-yaml (Debian, Ubuntu) or python3-pyyaml (EL)" in error.value.msg


@pytest.mark.parametrize("text", ["devices: [\n", "- a list\n", "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n", "devices: [a]\n",
                                  "devices: [{name: a, containerEdits: [x]}]\n", "devices: []\ncontainerEdits: x\n"])
def test_what_is_not_a_spec_is_refused_by_name(text):
    with pytest.raises(GpuFleetError) as error:
        cdi.parse_spec(text, "/etc/cdi/x.yaml")
    assert error.value.msg.startswith("cdi_spec: /etc/cdi/x.yaml ")


# --- the node as it is ------------------------------------------------------------------------


def test_the_loaded_driver_from_its_version_files(node):
    assert cdi.loaded_driver(node.host()) == VERSION
    os.remove(node.local("/proc/driver/nvidia/version"))
    assert cdi.loaded_driver(node.host()) is None
    node.write("/sys/module/nvidia/version", "580.95.05\n")
    assert cdi.loaded_driver(node.host()) == "580.95.05"


def test_the_gpus_in_proc(node):
    assert cdi.live_gpus(node.host()) == [{"minor": 0, "uuid": NODE_UUID, "bus": BUS}]
    node.write("/proc/driver/nvidia/gpus/%s/information" % BUS, fixture("h200", "gpu-information.txt").replace(
        "GPU Excluded:\t No", "GPU Excluded:\t Yes"))
    assert cdi.live_gpus(node.host()) == []


# --- the guard --------------------------------------------------------------------------------


def test_nvidia_ctks_spec_passes_on_the_node_it_was_written_on(node):
    node.same_gpu()
    assert guard(node) == []


def test_a_gpu_the_node_does_not_have(node):
    """The capture's lease has another H200 than the spec's: the spec would hand out a GPU that is not there."""
    assert guard(node) == ["/etc/cdi/nvidia.yaml names the GPU %s, which this node does not have (its GPUs: %s)"
                           % (SPEC_UUID, NODE_UUID)]


def test_a_gpu_named_by_its_uuid_on_another_node(node):
    node.same_gpu()
    text = SPEC.replace("name: %s\n      containerEdits:\n        deviceNodes:\n            - path: /dev/nvidia0" % SPEC_UUID,
                        "name: %s\n      containerEdits:\n        deviceNodes:\n            - path: /dev/nvidia1" % SPEC_UUID)
    assert text != SPEC
    node.write("/dev/nvidia1", "")
    node.numbers["/dev/nvidia1"] = (195, 1)
    assert "/etc/cdi/nvidia.yaml gives the GPU %s the nodes /dev/nvidia1, the GPU is /dev/nvidia0" % SPEC_UUID in guard(node, text)


def test_another_loaded_driver(node):
    """Derived: the loaded version replaced; every library the spec mounts is of the old one."""
    node.same_gpu()
    node.write("/proc/driver/nvidia/version", fixture("h200", "nvidia-version.txt").replace(VERSION, "580.95.05"))
    assert guard(node) == ["/etc/cdi/nvidia.yaml was written for driver %s, the loaded driver is 580.95.05 (every "
                           "library it mounts is named by the version)" % VERSION]


def test_a_missing_device_node(node):
    node.same_gpu()
    os.remove(node.local("/dev/nvidia-uvm-tools"))
    assert guard(node) == ["/etc/cdi/nvidia.yaml names the device node %s, which is not a character device on this node"
                           % node.local("/dev/nvidia-uvm-tools")]


def test_a_device_node_numbered_again(node):
    """Derived: nvidia-uvm got another major at the next load (its major is dynamic)."""
    node.same_gpu()
    node.numbers.update({"/dev/nvidia-uvm": (510, 0), "/dev/nvidia-uvm-tools": (510, 1)})
    assert guard(node) == [
        "/etc/cdi/nvidia.yaml records /dev/nvidia-uvm as 238:0, the node is 510:0 now (the driver numbered it again at load)",
        "/etc/cdi/nvidia.yaml records /dev/nvidia-uvm-tools as 238:1, the node is 510:1 now (the driver numbered it again at load)"]


MIG_DEVICE = """    - name: "0:0"
      containerEdits:
        deviceNodes:
            - path: /dev/nvidia0
              major: 195
              fileMode: 438
              permissions: rwm
            - path: /dev/nvidia-caps/nvidia-cap12
              major: 241
              minor: 12
              fileMode: 256
              permissions: rwm
            - path: /dev/nvidia-caps/nvidia-cap13
              major: 241
              minor: 13
              fileMode: 292
              permissions: rwm
"""


def caps_nodes(node):
    """Derived (README): the caps nodes 241:12 and 241:13 of gpu0/gi1 and gpu0/gi1/ci0 (they stay when the instance goes)."""
    node.write("/proc/driver/nvidia-caps/mig-minors", "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n")
    for minor in (12, 13):
        node.write("/dev/nvidia-caps/nvidia-cap%d" % minor, "")
        node.numbers["/dev/nvidia-caps/nvidia-cap%d" % minor] = (241, minor)


def mig_instance(node):
    """Derived (README): one MIG instance, gpu0/gi1/ci0."""
    node.write("/proc/driver/nvidia/capabilities/gpu0/mig/gi1/ci0/access", "")


def test_mig_layout(node):
    node.same_gpu()
    caps_nodes(node)
    with_mig = SPEC.replace("devices:\n", "devices:\n" + MIG_DEVICE, 1)
    assert guard(node, with_mig) == ["/etc/cdi/nvidia.yaml names MIG device(s) /dev/nvidia-caps/nvidia-cap12 + "
                                     "/dev/nvidia-caps/nvidia-cap13 that this node does not have"]
    mig_instance(node)
    assert guard(node) == ["/etc/cdi/nvidia.yaml has no device for the MIG instance(s) /dev/nvidia-caps/nvidia-cap12 + "
                           "/dev/nvidia-caps/nvidia-cap13"]
    assert guard(node, with_mig) == []


def test_the_spec_the_runtimes_use(node):
    """/var/run/cdi before /etc/cdi; another kind, or a file that is no spec, is no rival."""
    etc, run = (os.path.join(d, "nvidia.yaml") for d in cdi.SPEC_DIRS)
    node.write(etc[len(node.root):], SPEC)
    node.write(os.path.join(cdi.SPEC_DIRS[0], "other.yaml")[len(node.root):], SPEC.replace("kind: nvidia.com/gpu", "kind: x.com/y"))
    node.write(os.path.join(cdi.SPEC_DIRS[1], "broken.yaml")[len(node.root):], "devices: [\n")
    specs = cdi.nvidia_specs(node.host())
    assert [s[0] for s in specs] == [etc]
    assert cdi.shadowing(specs, etc) == []
    specs = cdi.nvidia_specs(node.host(), {run: SPEC})
    assert [s[0] for s in specs] == [etc, run]
    assert cdi.shadowing(specs, etc) == [run] and cdi.shadowing(specs, run) == []
