"""Tests of the cdi_spec module: check mode, idempotence, diff, mode, removal, failures.

The node is the H200 test host rebuilt under tmp_path (see test_cdi.py); ``/proc`` and ``/sys``
are read from that tree and its device nodes are plain files, by patching ``cdi_lib.driver_host``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
from unittest import mock

import pytest
import yaml

from ansible.module_utils import basic

from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi as cdi_lib
from ansible_collections.gpufleet.nvidia.plugins.modules import cdi_spec
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.test_cdi import (
    KERNEL,
    UUID,
    VERSION,
    materialize,
)
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.utils import AnsibleFailJson, run_module


@pytest.fixture
def node(tmp_path):
    """(host root, output path) with cdi_lib.driver_host reading the replayed H200 tree."""
    root = materialize(str(tmp_path / "host"))
    host = functools.partial(cdi_lib.driver_host, system_root=root, is_device_node=os.path.isfile, kernel_release=KERNEL)
    # Nothing is run in unit tests: the nvidia-smi fallback gets "command not found".
    with mock.patch.object(cdi_lib, "driver_host", host), mock.patch.object(
        basic.AnsibleModule, "run_command", return_value=(127, "", "nvidia-smi: command not found")
    ):
        yield root, str(tmp_path / "etc" / "cdi" / "nvidia.yaml")


def args(root, output, **extra):
    params = {"driver_root": root, "dev_root": root, "output": output}
    params.update(extra)
    return params


def file_mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_present_four_steps(node):
    """Check mode, real run, check mode again, real run again (community.crypto's sequence)."""
    root, output = node
    first = run_module(cdi_spec, args(root, output), check_mode=True)
    assert first["changed"] is True
    assert not os.path.exists(output) and not os.path.exists(os.path.dirname(output))

    second = run_module(cdi_spec, args(root, output))
    assert second["changed"] is True
    assert second["spec"] == first["spec"]
    with open(output, encoding="utf-8") as handle:
        assert yaml.safe_load(handle.read()) == second["spec"]
    assert file_mode(output) == 0o644
    assert file_mode(os.path.dirname(output)) == 0o755

    third = run_module(cdi_spec, args(root, output), check_mode=True)
    fourth = run_module(cdi_spec, args(root, output))
    assert third["changed"] is False and fourth["changed"] is False


def test_returns(node):
    root, output = node
    result = run_module(cdi_spec, args(root, output))
    assert result["path"] == output
    assert result["devices"] == ["0", UUID, "all"]
    assert result["driver_version"] == VERSION
    assert result["counts"] == {
        "device_nodes": 4, "libraries": 26, "binaries": 5, "firmware": 2, "configs": 2, "ipc": 0, "hooks": 6, "mounts": 35,
    }
    assert result["spec"]["cdiVersion"] == "0.5.0" and result["spec"]["kind"] == "nvidia.com/gpu"


def test_diff_on_create_change_and_delete(node):
    root, output = node
    created = run_module(cdi_spec, args(root, output), diff=True)
    with open(output, encoding="utf-8") as handle:
        text = handle.read()
    assert created["diff"] == {"before": "", "after": text, "before_header": output, "after_header": output}

    unchanged = run_module(cdi_spec, args(root, output), diff=True)
    assert unchanged["changed"] is False and unchanged["diff"]["before"] == unchanged["diff"]["after"] == text

    changed = run_module(cdi_spec, args(root, output, device_name_strategy="uuid"), diff=True, check_mode=True)
    assert changed["changed"] is True
    assert changed["diff"]["before"] == text and '"0"' not in changed["diff"]["after"]
    with open(output, encoding="utf-8") as handle:
        assert handle.read() == text  # check mode left it alone

    deleted = run_module(cdi_spec, args(root, output, state="absent"), diff=True)
    assert deleted["diff"] == {"before": text, "after": "", "before_header": output, "after_header": output}


def test_rewrite_keeps_the_files_mode(node):
    root, output = node
    os.makedirs(os.path.dirname(output))
    with open(output, "w", encoding="utf-8") as handle:
        handle.write("cdiVersion: 0.3.0\n")
    os.chmod(output, 0o600)
    result = run_module(cdi_spec, args(root, output))
    assert result["changed"] is True
    assert file_mode(output) == 0o600
    with open(output, encoding="utf-8") as handle:
        assert "nvidia.com/gpu" in handle.read()


def test_mode_option(node):
    root, output = node
    assert run_module(cdi_spec, args(root, output, mode="0640"))["changed"] is True
    assert file_mode(output) == 0o640
    assert run_module(cdi_spec, args(root, output, mode="0640"))["changed"] is False
    # Only the mode differs: changed, and check mode does not touch it.
    assert run_module(cdi_spec, args(root, output, mode="0644"), check_mode=True)["changed"] is True
    assert file_mode(output) == 0o640
    assert run_module(cdi_spec, args(root, output, mode="0644"))["changed"] is True
    assert file_mode(output) == 0o644


def test_absent(node):
    root, output = node
    assert run_module(cdi_spec, args(root, output, state="absent"))["changed"] is False
    run_module(cdi_spec, args(root, output))
    check = run_module(cdi_spec, args(root, output, state="absent"), check_mode=True)
    assert check["changed"] is True and os.path.exists(output)
    removed = run_module(cdi_spec, args(root, output, state="absent"))
    assert removed["changed"] is True and not os.path.exists(output)
    assert removed["devices"] == [] and removed["spec"] == {}
    assert run_module(cdi_spec, args(root, output, state="absent"))["changed"] is False


def test_json_output(node, tmp_path):
    root, _output = node
    output = str(tmp_path / "nvidia.json")
    result = run_module(cdi_spec, args(root, output))
    with open(output, encoding="utf-8") as handle:
        assert json.load(handle) == result["spec"]


def test_nvidia_ctk_path_alias(node):
    root, output = node
    result = run_module(cdi_spec, args(root, output, nvidia_ctk_path="/usr/bin/nvidia-ctk"))
    hooks = result["spec"]["containerEdits"]["hooks"]
    assert {h["path"] for h in hooks} == {"/usr/bin/nvidia-ctk"}
    assert all(h["args"][:2] == ["nvidia-ctk", "hook"] for h in hooks)


def test_warns_when_the_hook_program_is_missing(node):
    root, output = node
    with mock.patch.object(basic.AnsibleModule, "warn") as warn:
        run_module(cdi_spec, args(root, output, nvidia_cdi_hook_path="/nonexistent/nvidia-cdi-hook"))
    assert "/nonexistent/nvidia-cdi-hook does not exist" in warn.call_args[0][0]


def test_fails_cleanly_without_a_gpu(node):
    """No /proc/driver/nvidia/gpus and nvidia-smi failing: a message naming both."""
    root, output = node
    shutil.rmtree(root + "/proc/driver/nvidia/gpus")
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, args(root, output))
    assert err.value.result["msg"] == (
        "cdi_spec: no GPU under %s/proc/driver/nvidia/gpus and `chroot %s /usr/local/nvidia/bin/nvidia-smi -q -x` "
        "failed (rc 127): nvidia-smi: command not found" % (root, root)
    )
    assert err.value.result["rc"] == 127
    basic.AnsibleModule.run_command.assert_called_once_with(
        ["chroot", root, "/usr/local/nvidia/bin/nvidia-smi", "-q", "-x"], environ_update={"LC_ALL": "C"}
    )
    assert not os.path.exists(output)


