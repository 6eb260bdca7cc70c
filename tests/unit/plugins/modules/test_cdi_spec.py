"""Tests of the cdi_spec module: check mode, idempotence, diff, mode, removal, the guard, the toolkit's units.

The node is the H200 capture of cdi_node.py (its /proc and /dev under tmp_path, its commands answered
with recorded outputs), reached through ``Host.for_module``.
"""

from __future__ import annotations

import os
import stat
from unittest import mock

import pytest
import yaml

from ansible.module_utils import basic

from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi as cdi_lib
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi_spec as cdi_spec_lib
from ansible_collections.gpufleet.nvidia.plugins.modules import cdi_spec
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.cdi_node import (  # pylint: disable=unused-import
    NODE_UUID,
    SPEC,
    SPEC_UUID,
    VERSION,
    fixture,
    node as cdi_node,
)
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.utils import AnsibleFailJson, run_module


@pytest.fixture
def node(cdi_node, tmp_path):  # pylint: disable=redefined-outer-name
    """(the Node, an output path outside its CDI folders) with the module's host reading that node."""
    cdi_node.same_gpu()
    with mock.patch.object(cdi_spec_lib.Host, "for_module", lambda module, **kwargs: cdi_node.host(module)):
        yield cdi_node, str(tmp_path / "etc" / "cdi" / "nvidia.yaml")


def args(found, output, **extra):
    params = {"output": output, "dev_root": found.root, "nvidia_ctk": found.local("/usr/bin/nvidia-ctk"),
              "nvidia_cdi_hook_path": found.local("/usr/bin/nvidia-cdi-hook")}
    params.update(extra)
    return params


def file_mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def test_present_four_steps(node):
    """Check mode, real run, check mode again, real run again (community.crypto's sequence)."""
    found, output = node
    first = run_module(cdi_spec, args(found, output), check_mode=True)
    assert first["changed"] is True
    assert not os.path.exists(output) and not os.path.exists(os.path.dirname(output))

    second = run_module(cdi_spec, args(found, output))
    assert second["changed"] is True
    assert second["spec"] == first["spec"]
    with open(output, encoding="utf-8") as handle:
        assert yaml.safe_load(handle.read()) == second["spec"]
    assert file_mode(output) == 0o644
    assert file_mode(os.path.dirname(output)) == 0o755

    third = run_module(cdi_spec, args(found, output), check_mode=True)
    fourth = run_module(cdi_spec, args(found, output))
    assert third["changed"] is False and fourth["changed"] is False


def test_returns(node):
    found, output = node
    result = run_module(cdi_spec, args(found, output))
    assert result["path"] == output
    assert result["devices"] == ["0", SPEC_UUID, "all"]
    assert result["driver_version"] == VERSION
    assert result["problems"] == [] and result["repairs"] == []
    assert result["counts"] == {
        "device_nodes": 4, "libraries": 26, "binaries": 5, "firmware": 2, "configs": 2, "ipc": 0, "hooks": 6, "mounts": 35,
    }
    assert result["spec"] == yaml.safe_load(SPEC)


def test_diff_on_create_change_and_delete(node):
    found, output = node
    created = run_module(cdi_spec, args(found, output), diff=True)
    with open(output, encoding="utf-8") as handle:
        text = handle.read()
    assert created["diff"] == {"before": "", "after": text, "before_header": output, "after_header": output}

    unchanged = run_module(cdi_spec, args(found, output), diff=True)
    assert unchanged["changed"] is False and unchanged["diff"]["before"] == unchanged["diff"]["after"] == text

    edited = text.replace("permissions: rwm", "permissions: rw", 1)  # a local change
    with open(output, "w", encoding="utf-8") as handle:
        handle.write(edited)
    changed = run_module(cdi_spec, args(found, output), diff=True, check_mode=True)
    assert changed["changed"] is True
    assert changed["diff"]["before"] == edited and changed["diff"]["after"] == text
    assert read(output) == edited  # check mode left it alone
    assert run_module(cdi_spec, args(found, output))["changed"] is True and read(output) == text

    deleted = run_module(cdi_spec, args(found, output, state="absent"), diff=True)
    assert deleted["diff"] == {"before": text, "after": "", "before_header": output, "after_header": output}


