"""Tests of toolkit_packages' ``runtime`` option: the packages and the runtime in one module run.

The packages part runs against ``FakeApt`` (fake_apt.py: the node's apt files and dpkg
database in memory); the runtime part is the container_runtime module's own code on real files in
a temporary directory, as in test_container_runtime.py. The runtime's options are the container
runtime module's, from one argument spec in module_utils/runtime/config.py.
"""

from __future__ import annotations

import os
import sys
from unittest import mock

import pytest
import yaml

from ansible.module_utils import basic

from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import config as runtime_config_lib
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import edit as runtime_edit
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import toolkit_apt as T
from ansible_collections.gpufleet.nvidia.plugins.modules import container_runtime, toolkit_packages
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.configs import fixture_text
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.fake_apt import KEY_URL, URL, FakeApt, converged
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.utils import AnsibleFailJson, run_module, snapshot

MAIN = fixture_text("kubeadm-containerd-1.7-commented.toml")


class TomlkitApt(FakeApt):
    """FakeApt whose ``apt-get install python3-tomlkit`` makes ``import tomlkit`` work again."""

    def __init__(self, real_tomlkit, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.real_tomlkit = real_tomlkit

    def run(self, argv, environ_update=None):
        answer = super().run(argv, environ_update)
        if argv[:2] == ["apt-get", "install"] and "python3-tomlkit" in argv and self.real_tomlkit is not None:
            sys.modules["tomlkit"] = self.real_tomlkit
        return answer


@pytest.fixture
def node(tmp_path):
    """The runtime's files in a temporary directory: ``{'dir', 'runtime' (the module's runtime option)}``."""
    etc = tmp_path / "etc" / "containerd"
    etc.mkdir(parents=True)
    (etc / "config.toml").write_text(MAIN)
    runtime = {
        "runtime": "containerd",
        "config_path": str(etc / "config.toml"),
        "dropin_path": str(etc / "conf.d" / "99-nvidia.toml"),
        "validate": False,
        "backup": True,
    }
    return {"dir": tmp_path, "runtime": runtime}


def args(runtime=None, **extra):
    base = dict(version="1.17.8-1", extra_packages=["python3-tomlkit"], repo_url=URL, repo_key_url=KEY_URL)
    if runtime is not None:
        base["runtime"] = runtime
    base.update(extra)
    return base


CONVERGE = T.converge


def run(monkeypatch, system, module_args, **kwargs):
    """The module, its packages' part on ``system`` (the fake node and its key server)."""
    monkeypatch.setattr(T, "converge", lambda _host, *a, **kw: CONVERGE(system, *a, fetch=system.fetch, **kw))
    return run_module(toolkit_packages, module_args, **kwargs)


@pytest.fixture
def without_tomlkit(monkeypatch):
    """The state of a node without python3-tomlkit: runtime.edit was loaded without it, and
    ``import tomlkit`` fails until the fake apt installs it. Gives the real module back."""
    real = sys.modules.get("tomlkit")
    monkeypatch.setitem(sys.modules, "tomlkit", None)  # None in sys.modules: the import raises ImportError
    for name, value in (("tomlkit", None), ("tk_items", None), ("TkContainer", None), ("TkProxy", None),
                        ("TomlParseError", ValueError), ("HAS_TOMLKIT", False), ("TOMLKIT_IMPORT_ERROR", "ImportError")):
        monkeypatch.setattr(runtime_edit, name, value)
    return real


# --------------------------------------------------------------------------------------
# with_runtime: the two results as one
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("packages_changed, runtime_changed", [(False, False), (True, False), (False, True), (True, True)])
def test_with_runtime_changed_is_either_and_the_runtime_keeps_its_own(packages_changed, runtime_changed):
    packages = {"changed": packages_changed, "msg": "packages", "actions": [], "diff": [{"before_header": "packages"}]}
    runtime = {"changed": runtime_changed, "msg": "runtime", "files": [], "backup_files": {}, "warnings": ["careful"],
               "diff": [{"before_header": "/etc/containerd/config.toml"}]}
    result = T.with_runtime(packages, runtime)
    assert result["changed"] is (packages_changed or runtime_changed)
    assert result["runtime"]["changed"] is runtime_changed
    assert result["runtime"]["diff"] == runtime["diff"] and "warnings" not in result["runtime"]
    assert result["warnings"] == ["careful"]
    assert [d["before_header"] for d in result["diff"]] == ["packages", "/etc/containerd/config.toml"]
    assert result["msg"] == "packages; runtime"
    assert "warnings" in runtime and "runtime" not in packages  # the inputs are left alone


def test_with_runtime_without_diff_mode_has_no_diff():
    result = T.with_runtime({"changed": False, "msg": "p"}, {"changed": False, "msg": "r", "warnings": []})
    assert "diff" not in result and result["warnings"] == []


# --------------------------------------------------------------------------------------
# The module: one run does both, four steps (check, run, check again, run again)
# --------------------------------------------------------------------------------------


def test_one_call_does_both_check_then_run_then_unchanged(monkeypatch, node):
    system = FakeApt(lists_age=None)
    before = snapshot(node["dir"])

    checked = run(monkeypatch, system, args(node["runtime"]), check_mode=True, diff=True)
    assert checked["changed"] and checked["runtime"]["changed"]
    assert snapshot(node["dir"]) == before and system.files == {}  # nothing written, neither part
    assert [c[0] for c in system.calls if c[0] != "containerd"] == ["dpkg-query"]
    headers = [d["after_header"] for d in checked["diff"]]
    assert headers == [T.KEYRING, T.PIN_FILE, T.SOURCE_FILE, "packages (toolkit 1.17.8-1)",
                       node["runtime"]["dropin_path"], node["runtime"]["config_path"]]

    done = run(monkeypatch, system, args(node["runtime"]), diff=True)
    assert done["changed"] and done["runtime"]["changed"]
    assert "apt-get install" in " ".join(done["actions"]) and system.packages["python3-tomlkit"]
    assert done["diff"] == checked["diff"]
    assert done["runtime"]["files"] == [
        {"path": node["runtime"]["dropin_path"], "action": "create"},
        {"path": node["runtime"]["config_path"], "action": "update"},
    ]
    assert list(done["runtime"]["backup_files"]) == [node["runtime"]["config_path"]]
    assert open(done["runtime"]["backup_files"][node["runtime"]["config_path"]]).read() == MAIN
    assert os.path.exists(node["runtime"]["dropin_path"])
    assert done["msg"].startswith("NVIDIA Container Toolkit 1.17.8-1: write ")
    assert done["msg"].endswith("; " + done["runtime"]["msg"])
    for key in ("msg", "changed_files", "files", "config_version", "plugin_table", "runtime_table",
                "restart_needed", "validation", "backup_files", "containerd_version", "diff"):
        assert key in done["runtime"]

    written = snapshot(node["dir"])
    system.calls = []
    again_checked = run(monkeypatch, system, args(node["runtime"]), check_mode=True)
    again = run(monkeypatch, system, args(node["runtime"]), diff=True)
    for result in (again_checked, again):
        assert not result["changed"] and not result["runtime"]["changed"]
        assert result["runtime"]["backup_files"] == {}
    assert again["diff"] == []
    assert snapshot(node["dir"]) == written  # byte-identical, not even rewritten
    assert [c[0] for c in system.calls if c[0] != "containerd"] == ["dpkg-query", "dpkg-query"]


def test_the_same_result_as_the_container_runtime_module(monkeypatch, node, tmp_path_factory):
    """The runtime part is container_runtime's: the same files, the same keys, the same values."""
    other = tmp_path_factory.mktemp("alone")
    here = str(node["dir"])
    alone_args = dict((k, v.replace(here, str(other)) if k.endswith("_path") else v) for k, v in node["runtime"].items())
    os.makedirs(os.path.dirname(alone_args["config_path"]))
    with open(alone_args["config_path"], "w") as handle:
        handle.write(MAIN)
    alone = run_module(container_runtime, alone_args)
    together = run(monkeypatch, converged(), args(node["runtime"]))["runtime"]
    assert set(together) == set(alone)
    for key in ("dropin_path", "config_path"):
        assert open(node["runtime"][key]).read() == open(alone_args[key]).read().replace(str(other), here)
    for key in ("changed", "config_version", "plugin_table", "runtime_table", "restart_needed", "validation"):
        assert together[key] == alone[key]


def test_only_packages_changed_leaves_the_runtime_unchanged(monkeypatch, node):
    """What the role's restart hangs on: runtime.changed, false when only the packages moved."""
    system = converged("1.17.8-1")
    run(monkeypatch, system, args(node["runtime"]))
    moved = run(monkeypatch, system, args(node["runtime"], version="1.18.0-1"))
    assert moved["changed"] and moved["actions"]
    assert moved["runtime"]["changed"] is False and moved["runtime"]["restart_needed"] is False


def test_only_the_runtime_changed(monkeypatch, node):
    system = converged()
    first = run(monkeypatch, system, args(node["runtime"]))
    assert first["changed"] and first["runtime"]["changed"] and first["actions"] == []
    flipped = run(monkeypatch, system, args(dict(node["runtime"], set_as_default=True)))
    assert flipped["changed"] and flipped["runtime"]["changed"] and flipped["actions"] == []


def test_runtime_omitted_touches_no_runtime_file(monkeypatch, node):
    monkeypatch.setattr(runtime_config_lib, "configure", mock.Mock(side_effect=AssertionError("configure called")))
    before = snapshot(node["dir"])
    result = run(monkeypatch, FakeApt(lists_age=None), args())
    assert result["changed"] and "runtime" not in result
    assert snapshot(node["dir"]) == before


def test_runtime_warnings_go_through_module_warn(monkeypatch, node):
    with open(node["runtime"]["config_path"], "w") as handle:
        handle.write('version = 2\ndisabled_plugins = ["cri"]\n')
    with mock.patch.object(basic.AnsibleModule, "warn") as warn:
        result = run(monkeypatch, converged(), args(node["runtime"]))
    assert any("the CRI plugin is disabled" in c.args[0] for c in warn.call_args_list)
    assert "warnings" not in result["runtime"]


def test_a_runtime_failure_after_the_packages_says_they_changed(monkeypatch, node):
    with open(node["runtime"]["config_path"], "a") as handle:
        handle.write("\n[broken\n")
    text = open(node["runtime"]["config_path"]).read()
    with pytest.raises(AnsibleFailJson) as info:
        run(monkeypatch, FakeApt(lists_age=None), args(node["runtime"]))
    failed = info.value.result
    assert failed["msg"].startswith("toolkit_packages: runtime: ") and "is not valid TOML" in failed["msg"]
    assert failed["line"] == len(text.splitlines()) and failed["column"] == 8
    assert failed["changed"] is True and any(a.startswith("apt-get install") for a in failed["actions"])
    assert open(node["runtime"]["config_path"]).read() == text


def test_the_runtime_option_is_checked_like_container_runtime(monkeypatch, node):
    with pytest.raises(AnsibleFailJson) as info:
        run(monkeypatch, FakeApt(), args(dict(node["runtime"], runtime="podman")))
    assert "runtime" in info.value.result["msg"] and "podman" in info.value.result["msg"]


# --------------------------------------------------------------------------------------
# tomlkit: installed by the packages part, imported after
# --------------------------------------------------------------------------------------


def test_tomlkit_is_imported_after_the_install(monkeypatch, node, without_tomlkit):
    system = TomlkitApt(without_tomlkit, lists_age=None)
    invalidated = mock.Mock(wraps=runtime_edit.importlib.invalidate_caches)
    monkeypatch.setattr(runtime_edit.importlib, "invalidate_caches", invalidated)
    result = run(monkeypatch, system, args(node["runtime"]))
    assert any(a.startswith("apt-get install") and a.endswith("python3-tomlkit") for a in result["actions"])
    assert result["runtime"]["changed"] and os.path.exists(node["runtime"]["dropin_path"])
    assert runtime_edit.HAS_TOMLKIT and runtime_edit.tomlkit is without_tomlkit
    assert invalidated.called


def test_tomlkit_still_missing_fails_with_the_missing_library_message(monkeypatch, node, without_tomlkit):
    before = snapshot(node["dir"])
    with pytest.raises(AnsibleFailJson) as info:
        run(monkeypatch, TomlkitApt(None, lists_age=None), args(node["runtime"]))
    failed = info.value.result
    assert "Failed to import the required Python library (tomlkit)" in failed["msg"]
    assert failed["changed"] is True  # the packages were installed all the same
    assert "import of tomlkit halted" in failed["exception"]  # the traceback of the import after the install
    assert snapshot(node["dir"]) == before


def test_check_mode_on_a_node_without_tomlkit_fails_as_container_runtime_does(monkeypatch, node, without_tomlkit):
    """Check mode installs nothing, so the runtime cannot be planned: the role fails today too."""
    system = TomlkitApt(without_tomlkit, lists_age=None)
    before = snapshot(node["dir"])
    with pytest.raises(AnsibleFailJson) as info:
        run(monkeypatch, system, args(node["runtime"]), check_mode=True)
    assert "Failed to import the required Python library (tomlkit)" in info.value.result["msg"]
    assert "check mode installs nothing" in info.value.result["msg"]
    assert snapshot(node["dir"]) == before and system.files == {}
    assert not runtime_edit.HAS_TOMLKIT


def test_docker_needs_no_tomlkit(monkeypatch, tmp_path, without_tomlkit):
    path = tmp_path / "daemon.json"
    result = run(monkeypatch, TomlkitApt(None), args({"runtime": "docker", "config_path": str(path)}, extra_packages=[]))
    assert result["runtime"]["changed"] and result["runtime"]["runtime_table"] == "runtimes.nvidia"
    assert '"nvidia"' in path.read_text()


# --------------------------------------------------------------------------------------
# One argument spec, documented in both modules
# --------------------------------------------------------------------------------------


#: What container_runtime has beyond toolkit_packages' runtime suboptions: state=restored and its options.
RESTORE_ONLY = {"restore_backups", "restore_created"}


def test_one_argument_spec_for_both_modules():
    """container_runtime's spec is the shared one, with state=restored (the restart's rollback) added."""
    assert container_runtime.MODULE_ARGUMENT_SPEC is runtime_config_lib.MODULE_ARGUMENT_SPEC
    assert toolkit_packages.ARGUMENT_SPEC["runtime"]["options"] is runtime_config_lib.ARGUMENT_SPEC
    module_spec = runtime_config_lib.MODULE_ARGUMENT_SPEC
    assert set(module_spec) - set(runtime_config_lib.ARGUMENT_SPEC) == RESTORE_ONLY
    assert all(module_spec[k] is v for k, v in runtime_config_lib.ARGUMENT_SPEC.items() if k != "state")
    assert module_spec["state"]["choices"] == runtime_config_lib.ARGUMENT_SPEC["state"]["choices"] + ["restored"]


def test_the_runtime_suboptions_are_documented_as_container_runtime_options():
    doc = yaml.safe_load(toolkit_packages.DOCUMENTATION)
    other = yaml.safe_load(container_runtime.DOCUMENTATION)
    assert set(doc["options"]) == set(toolkit_packages.ARGUMENT_SPEC)
    suboptions = doc["options"]["runtime"]["suboptions"]
    assert set(suboptions) == set(runtime_config_lib.ARGUMENT_SPEC) == set(other["options"]) - RESTORE_ONLY
    for name, spec in runtime_config_lib.ARGUMENT_SPEC.items():
        module_spec = runtime_config_lib.MODULE_ARGUMENT_SPEC[name]
        for field in ("type", "default", "choices", "required"):
            assert suboptions[name].get(field) == spec.get(field), (name, field)
            assert other["options"][name].get(field) == module_spec.get(field), (name, field)
    returns = yaml.safe_load(toolkit_packages.RETURN)
    assert all("sample" in value for value in returns.values())
    assert all("sample" in value for value in returns["runtime"]["contains"].values())
    runtime_returns = yaml.safe_load(container_runtime.RETURN)
    # the keys the role reads are documented here; every other key container_runtime returns is
    # named in the description, which sends the reader to container_runtime's RETURN
    contains = set(returns["runtime"]["contains"])
    assert contains == {"changed", "files", "backup_files"}
    described = " ".join(returns["runtime"]["description"])
    assert contains | set(k for k in runtime_returns if "C(%s)" % k in described) == set(runtime_returns) | {"changed"}