def test_fails_cleanly_on_a_bad_output_name(node):
    root, _output = node
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, args(root, "/etc/cdi/nvidia.yml"))
    assert err.value.result["msg"] == (
        "cdi_spec: output '/etc/cdi/nvidia.yml' must end in .yaml or .json (the CDI registry reads only those)"
    )


def test_rejects_an_unknown_hook_name(node):
    root, output = node
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, args(root, output, disabled_hooks=["chmod"]))
    assert "disabled_hooks" in err.value.result["msg"]


def test_a_folder_that_cannot_be_made_fails_in_cdi_specs_words(node):
    root, output = node
    with mock.patch("os.makedirs", side_effect=OSError(30, "Read-only file system")):
        with pytest.raises(AnsibleFailJson) as err:
            run_module(cdi_spec, args(root, output))
    assert err.value.result["msg"] == "cdi_spec: cannot create %s: [Errno 30] Read-only file system" % os.path.dirname(output)
    assert err.value.result["path"] == output


def test_a_temporary_file_that_cannot_be_written_fails_in_cdi_specs_words(node):
    root, output = node
    with mock.patch("tempfile.mkstemp", side_effect=OSError(28, "No space left on device")):
        with pytest.raises(AnsibleFailJson) as err:
            run_module(cdi_spec, args(root, output))
    msg = err.value.result["msg"]
    assert msg.startswith("cdi_spec: cannot write a temporary file in ") and msg.endswith(": [Errno 28] No space left on device")
    assert not os.path.exists(output)