def test_rewrite_keeps_the_files_mode(node):
    found, output = node
    os.makedirs(os.path.dirname(output))
    with open(output, "w", encoding="utf-8") as handle:
        handle.write("cdiVersion: 0.3.0\n")
    os.chmod(output, 0o600)
    result = run_module(cdi_spec, args(found, output))
    assert result["changed"] is True
    assert file_mode(output) == 0o600
    with open(output, encoding="utf-8") as handle:
        assert "nvidia.com/gpu" in handle.read()


def test_mode_option(node):
    found, output = node
    assert run_module(cdi_spec, args(found, output, mode="0640"))["changed"] is True
    assert file_mode(output) == 0o640
    assert run_module(cdi_spec, args(found, output, mode="0640"))["changed"] is False
    # Only the mode differs: changed, and check mode does not touch it.
    assert run_module(cdi_spec, args(found, output, mode="0644"), check_mode=True)["changed"] is True
    assert file_mode(output) == 0o640
    assert run_module(cdi_spec, args(found, output, mode="0644"))["changed"] is True
    assert file_mode(output) == 0o644


def test_absent(node):
    found, output = node
    assert run_module(cdi_spec, args(found, output, state="absent"))["changed"] is False
    run_module(cdi_spec, args(found, output))
    check = run_module(cdi_spec, args(found, output, state="absent"), check_mode=True)
    assert check["changed"] is True and os.path.exists(output)
    removed = run_module(cdi_spec, args(found, output, state="absent"))
    assert removed["changed"] is True and not os.path.exists(output)
    assert removed["devices"] == [] and removed["spec"] == {}
    assert run_module(cdi_spec, args(found, output, state="absent"))["changed"] is False


def test_json_output(node, tmp_path):
    found, _output = node
    output = str(tmp_path / "nvidia.json")
    result = run_module(cdi_spec, args(found, output))
    assert read(output) == SPEC  # as nvidia-ctk wrote it (into a .json file: JSON), no header
    assert found.calls[0][3].endswith("/nvidia.json") and result["spec"] == yaml.safe_load(SPEC)


def test_nvidia_ctk_path_alias(node):
    found, output = node
    params = args(found, output, nvidia_ctk_path="/usr/bin/nvidia-ctk")
    del params["nvidia_cdi_hook_path"]
    run_module(cdi_spec, params)
    assert "--nvidia-cdi-hook-path=/usr/bin/nvidia-ctk" in found.calls[0]


def test_warns_when_the_hook_program_is_missing(node):
    found, output = node
    with mock.patch.object(basic.AnsibleModule, "warn") as warn:
        run_module(cdi_spec, args(found, output, nvidia_cdi_hook_path="/nonexistent/nvidia-cdi-hook"))
    assert "/nonexistent/nvidia-cdi-hook does not exist" in warn.call_args[0][0]


def test_fails_cleanly_when_nvidia_ctk_fails(node):
    """No NVML (nvidia-ctk's recorded answer on a machine without the driver): its error, and nothing written."""
    found, output = node
    found.generate = "no-nvml"
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, args(found, output))
    assert err.value.result["msg"].endswith("failed (rc 1): failed to generate CDI spec: failed to create device CDI specs: "
                                            "failed to construct device spec generators: failed to initialize NVML: "
                                            "ERROR_LIBRARY_NOT_FOUND")
    assert err.value.result["rc"] == 1 and not os.path.exists(output)


def test_fails_cleanly_on_a_bad_output_name(node):
    found, _output = node
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, args(found, "/etc/cdi/nvidia.yml"))
    assert err.value.result["msg"] == (
        "cdi_spec: output '/etc/cdi/nvidia.yml' must end in .yaml or .json (the CDI registry reads only those)"
    )


def test_rejects_an_unknown_hook_name(node):
    found, output = node
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, args(found, output, disabled_hooks=["chmod"]))
    assert "disabled_hooks" in err.value.result["msg"]


def test_a_folder_that_cannot_be_made_fails_in_cdi_specs_words(node):
    found, output = node
    with mock.patch("os.makedirs", side_effect=OSError(30, "Read-only file system")):
        with pytest.raises(AnsibleFailJson) as err:
            run_module(cdi_spec, args(found, output))
    assert err.value.result["msg"] == "cdi_spec: cannot create %s: [Errno 30] Read-only file system" % os.path.dirname(output)
    assert err.value.result["path"] == output


