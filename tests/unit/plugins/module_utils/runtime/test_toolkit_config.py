"""Tests of runtime/toolkit_config.py: the isolation pair in the toolkit's config.toml.

The file is tests/unit/fixtures/toolkit_config/config-1.20.toml (see its README); the other cases
are derived from it here.
"""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import edit, toolkit_config as tc
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.common.fakes import FakeModule

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "..", "..", "fixtures", "toolkit_config")
ENVVAR, VOLUMES = tc.ENVVAR_KEY, tc.VOLUME_MOUNTS_KEY


def shipped():
    with open(os.path.join(FIXTURES, "config-1.20.toml"), encoding="utf-8") as handle:
        return handle.read()


def data(text):
    return edit.toml_data(text)


def test_isolation_off_is_set_and_the_rest_of_the_file_kept():
    before = shipped()
    after, warnings = tc.plan_isolation(before, tc.CONFIG_PATH, "present")
    assert warnings == []
    values = data(after)
    assert values[ENVVAR] is False and values[VOLUMES] is True
    assert tc.isolation_of(values)["isolated"] is True and tc.isolation_of(data(before))["isolated"] is False
    # every other key and every comment line is still there, in order
    kept = before.splitlines()
    assert [line for line in after.splitlines() if line in kept] == kept
    assert {k: v for k, v in values.items() if k not in (ENVVAR, VOLUMES)} == data(before)


def test_already_isolated_is_no_change():
    first, unused = tc.plan_isolation(shipped(), tc.CONFIG_PATH, "present")
    again, unused = tc.plan_isolation(first, tc.CONFIG_PATH, "present")
    assert again == first


def test_set_by_the_site_itself_is_no_change_and_nothing_recorded():
    text = "%s = false  # our policy\n%s = true\n\n[nvidia-container-runtime]\nmode = \"auto\"\n" % (ENVVAR, VOLUMES)
    after, unused = tc.plan_isolation(text, tc.CONFIG_PATH, "present")
    assert after == text and tc.read_record(after) == {}
    # and absent leaves the site's own settings alone
    assert tc.plan_isolation(text, tc.CONFIG_PATH, "absent")[0] == text


def test_absent_restores_the_file_byte_for_byte():
    before = shipped()
    after, unused = tc.plan_isolation(before, tc.CONFIG_PATH, "present")
    assert tc.plan_isolation(after, tc.CONFIG_PATH, "absent")[0] == before


def test_absent_puts_back_a_value_the_site_had_with_its_comment_position():
    before = "%s = true # the site's\n\n[nvidia-container-cli]\nload-kmods = true\n" % ENVVAR
    after, unused = tc.plan_isolation(before, tc.CONFIG_PATH, "present")
    assert data(after)[ENVVAR] is False
    assert tc.read_record(after)["keys"][0] == {"path": [ENVVAR], "raw": "true", "set": False}
    assert tc.plan_isolation(after, tc.CONFIG_PATH, "absent")[0] == before


def test_absent_leaves_a_key_changed_by_hand_since_and_warns():
    after, unused = tc.plan_isolation(shipped(), tc.CONFIG_PATH, "present")
    edited = after.replace("%s = true" % VOLUMES, "%s = false" % VOLUMES)
    restored, warnings = tc.plan_isolation(edited, tc.CONFIG_PATH, "absent")
    assert ENVVAR not in data(restored) and data(restored)[VOLUMES] is False
    assert warnings == ["%s was changed after the module set it; left as it is" % VOLUMES]


def test_a_file_created_for_the_keys_alone_is_removed_by_absent():
    created, unused = tc.plan_isolation(None, tc.CONFIG_PATH, "present")
    assert data(created) == {ENVVAR: False, VOLUMES: True}
    assert tc.plan_isolation(created, tc.CONFIG_PATH, "absent")[0] is None
    assert tc.plan_isolation(None, tc.CONFIG_PATH, "absent") == (None, [])


@pytest.mark.parametrize("value", ['"false"', "0", "[]"])
def test_a_key_that_is_not_a_boolean_is_refused_by_name(value):
    text = "%s = %s\n" % (ENVVAR, value)
    with pytest.raises(GpuFleetError) as error:
        tc.plan_isolation(text, tc.CONFIG_PATH, "present")
    assert "%s in %s is %s, not a boolean" % (ENVVAR, tc.CONFIG_PATH, value) in error.value.msg