def test_a_spec_that_cannot_be_removed_fails_in_cdi_specs_words(node):
    root, output = node
    run_module(cdi_spec, args(root, output))
    with mock.patch("os.remove", side_effect=OSError(13, "Permission denied")):
        with pytest.raises(AnsibleFailJson) as err:
            run_module(cdi_spec, args(root, output, state="absent"))
    assert err.value.result["msg"] == "cdi_spec: cannot remove %s: [Errno 13] Permission denied" % output
    assert os.path.exists(output)


# A spec's hooks run as root: no mode may let anyone else write it, nor set setuid, setgid or sticky.
BAD_MODES = ["0777", "0666", "0664", "0646", "07777", "04644", "02644", "01644", 0o777, 0o4644, 644, "u=rwx,g=rwx,o=rwx",
             "g+w", "u+s", "0o7777", "rw-r--r--", "99", "", True, 1.5, "0644\n"]


@pytest.mark.parametrize("mode", BAD_MODES, ids=[repr(m) for m in BAD_MODES])
@pytest.mark.parametrize("check_mode", [False, True])
def test_a_mode_that_others_could_write_or_that_sets_special_bits_is_refused_before_anything_is_written(node, mode, check_mode):
    root, output = node
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, args(root, output, mode=mode), check_mode=check_mode)
    assert err.value.result["msg"].startswith("cdi_spec: mode %r is not a file mode" % (mode,)), err.value.result["msg"]
    assert "not writable by the group or the world" in err.value.result["msg"]
    assert not os.path.exists(output) and not os.path.exists(os.path.dirname(output))


def test_a_bad_mode_leaves_an_existing_spec_as_it_was(node):
    root, output = node
    run_module(cdi_spec, args(root, output, device_name_strategy="uuid"))
    with open(output, encoding="utf-8") as handle:
        before = handle.read()
    with pytest.raises(AnsibleFailJson):
        run_module(cdi_spec, args(root, output, mode="0777"))
    with open(output, encoding="utf-8") as handle:
        assert handle.read() == before
    assert file_mode(output) == 0o644


@pytest.mark.parametrize("mode, expected", [("0600", 0o600), ("0640", 0o640), (0o644, 0o644), ("u=rw,g=r,o=", 0o640), ("go-r", 0o600),
                                            ("0444", 0o444)])
def test_modes_only_root_can_write_pass(node, mode, expected):
    root, output = node
    assert run_module(cdi_spec, args(root, output, mode=mode))["changed"] is True
    assert file_mode(output) == expected


@pytest.mark.parametrize("option, value", [
    ("output", "etc/cdi/nvidia.yaml"), ("output", "./nvidia.yaml"), ("output", "/etc/cdi/../../tmp/nvidia.yaml"),
    ("nvidia_cdi_hook_path", "nvidia-cdi-hook"), ("nvidia_cdi_hook_path", "bin/nvidia-cdi-hook"),
    ("driver_root", "run/nvidia/driver"), ("dev_root", "dev"),
])
def test_a_relative_path_is_refused_by_name(node, option, value, tmp_path, monkeypatch):
    root, output = node
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AnsibleFailJson) as err:
        run_module(cdi_spec, dict(args(root, output), **{option: value}))
    assert err.value.result["msg"].startswith("cdi_spec: %s %r " % (option, value)), err.value.result["msg"]
    assert "absolute" in err.value.result["msg"]
    assert not os.path.exists(output) and not os.listdir(str(tmp_path)) == ["nvidia.yaml"]