def test_a_temporary_file_that_cannot_be_written_fails_in_cdi_specs_words(node):
    found, output = node
    with mock.patch("tempfile.mkstemp", side_effect=OSError(28, "No space left on device")):
        with pytest.raises(AnsibleFailJson) as err:
            run_module(cdi_spec, args(found, output))
    msg = err.value.result["msg"]
    assert msg.startswith("cdi_spec: cannot write a temporary file in ") and msg.endswith(": [Errno 28] No space left on device")
    assert not os.path.exists(output)


def test_a_spec_that_cannot_be_removed_fails_in_cdi_specs_words(node):
    found, output = node
    run_module(cdi_spec, args(found, output))
    with mock.patch("os.remove", side_effect=OSError(13, "Permission denied")):
        with pytest.raises(AnsibleFailJson) as err:
            run_module(cdi_spec, args(found, output, state="absent"))
    assert err.value.result["msg"] == "cdi_spec: cannot remove %s: [Errno 13] Permission denied" % output
    assert os.path.exists(output)


# A spec's hooks run as root: no mode may let anyone else write it, nor set setuid, setgid or sticky.
BAD_MODES = ["0777", "0666", "0664", "0646", "07777", "04644", "02644", "01644", 0o777, 0o4644, 644, "u=rwx,g=rwx,o=rwx",
             "g+w", "u+s", "0o7777", "rw-r--r--", "99", "", True, 1.5, "0644\n"]


@pytest.mark.parametrize("mode", BAD_MODES, ids=[repr(m) for m in BAD_MODES])
@pytest.mark.parametrize("check_mode", [False, True])
def test_a_mode_that_others_could_write_or_that_sets_special_bits_is_refused_before_anything_is_written(node, mode, check_mode):
    found, output = node
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, args(found, output, mode=mode), check_mode=check_mode)
    assert err.value.result["msg"].startswith("cdi_spec: mode %r is not a file mode" % (mode,)), err.value.result["msg"]
    assert "not writable by the group or the world" in err.value.result["msg"]
    assert not os.path.exists(output) and not os.path.exists(os.path.dirname(output))


def test_a_bad_mode_leaves_an_existing_spec_as_it_was(node):
    found, output = node
    run_module(cdi_spec, args(found, output))
    with open(output, encoding="utf-8") as handle:
        before = handle.read()
    with pytest.raises(AnsibleFailJson):
        run_module(cdi_spec, args(found, output, mode="0777"))
    with open(output, encoding="utf-8") as handle:
        assert handle.read() == before
    assert file_mode(output) == 0o644


@pytest.mark.parametrize("mode, expected", [("0600", 0o600), ("0640", 0o640), (0o644, 0o644), ("u=rw,g=r,o=", 0o640), ("go-r", 0o600),
                                            ("0444", 0o444)])
def test_modes_only_root_can_write_pass(node, mode, expected):
    found, output = node
    assert run_module(cdi_spec, args(found, output, mode=mode))["changed"] is True
    assert file_mode(output) == expected


@pytest.mark.parametrize("option, value", [
    ("output", "etc/cdi/nvidia.yaml"), ("output", "./nvidia.yaml"), ("output", "/etc/cdi/../../tmp/nvidia.yaml"),
    ("nvidia_cdi_hook_path", "nvidia-cdi-hook"), ("nvidia_cdi_hook_path", "bin/nvidia-cdi-hook"),
    ("driver_root", "run/nvidia/driver"), ("dev_root", "dev"),
])
def test_a_relative_path_is_refused_by_name(node, option, value, tmp_path, monkeypatch):
    found, output = node
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, dict(args(found, output), **{option: value}))
    assert err.value.result["msg"].startswith("cdi_spec: %s %r " % (option, value)), err.value.result["msg"]
    assert "absolute" in err.value.result["msg"]
    assert not os.path.exists(output) and not os.listdir(str(tmp_path)) == ["nvidia.yaml"]


# --- the guard --------------------------------------------------------------------------------