@pytest.mark.parametrize("text, mode", [("", "auto"), ('[nvidia-container-runtime]\nmode = "legacy"\n', "legacy"),
                                        ('[nvidia-container-runtime]\nmode = "cdi"\n', "cdi")])
def test_runtime_mode(text, mode):
    assert tc.runtime_mode(data(text)) == mode


def test_isolation_of_reads_the_toolkits_defaults_for_missing_keys():
    assert tc.isolation_of({}) == {"envvar_when_unprivileged": True, "as_volume_mounts": False, "isolated": False}
    assert tc.isolation_of({ENVVAR: False}) == {"envvar_when_unprivileged": False, "as_volume_mounts": False, "isolated": False}


def test_converge_check_mode_then_real_then_again(tmp_path):
    root = tmp_path / "host"
    config = root / "etc" / "nvidia-container-runtime" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(shipped())
    (tmp_path / "tmp").mkdir()
    host = Host(str(root), runner=lambda argv, env=None: (127, "", ""), kernel_root=str(root), module=FakeModule(tmp_path / "tmp"))
    params = {"path": tc.CONFIG_PATH, "isolate_unprivileged": True}
    checked = tc.converge(host, params, check_mode=True, want_diff=True)
    assert checked["changed"] is True and config.read_text() == shipped()
    assert checked["isolation"]["isolated"] is True and checked["diff"]["after"].count(ENVVAR) == 3
    done = tc.converge(host, params)
    assert done["changed"] is True and data(config.read_text())[ENVVAR] is False
    assert tc.converge(host, params, check_mode=True)["changed"] is False
    assert tc.converge(host, params)["changed"] is False
    read_only = tc.converge(host, {"path": tc.CONFIG_PATH, "isolate_unprivileged": None})
    assert read_only["changed"] is False and read_only["mode"] == "auto" and "not managed" in read_only["msg"]
    undone = tc.converge(host, {"path": tc.CONFIG_PATH, "isolate_unprivileged": False})
    assert undone["changed"] is True and config.read_text() == shipped()


def _host(tmp_path):
    root = tmp_path / "host"
    (root / "etc" / "nvidia-container-runtime").mkdir(parents=True)
    (tmp_path / "tmp").mkdir()
    return root, Host(str(root), runner=lambda argv, env=None: (127, "", ""), kernel_root=str(root),
                      module=FakeModule(tmp_path / "tmp"))


def test_the_undo_of_a_file_the_module_created_removes_it(tmp_path):
    root, host = _host(tmp_path)
    assert tc.converge(host, {"path": tc.CONFIG_PATH, "isolate_unprivileged": True})["changed"]
    undone = tc.converge(host, {"path": tc.CONFIG_PATH, "isolate_unprivileged": False})
    assert undone["changed"] and not undone["exists"] and not (root / "etc/nvidia-container-runtime/config.toml").exists()


@pytest.mark.parametrize("record", [
    {"keys": [1]},
    {"keys": [{"path": [], "raw": "x"}]},
    {"keys": [{"path": [ENVVAR, "a"], "raw": "1", "set": 1}]},
    {"keys": "x"},
    {"keys": [{"path": [ENVVAR], "raw": 5}]},
    {"keys": [], "created": "yes"},
])
@pytest.mark.parametrize("state", ["present", "absent"])
def test_a_damaged_record_is_refused_by_file(record, state):
    text = "# %s %s\n%s = false\n%s = true\n" % (tc.RECORD_MARK, json.dumps(record), ENVVAR, VOLUMES)
    try:
        tc.plan_isolation(text, tc.CONFIG_PATH, state)
    except GpuFleetError as error:
        assert error.msg.startswith("%s: the state comment of gpufleet.nvidia.toolkit_config" % tc.CONFIG_PATH)


@pytest.mark.parametrize("text", [
    "a = 1\na = 2\n",
    "[x]\n[x]\n",
    "x = \"\"\"\n",
])
def test_a_file_tomlkit_cannot_read_is_refused_by_file(tmp_path, text):
    root, host = _host(tmp_path)
    (root / "etc/nvidia-container-runtime/config.toml").write_text(text)
    for wanted in (True, False, None):
        with pytest.raises(GpuFleetError) as error:
            tc.converge(host, {"path": tc.CONFIG_PATH, "isolate_unprivileged": wanted})
        assert tc.CONFIG_PATH in error.value.msg
