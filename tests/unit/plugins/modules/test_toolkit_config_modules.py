"""Tests of the toolkit_config and dev_char_symlinks modules: their documentation is their argument
spec, and main() runs the module_utils flow on the node's files (the host's paths patched to a
tree under tmp_path) with check mode and diff."""

from __future__ import annotations

import os
from unittest import mock

import pytest
import yaml

from ansible.module_utils import basic

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as host_lib
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import toolkit_config as tc
from ansible_collections.gpufleet.nvidia.plugins.modules import dev_char_symlinks, toolkit_config
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.utils import AnsibleFailJson, run_module

OPTION_KEYS = ("type", "default", "choices", "elements")


def captured_spec(module):
    """The argument_spec (and required_if) that module.main() builds AnsibleModule with."""
    seen = {}

    def init(self, argument_spec, **kwargs):
        seen.update(spec=argument_spec, required_if=kwargs.get("required_if"))
        raise SystemExit(0)

    with mock.patch.object(basic.AnsibleModule, "__init__", init), pytest.raises(SystemExit):
        module.main()
    return seen


@pytest.mark.parametrize("module", [toolkit_config, dev_char_symlinks])
def test_the_documentation_is_the_argument_spec(module):
    documented = yaml.safe_load(module.DOCUMENTATION)["options"]
    spec = captured_spec(module)["spec"]
    assert sorted(documented) == sorted(spec)
    for name, option in spec.items():
        assert {k: option.get(k) for k in OPTION_KEYS} == {k: documented[name].get(k) for k in OPTION_KEYS}, name
    yaml.safe_load(module.RETURN)
    yaml.safe_load(module.EXAMPLES)


@pytest.fixture
def rooted(tmp_path):
    """Host.for_module gives a Host over tmp_path/host (the module's writes go there)."""
    root = str(tmp_path / "host")
    os.makedirs(root + "/etc/nvidia-container-runtime")
    original = host_lib.Host.for_module.__func__

    def for_module(cls, module, root_arg="/", timeout=None, **kwargs):
        made = original(cls, module, root, timeout, **kwargs)
        made.kernel_root = made.dev_root = root
        return made

    with mock.patch.object(host_lib.Host, "for_module", classmethod(for_module)):
        yield root


def test_toolkit_config_module_check_then_real_then_again(rooted):
    config = rooted + tc.CONFIG_PATH
    with open(config, "w", encoding="utf-8") as handle:
        handle.write('[nvidia-container-runtime]\nmode = "auto"\n')
    args = {"isolate_unprivileged": True, "cdi_enabled": True}
    checked = run_module(toolkit_config, args, check_mode=True, diff=True)
    assert checked["changed"] and checked["isolation"]["isolated"] and tc.ENVVAR_KEY in checked["diff"]["after"]
    with open(config, encoding="utf-8") as handle:
        assert tc.ENVVAR_KEY not in handle.read()
    assert checked["cdi"]["method"] == "module" and checked["cdi"]["unit"] is None
    assert run_module(toolkit_config, args)["changed"]
    assert not run_module(toolkit_config, args)["changed"]


def test_toolkit_config_module_refuses_the_toolkit_source_without_its_units(rooted):
    with pytest.raises(AnsibleFailJson) as failed:
        run_module(toolkit_config, {"cdi_enabled": True, "cdi_source": "toolkit"})
    assert "nvidia-cdi-refresh.path" in failed.value.result["msg"]


def test_dev_char_symlinks_module_on_a_node_that_is_not_exposed(rooted):
    result = run_module(dev_char_symlinks, {"toolkit_version": "1.20.0-1"}, check_mode=True, diff=True)
    assert not result["changed"] and not result["needed"] and result["cgroup_driver"] == "cgroupfs"
    assert result["diff"][0]["before"] == result["diff"][0]["after"] == ""


def test_dev_char_symlinks_module_needs_the_toolkit_version_for_auto(rooted):
    with pytest.raises(AnsibleFailJson) as failed:
        run_module(dev_char_symlinks, {})
    assert "toolkit_version" in failed.value.result["msg"]