def test_a_spec_that_does_not_match_the_node_is_not_written(node):
    """nvidia-ctk's spec names the GPU of the lease it ran on; on the capture's lease that GPU is not there."""
    found, output = node
    found.write("/proc/driver/nvidia/gpus/0000:00:06.0/information", fixture("h200", "gpu-information.txt"))
    for check_mode in (True, False):
        with pytest.raises(AnsibleFailJson) as err:
            run_module(cdi_spec, args(found, output), check_mode=check_mode)
        assert err.value.result["msg"] == (
            "cdi_spec: the CDI spec does not match this node: %s names the GPU %s, which this node does not have (its GPUs: %s)"
            % (output, SPEC_UUID, NODE_UUID))
        assert not os.path.exists(output)


def test_a_spec_of_a_later_folder_is_the_one_guarded(node):
    """/var/run/cdi/nvidia.yaml takes /etc/cdi/nvidia.yaml's devices: named in a warning, and guarded too."""
    found, _output = node
    output, later = (os.path.join(d, "nvidia.yaml") for d in cdi_lib.SPEC_DIRS)
    with open(later, "w", encoding="utf-8") as handle:
        handle.write(SPEC)
    with mock.patch.object(basic.AnsibleModule, "warn") as warn:
        assert run_module(cdi_spec, args(found, output))["changed"] is True
    assert "%s defines devices of %s too, and the container runtimes use %s's" % (later, output, later) in [
        c[0][0] for c in warn.call_args_list]
    with open(later, "w", encoding="utf-8") as handle:
        handle.write(SPEC.replace(VERSION, "580.95.05"))  # derived: written for the driver before
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, args(found, output))
    assert "%s was written for driver 580.95.05, the loaded driver is %s" % (later, VERSION) in err.value.result["msg"]


def test_without_pyyaml_the_module_names_the_package(node, monkeypatch):
    found, output = node
    monkeypatch.setattr(cdi_lib, "HAS_YAML", False)
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, args(found, output))
    assert "install python3-yaml (Debian, Ubuntu) or python3-pyyaml (EL)" in err.value.result["msg"]
    assert run_module(cdi_spec, args(found, output, state="absent"))["changed"] is False  # removing needs no YAML


# --- method toolkit ---------------------------------------------------------------------------


def toolkit(found, **extra):
    return dict(args(found, "/etc/cdi/nvidia.yaml", method="toolkit"), **extra)


def test_toolkit_healthy_units_and_spec_are_left_alone(node):
    found, _output = node
    with open(cdi_lib.TOOLKIT_SPEC, "w", encoding="utf-8") as handle:
        handle.write(SPEC)
    result = run_module(cdi_spec, toolkit(found), diff=True)
    assert result["changed"] is False and result["problems"] == [] and result["repairs"] == []
    assert result["path"] == cdi_lib.TOOLKIT_SPEC and result["devices"] == ["0", SPEC_UUID, "all"]
    assert result["diff"]["before"] == result["diff"]["after"] == SPEC
    assert [c[:2] for c in found.calls] == [["systemctl", "show"]]


def test_toolkit_units_that_hit_their_start_limit_are_repaired(node):
    """The units as systemd left them after five failed starts, and no spec: check mode, repair, again."""
    found, _output = node
    found.units = "show-start-limit-hit.txt"
    check = run_module(cdi_spec, toolkit(found), check_mode=True)
    assert check["changed"] is True and check["repairs"] == []
    assert check["problems"][-1] == "%s does not exist" % cdi_lib.TOOLKIT_SPEC
    assert [c[:2] for c in found.calls] == [["systemctl", "show"]] and not os.path.exists(cdi_lib.TOOLKIT_SPEC)

    result = run_module(cdi_spec, toolkit(found), diff=True)
    assert result["changed"] is True and result["problems"] == check["problems"]
    assert result["repairs"] == ["systemctl reset-failed nvidia-cdi-refresh.path nvidia-cdi-refresh.service",
                                 "systemctl restart nvidia-cdi-refresh.service", "systemctl start nvidia-cdi-refresh.path"]
    assert result["diff"]["before"] == "" and result["diff"]["after"] == SPEC

    again = run_module(cdi_spec, toolkit(found))
    assert again["changed"] is False and again["repairs"] == []


def test_toolkit_spec_of_another_driver_is_written_again(node):
    found, _output = node
    with open(cdi_lib.TOOLKIT_SPEC, "w", encoding="utf-8") as handle:
        handle.write(SPEC.replace(VERSION, "580.95.05"))  # derived: written before the driver changed
    result = run_module(cdi_spec, toolkit(found))
    assert result["changed"] is True and "was written for driver 580.95.05" in result["problems"][0]
    assert result["repairs"] == ["systemctl restart nvidia-cdi-refresh.service"] and read(cdi_lib.TOOLKIT_SPEC) == SPEC


def test_toolkit_refresh_restarts_the_service_anyway(node):
    found, _output = node
    with open(cdi_lib.TOOLKIT_SPEC, "w", encoding="utf-8") as handle:
        handle.write(SPEC)
    result = run_module(cdi_spec, toolkit(found, refresh=True))
    assert result["changed"] is True and result["problems"] == []
    assert result["repairs"] == ["systemctl restart nvidia-cdi-refresh.service"]


def test_toolkit_a_repair_that_does_not_take_fails(node):
    found, _output = node
    found.units, found.restart_fails = "show-start-limit-hit.txt", True
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, toolkit(found))
    assert err.value.result["msg"].startswith("cdi_spec: `systemctl restart nvidia-cdi-refresh.service` failed (rc 1): Job for")


def test_toolkit_without_the_units(node):
    found, _output = node
    found.units = "show-not-installed.txt"
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, toolkit(found))
    assert "install NVIDIA Container Toolkit 1.18 or later" in err.value.result["msg"]


def test_toolkit_spec_is_not_removed_by_the_module(node):
    found, _output = node
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, toolkit(found, state="absent"))
    assert err.value.result["msg"].startswith("cdi_spec: state absent removes the spec this module writes")
    assert found.calls == []


def test_check_mode_before_the_toolkit_is_installed_predicts_a_change(node, monkeypatch):
    """The role's check mode on a new node: the packages were not installed, so neither nvidia-ctk nor PyYAML is there."""
    found, output = node
    os.remove(found.local("/usr/bin/nvidia-ctk"))
    monkeypatch.setattr(cdi_lib, "HAS_YAML", False)
    with mock.patch.object(basic.AnsibleModule, "warn") as warn:
        result = run_module(cdi_spec, args(found, output), check_mode=True)
    assert result["changed"] is True and found.calls == [] and not os.path.exists(output)
    assert warn.call_args[0][0].startswith("check mode: PyYAML and %s not installed yet" % found.local("/usr/bin/nvidia-ctk"))
    with pytest.raises(AnsibleFailJson):
        run_module(cdi_spec, args(found, output))


def test_two_specs_of_one_folder_for_the_same_devices_are_a_conflict(node):
    found, _output = node
    output = os.path.join(cdi_lib.SPEC_DIRS[0], "nvidia.yaml")
    other = os.path.join(cdi_lib.SPEC_DIRS[0], "gpus.yaml")
    with open(other, "w", encoding="utf-8") as handle:
        handle.write(SPEC)
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, args(found, output))
    assert "%s defines devices of %s too, in the same folder: the CDI registries refuse both (a conflict)" % (
        other, output) in err.value.result["msg"]
    assert not os.path.exists(output)


def test_toolkit_a_spec_still_wrong_after_the_repair_fails(node):
    """The service ran (rc 0) and wrote its spec, but that spec names another GPU (the capture's lease has another)."""
    found, _output = node
    found.write("/proc/driver/nvidia/gpus/0000:00:06.0/information", fixture("h200", "gpu-information.txt"))
    found.units = "show-start-limit-hit.txt"
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, toolkit(found))
    assert err.value.result["msg"] == (
        "cdi_spec: %s still fails its guard after systemctl reset-failed nvidia-cdi-refresh.path nvidia-cdi-refresh.service; "
        "systemctl restart nvidia-cdi-refresh.service; systemctl start nvidia-cdi-refresh.path: %s names the GPU %s, which "
        "this node does not have (its GPUs: %s)" % (cdi_lib.TOOLKIT_SPEC, cdi_lib.TOOLKIT_SPEC, SPEC_UUID, NODE_UUID))
