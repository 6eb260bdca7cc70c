"""Tests of the container_runtime module, on files in a temporary directory.

Where a containerd binary is found (Debian 12's 1.6 in PATH here), the module's own check
(``containerd config dump`` of the candidate) runs for real.
"""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from ansible_collections.gpufleet.nvidia.plugins.modules import container_runtime
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.configs import (
    WANTED_BINARIES,
    binary_param,
    fixture_text,
    toml_plain,
)
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.utils import AnsibleFailJson, run_module, snapshot

CTD16 = binary_param("1.6")


@pytest.fixture(autouse=True)
def docker_state_file(tmp_path, monkeypatch):
    """The module's Docker state file, under each test's root (this machine's /var/lib is never written, and
    no test sees another's records)."""
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import docker  # pylint: disable=import-outside-toplevel

    state = tmp_path / "var" / "lib" / "gpufleet.nvidia" / "container_runtime" / "docker.json"
    monkeypatch.setattr(docker, "STATE_FILE", str(state), raising=False)
    return state


@pytest.fixture
def containerd_files(tmp_path):
    etc = tmp_path / "etc" / "containerd"
    etc.mkdir(parents=True)
    main = etc / "config.toml"
    main.write_text(fixture_text("kubeadm-containerd-1.7-commented.toml"))
    main.chmod(0o600)
    return {
        "runtime": "containerd",
        "config_path": str(main),
        "dropin_path": str(etc / "conf.d" / "99-nvidia.toml"),
        "validate": False,
    }


def test_check_mode_then_run_then_idempotent_then_absent(containerd_files, tmp_path):
    args = dict(containerd_files, set_as_default=True)
    before = snapshot(tmp_path)

    checked = run_module(container_runtime, args, check_mode=True, diff=True)
    assert checked["changed"] and checked["restart_needed"]
    assert snapshot(tmp_path) == before  # nothing on disk moved
    assert [d["before_header"] for d in checked["diff"]] == [args["dropin_path"] + " (absent)", args["config_path"]]

    done = run_module(container_runtime, args, diff=True)
    assert done["changed"]
    assert done["diff"] == checked["diff"]
    assert done["changed_files"] == [args["dropin_path"], args["config_path"]]
    assert done["files"] == [
        {"path": args["dropin_path"], "action": "create"},
        {"path": args["config_path"], "action": "update"},
    ]
    assert done["config_version"] == 2
    assert done["plugin_table"] == 'plugins."io.containerd.grpc.v1.cri"'
    assert done["runtime_table"] == 'plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia'
    assert stat.S_IMODE(os.stat(args["config_path"]).st_mode) == 0o600  # mode kept
    assert stat.S_IMODE(os.stat(args["dropin_path"]).st_mode) == 0o644
    dropin = toml_plain(open(args["dropin_path"]).read())
    assert dropin["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["default_runtime_name"] == "nvidia"

    written = snapshot(tmp_path)
    assert not run_module(container_runtime, args, check_mode=True)["changed"]
    again = run_module(container_runtime, args, diff=True)
    assert not again["changed"] and again.get("diff", []) == []
    assert snapshot(tmp_path) == written  # byte-identical, not even rewritten

    gone = run_module(container_runtime, dict(containerd_files, state="absent"), diff=True)
    assert gone["changed"]
    assert gone["diff"][1]["after_header"] == args["dropin_path"] + " (absent)"
    assert not os.path.exists(args["dropin_path"])
    assert open(args["config_path"]).read() == fixture_text("kubeadm-containerd-1.7-commented.toml")
    assert not run_module(container_runtime, dict(containerd_files, state="absent"))["changed"]


def test_backup(containerd_files):
    result = run_module(container_runtime, dict(containerd_files, backup=True))
    backup = result["backup_files"][containerd_files["config_path"]]
    assert open(backup).read() == fixture_text("kubeadm-containerd-1.7-commented.toml")
    assert list(result["backup_files"]) == [containerd_files["config_path"]]  # the drop-in was new


def test_broken_toml_fails_with_line_and_column_and_is_not_overwritten(containerd_files):
    path = containerd_files["config_path"]
    with open(path, "a") as handle:
        handle.write("\n[broken\n")
    text = open(path).read()
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(container_runtime, containerd_files)
    result = exc.value.result
    assert result["failed"]
    assert result["line"] == len(text.splitlines())
    assert result["column"] == 8
    assert "is not valid TOML (line %d, column 8)" % result["line"] in result["msg"]
    assert open(path).read() == text
    assert not os.path.exists(containerd_files["dropin_path"])


@pytest.mark.parametrize("binary", [CTD16])
def test_validation_with_containerd(binary, containerd_files):
    args = dict(containerd_files, validate=True, containerd_binary=binary)
    result = run_module(container_runtime, args)
    assert result["validation"]["ran"] is True
    assert result["validation"]["version"].startswith("1.6.")
    assert result["containerd_version"].startswith("1.6.")


@pytest.mark.parametrize("binary", [CTD16])
def test_validation_refuses_what_containerd_would_not_run(binary, tmp_path):
    """A default runtime that names no runtime: containerd loads the file, CRI would have no default."""
    main = tmp_path / "config.toml"
    text = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\ndefault_runtime_name = "missing"\n'
    main.write_text(text)
    args = {
        "runtime": "containerd",
        "config_path": str(main),
        "dropin_path": str(tmp_path / "conf.d" / "99-nvidia.toml"),
        "containerd_binary": binary,
    }
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(container_runtime, args)
    assert "would not have a usable runtime with the new configuration" in exc.value.result["msg"]
    assert "default_runtime_name = 'missing' is not among the runtimes" in exc.value.result["msg"]
    assert "nothing was written" in exc.value.result["msg"]
    assert main.read_text() == text
    assert not (tmp_path / "conf.d").exists()


@pytest.mark.parametrize("binary", [binary_param("1.7")])
def test_validation_shows_containerd_error(binary, tmp_path):
    main = tmp_path / "config.toml"
    main.write_text('version = 2\noom_score = "x"\n')
    args = {"runtime": "containerd", "config_path": str(main), "config_mode": "inplace", "containerd_binary": binary}
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(container_runtime, args)
    assert "refused the new configuration" in exc.value.result["msg"]
    assert "Can't convert x(string) to int" in exc.value.result["msg"]
    assert exc.value.result["validation"]["rc"] != 0


@pytest.mark.parametrize("binary", [CTD16, binary_param("1.7")])
def test_a_version_3_file_under_containerd_1_is_refused_before_the_dump(binary, tmp_path):
    """Finding 6 of docs/reliability.md: only containerd's dump refused it (1.6 loads it as its defaults)."""
    main = tmp_path / "config.toml"
    main.write_text("version = 3\n")
    args = {"runtime": "containerd", "config_path": str(main), "config_mode": "inplace", "containerd_binary": binary}
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(container_runtime, args)
    assert exc.value.result["msg"].startswith("%s: config version 3 does not fit the installed containerd: containerd 1." % main)
    assert "validation" not in exc.value.result  # the editor refused it, not the dump check
    assert main.read_text() == "version = 3\n"


def test_validation_skipped_without_binary(containerd_files, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    result = run_module(container_runtime, dict(containerd_files, validate=True))
    assert result["validation"] == {"ran": False, "reason": "no containerd binary found on the host"}


def test_missing_tomlkit_is_reported(containerd_files, monkeypatch):
    monkeypatch.setattr(container_runtime, "HAS_TOMLKIT", False)
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(container_runtime, containerd_files)
    assert "tomlkit" in exc.value.result["msg"]


def test_docker(tmp_path):
    path = tmp_path / "daemon.json"
    path.write_text(fixture_text("docker-daemon.json"))
    args = {"runtime": "docker", "config_path": str(path), "set_as_default": True, "enable_cdi": True}
    result = run_module(container_runtime, args, diff=True)
    assert result["changed"] and result["runtime_table"] == "runtimes.nvidia"
    assert result["config_version"] is None and result["validation"]["ran"] is False
    config = json.loads(path.read_text())
    assert config["default-runtime"] == "nvidia" and config["features"] == {"cdi": True}
    assert config["log-opts"] == {"max-size": "100m"}
    assert not run_module(container_runtime, args)["changed"]
    run_module(container_runtime, dict(args, state="absent"))
    assert path.read_text() == fixture_text("docker-daemon.json")


def test_docker_bad_json(tmp_path):
    path = tmp_path / "daemon.json"
    path.write_text('{\n  "debug": true,\n}\n')
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(container_runtime, {"runtime": "docker", "config_path": str(path)})
    # the trailing comma: Python 3.13's json names the comma itself, older ones the brace after it
    assert (exc.value.result["line"], exc.value.result["column"]) == ((2, 16) if sys.version_info >= (3, 13) else (3, 1))
    assert path.read_text() == '{\n  "debug": true,\n}\n'


def test_docker_new_file_in_check_mode_diff(tmp_path, docker_state_file):
    path = tmp_path / "docker" / "daemon.json"
    result = run_module(container_runtime, {"runtime": "docker", "config_path": str(path)}, check_mode=True, diff=True)
    daemon = [d for d in result["diff"] if d["after_header"] == str(path)]
    assert daemon[0]["before"] == "" and daemon[0]["before_header"].endswith("(absent)")
    assert not path.parent.exists() and not docker_state_file.exists()


def test_crio(tmp_path):
    conf = tmp_path / "crio.conf"
    conf.write_text(fixture_text("crio.conf"))
    dropins = tmp_path / "crio.conf.d"
    dropins.mkdir()
    (dropins / "10-crio.conf").write_text(fixture_text("crio-10-crio.conf"))
    args = {"runtime": "crio", "config_path": str(conf), "dropin_path": str(dropins / "99-nvidia.toml")}
    result = run_module(container_runtime, args)
    assert result["changed_files"] == [str(dropins / "99-nvidia.toml")]
    nvidia = toml_plain((dropins / "99-nvidia.toml").read_text())["crio"]["runtime"]["runtimes"]["nvidia"]
    assert nvidia["runtime_root"] == "/run/runc"  # copied from 10-crio.conf's runc
    assert not run_module(container_runtime, args)["changed"]
    run_module(container_runtime, dict(args, state="absent"))
    assert sorted(os.listdir(str(dropins))) == ["10-crio.conf"]
    assert conf.read_text() == fixture_text("crio.conf")


def test_k3s_template(tmp_path):
    (tmp_path / "config.toml").write_text(fixture_text("k3s-v1.30-config.toml"))
    template = tmp_path / "config.toml.tmpl"
    args = {"runtime": "k3s", "config_path": str(template)}
    result = run_module(container_runtime, args)
    assert result["changed_files"] == [str(template)]
    assert result["config_version"] == 2
    assert "nvidia" in toml_plain(template.read_text())["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert not run_module(container_runtime, args)["changed"]
    run_module(container_runtime, dict(args, state="absent"))
    assert not template.exists()


def test_rke2_base_template_is_reported_not_validated(tmp_path):
    (tmp_path / "config.toml").write_text(fixture_text("k3s-v1.30-config.toml"))
    template = tmp_path / "config.toml.tmpl"
    template.write_text(fixture_text("k3s-base.config.toml.tmpl"))
    result = run_module(container_runtime, {"runtime": "rke2", "config_path": str(template), "containerd_binary": "/bin/sh"})
    assert result["changed"]
    assert result["validation"]["ran"] is False and "Go template" in result["validation"]["reason"]


def test_module_documents_every_option_and_return():
    import yaml

    doc = yaml.safe_load(container_runtime.DOCUMENTATION)
    assert set(doc["options"]) == set(container_runtime.MODULE_ARGUMENT_SPEC)
    for name, spec in container_runtime.MODULE_ARGUMENT_SPEC.items():
        assert doc["options"][name]["type"] == spec["type"]
        assert doc["options"][name].get("default") == spec.get("default")
        assert doc["options"][name].get("choices") == spec.get("choices")
    returns = yaml.safe_load(container_runtime.RETURN)
    assert all("sample" in value for value in returns.values())
    assert doc["attributes"]["check_mode"]["support"] == "full"
    assert doc["attributes"]["diff_mode"]["support"] == "full"
    examples = yaml.safe_load(container_runtime.EXAMPLES)
    assert all("gpufleet.nvidia.container_runtime" in task for task in examples)


def test_every_documented_return_is_returned(tmp_path):
    import yaml

    returns = yaml.safe_load(container_runtime.RETURN)
    args = {"runtime": "containerd", "config_path": str(tmp_path / "config.toml"), "validate": False,
            "dropin_path": str(tmp_path / "conf.d" / "99-nvidia.toml")}
    result = run_module(container_runtime, args, diff=True)
    assert set(returns) <= set(result)
    assert set(result) - set(returns) <= {"changed", "warnings"}


# --------------------------------------------------------------------------------------
# What containerd imports, found by its own rules; paths; several files written together
# --------------------------------------------------------------------------------------


def regular_snapshot(directory):
    """``snapshot`` of the regular files only (a FIFO would block its open), and the names of the others."""
    found = {}
    for root, dirs, files in os.walk(str(directory)):
        for name in files + dirs:
            path = os.path.join(root, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as handle:
                    found[path] = (handle.read(), stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            else:
                found[path] = stat.S_IFMT(st.st_mode)
    return found


@pytest.mark.parametrize("kind", ["dotfile", "folder", "fifo", "dangling link"])
@pytest.mark.parametrize("check_mode", [False, True])
def test_an_import_containerd_could_not_load_is_refused_before_anything_is_written(containerd_files, tmp_path, kind, check_mode):
    """Go's filepath.Glob (containerd's) matches dotfiles, folders and FIFOs too: each is named."""
    confd = tmp_path / "etc" / "containerd" / "conf.d"
    confd.mkdir()
    bad = confd / {"dotfile": ".ansible_tmpk2j99-nvidia.toml", "folder": "50-site.toml",
                   "fifo": "50-site.toml", "dangling link": "50-site.toml"}[kind]
    if kind == "dotfile":
        bad.write_text('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n  runtime_type = "io.con')
    elif kind == "folder":
        bad.mkdir()
    elif kind == "fifo":
        os.mkfifo(str(bad))
    else:
        bad.symlink_to(tmp_path / "nowhere.toml")
    before = regular_snapshot(tmp_path)
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(container_runtime, containerd_files, check_mode=check_mode)
    assert str(bad) in exc.value.result["msg"]
    assert exc.value.result["msg"].endswith("nothing was written") or "the file was left untouched" in exc.value.result["msg"]
    assert regular_snapshot(tmp_path) == before


def test_an_unreadable_import_is_refused(containerd_files, tmp_path, monkeypatch):
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as host_mod

    confd = tmp_path / "etc" / "containerd" / "conf.d"
    confd.mkdir()
    locked = confd / "50-site.toml"
    locked.write_text("version = 2\n")
    real = host_mod.Host.read_bytes

    def read_bytes(self, path, *args, **kwargs):
        if path == str(locked):
            raise PermissionError(13, "Permission denied", path)
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(host_mod.Host, "read_bytes", read_bytes)
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(container_runtime, containerd_files)
    assert "containerd imports %s" % locked in exc.value.result["msg"] and "Permission denied" in exc.value.result["msg"]
    assert not os.path.exists(containerd_files["dropin_path"])


def test_a_dotfile_import_is_merged_like_the_others(containerd_files, tmp_path):
    confd = tmp_path / "etc" / "containerd" / "conf.d"
    confd.mkdir()
    (confd / ".50-site.toml").write_text('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "site/pause:1"\n')
    run_module(container_runtime, containerd_files)
    dropin = toml_plain(open(containerd_files["dropin_path"]).read())
    assert dropin["plugins"]["io.containerd.grpc.v1.cri"]["sandbox_image"] == "site/pause:1"


def _sandbox_and_runtimes(dump):
    """``(sandbox image, runtime names)`` of a ``containerd config dump`` (version 2, or 3 of containerd 2.x)."""
    data = toml_plain(dump)
    plugins = data["plugins"]
    if data["version"] == 2:
        cri = plugins["io.containerd.grpc.v1.cri"]
        return cri["sandbox_image"], sorted(cri["containerd"]["runtimes"])
    images = plugins["io.containerd.cri.v1.images"]
    return images["pinned_images"]["sandbox"], sorted(plugins["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"])


@pytest.mark.parametrize("binary", [binary_param(v) for v in WANTED_BINARIES])
def test_the_dropin_keeps_what_another_imported_file_set(binary, tmp_path):
    """containerd merges the main file's imports in order; the drop-in, imported last, must not put back the
    main file's sandbox_image over the one site.toml set."""
    import subprocess

    etc = tmp_path / "etc" / "containerd"
    etc.mkdir(parents=True)
    site = etc / "site.toml"
    site.write_text('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.example/pause:3.9"\n')
    main = etc / "config.toml"
    main.write_text('version = 2\nimports = ["%s"]\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.k8s.io/pause:3.6"\n' % site)

    def effective():
        return _sandbox_and_runtimes(
            subprocess.run([binary, "--config", str(main), "config", "dump"], capture_output=True, text=True, check=True).stdout
        )

    assert effective()[0] == "registry.example/pause:3.9"
    result = run_module(container_runtime, {"runtime": "containerd", "config_path": str(main), "containerd_binary": binary})
    assert result["validation"]["ran"] is True
    sandbox, runtimes = effective()
    assert sandbox == "registry.example/pause:3.9"
    assert "nvidia" in runtimes and "runc" in runtimes


def test_the_dropin_is_beside_a_config_outside_etc(tmp_path):
    main = tmp_path / "srv" / "containerd" / "config.toml"
    main.parent.mkdir(parents=True)
    main.write_text("version = 2\n")
    result = run_module(container_runtime, {"runtime": "containerd", "config_path": str(main), "validate": False})
    dropin = str(main.parent / "conf.d" / "99-nvidia.toml")
    assert result["changed_files"] == [dropin, str(main)]
    assert toml_plain(main.read_text())["imports"] == [str(main.parent / "conf.d" / "*.toml")]
    assert os.path.isfile(dropin)


@pytest.mark.parametrize("option", ["config_path", "dropin_path", "binary_name", "containerd_binary"])
@pytest.mark.parametrize("check_mode", [False, True])
def test_a_relative_path_is_refused_before_anything_is_read(option, check_mode, containerd_files, monkeypatch):
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as host_mod

    def no_read(self, path, *args, **kwargs):  # pragma: no cover - must not be reached
        raise AssertionError("read %s" % path)

    monkeypatch.setattr(host_mod.Host, "read_bytes", no_read)
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(container_runtime, dict(containerd_files, **{option: "etc/containerd/x.toml"}), check_mode=check_mode)
    assert exc.value.result["msg"].startswith("container_runtime: %s 'etc/containerd/x.toml' is not an absolute path" % option)


def test_a_failed_second_write_puts_the_first_back(containerd_files, tmp_path, monkeypatch):
    """The drop-in is written first; when the main file then cannot be written, the drop-in goes again."""
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as host_mod

    before = snapshot(tmp_path)
    real = host_mod.Host.write

    def write(self, path, text, *args, **kwargs):
        if path == containerd_files["config_path"]:
            raise Exception("atomic_move failed")
        return real(self, path, text, *args, **kwargs)

    monkeypatch.setattr(host_mod.Host, "write", write)
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(container_runtime, containerd_files)
    msg = exc.value.result["msg"]
    assert msg.startswith("could not write %s: Exception: atomic_move failed" % containerd_files["config_path"])
    assert containerd_files["dropin_path"] in msg
    after = snapshot(tmp_path)
    assert {p: v[:2] for p, v in after.items()} == {p: v[:2] for p, v in before.items()}


def test_a_file_that_cannot_be_written_is_refused_before_the_first_write(tmp_path):
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import config as rc
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.files import FileChange, Plan

    (tmp_path / "blocked").write_text("a file where a folder should be\n")
    (tmp_path / "dir.toml").mkdir()
    host = Host(str(tmp_path), runner=lambda argv, env=None: (0, "", ""))
    for bad, why in (("/blocked/config.toml", "/blocked is not a folder"), ("/dir.toml", "/dir.toml is a folder")):
        plan = Plan([FileChange("/conf.d/99-nvidia.toml", None, "x = 1\n"), FileChange(bad, None, "y = 1\n")])
        with pytest.raises(GpuFleetError) as exc:
            rc.check_writable(plan, host)
        assert exc.value.msg.startswith("could not write %s: " % bad) and exc.value.msg.endswith("; nothing was written")
        assert why in exc.value.msg
    rc.check_writable(Plan([FileChange("/conf.d/99-nvidia.toml", None, "x = 1\n")]), host)
    assert sorted(os.listdir(str(tmp_path))) == ["blocked", "dir.toml"]


def test_the_files_an_imported_file_imports_are_merged_and_checked_too(containerd_files, tmp_path, monkeypatch):
    """containerd follows the imports of an imported file (relative to its folder), each file once, after the
    files already queued: the nested file comes after the drop-in, and its CRI table overrides it (warned)."""
    confd = tmp_path / "etc" / "containerd" / "conf.d"
    (confd / "site").mkdir(parents=True)
    (confd / "50-site.toml").write_text('version = 2\nimports = ["site/registry.toml", "../conf.d/50-site.toml"]\n')
    nested = confd / "site" / "registry.toml"
    nested.write_text('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "nested/pause:1"\n')
    from ansible.module_utils import basic

    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, text: warned.append(text))
    run_module(container_runtime, containerd_files)
    assert any(w.startswith("%s sorts after %s" % (nested, containerd_files["dropin_path"])) for w in warned)
    nested.write_text("version = 2\n[broken\n")
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(container_runtime, dict(containerd_files, state="present", set_as_default=True))
    assert exc.value.result["msg"].startswith("%s is not valid TOML" % nested)


# --------------------------------------------------------------------------------------
# state=restored: the rollback of container_toolkit's restart
# --------------------------------------------------------------------------------------


@pytest.fixture
def linked_config(tmp_path):
    """containerd's config.toml a symbolic link to a file of mode 0600 (owned by uid 4321 where we may chown)."""
    real = tmp_path / "srv" / "containerd.toml"
    real.parent.mkdir()
    real.write_text(fixture_text("kubeadm-containerd-1.7-commented.toml"))
    real.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(str(real), 4321, 4321)
    etc = tmp_path / "etc" / "containerd"
    etc.mkdir(parents=True)
    os.symlink(str(real), str(etc / "config.toml"))
    return {"real": real, "config_path": str(etc / "config.toml"), "dropin_path": str(etc / "conf.d" / "99-nvidia.toml")}


def _changed_then_restore_args(linked_config):
    """Configure containerd (in place with a backup, then the drop-in) and the restore arguments for what that did."""
    base = {"runtime": "containerd", "config_path": linked_config["config_path"], "dropin_path": linked_config["dropin_path"],
            "validate": False, "backup": True}
    done = run_module(container_runtime, base)
    assert done["changed"] and done["backup_files"]
    return {
        "runtime": "containerd",
        "state": "restored",
        "restore_backups": done["backup_files"],
        "restore_created": [f["path"] for f in done["files"] if f["action"] == "create"],
    }


def test_restored_in_check_mode_moves_nothing_and_shows_the_diff(linked_config):
    original = linked_config["real"].read_text()
    args = _changed_then_restore_args(linked_config)
    written = linked_config["real"].read_text()
    checked = run_module(container_runtime, args, check_mode=True, diff=True)
    assert checked["changed"] and linked_config["real"].read_text() == written  # check mode: nothing moved
    assert os.path.exists(linked_config["dropin_path"])
    assert [(d["before_header"], d["after_header"]) for d in checked["diff"]] == [
        (linked_config["config_path"], linked_config["config_path"]),
        (linked_config["dropin_path"], linked_config["dropin_path"] + " (absent)"),
    ]
    assert checked["diff"][0]["before"] == written and checked["diff"][0]["after"] == original


def test_restored_puts_back_a_linked_config_through_its_link_keeping_mode_and_owner(linked_config):
    """The restart's rollback copied the backup with copy remote_src: the link became a file, mode and owner went."""
    original = linked_config["real"].read_text()
    owner = os.stat(str(linked_config["real"])).st_uid
    args = _changed_then_restore_args(linked_config)
    assert linked_config["real"].read_text() != original and os.path.exists(linked_config["dropin_path"])

    done = run_module(container_runtime, args, diff=True)
    assert done["changed"] and done["restart_needed"]
    assert done["files"] == [{"path": linked_config["config_path"], "action": "update"},
                             {"path": linked_config["dropin_path"], "action": "delete"}]
    assert os.path.islink(linked_config["config_path"])  # the link stays a link
    assert linked_config["real"].read_text() == original
    st = os.stat(str(linked_config["real"]))
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == owner
    assert not os.path.exists(linked_config["dropin_path"])

    again = run_module(container_runtime, args, check_mode=True)
    assert not again["changed"] and not run_module(container_runtime, args)["changed"]


def test_restored_gives_a_file_that_is_gone_its_backup_s_mode(tmp_path):
    config = tmp_path / "daemon.json"
    backup = tmp_path / "daemon.json.bak"
    backup.write_text('{"debug": true}\n')
    backup.chmod(0o640)
    args = {"runtime": "docker", "state": "restored", "restore_backups": {str(config): str(backup)}}
    assert run_module(container_runtime, args)["changed"]
    assert config.read_text() == '{"debug": true}\n' and stat.S_IMODE(os.stat(str(config)).st_mode) == 0o640


def test_restored_refuses_a_missing_backup_before_anything_changes(linked_config):
    args = _changed_then_restore_args(linked_config)
    written = linked_config["real"].read_text()
    args["restore_backups"][linked_config["dropin_path"]] = "/nonexistent/backup~"
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(container_runtime, args)
    assert exc.value.result["msg"] == (
        "restore_backups: the backup /nonexistent/backup~ of %s is not a file on the host; nothing was restored" % linked_config["dropin_path"])
    assert linked_config["real"].read_text() == written and os.path.exists(linked_config["dropin_path"])


def test_restored_needs_something_to_restore():
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(container_runtime, {"runtime": "crio", "state": "restored"})
    assert "state is restored but any of the following are missing: restore_backups, restore_created" in exc.value.result["msg"]


# --------------------------------------------------------------------------------------
# Docker: the module's record is kept in a state file of its own, never in daemon.json
# --------------------------------------------------------------------------------------

#: The keys Docker defines in a runtime's entry of daemon.json (its ``types.Runtime``), and ``args``,
#: which nvidia-ctk writes there too (Docker ignores it).
DOCKER_RUNTIME_KEYS = {"path", "runtimeArgs", "runtimeType", "options", "args"}


def only_docker_keys(config, original):
    """Every key of daemon.json is the user's or one Docker defines where the module writes."""
    assert set(config) <= set(original) | {"runtimes", "default-runtime", "features"}
    assert set(config.get("features", {})) <= set(original.get("features", {})) | {"cdi"}
    for name, entry in config.get("runtimes", {}).items():
        assert set(entry) <= DOCKER_RUNTIME_KEYS, (name, entry)


@pytest.mark.parametrize("options", [{}, {"set_as_default": True, "enable_cdi": True}], ids=["plain", "default-cdi"])
@pytest.mark.parametrize("original", [None, '{"default-runtime": "runc", "debug": true}\n'], ids=["no-file", "file"])
def test_docker_daemon_json_holds_only_keys_docker_defines(tmp_path, docker_state_file, original, options):
    """Issue 29: the record was written into daemon.json, under a key Docker does not define."""
    path = tmp_path / "etc" / "docker" / "daemon.json"
    if original is not None:
        path.parent.mkdir(parents=True)
        path.write_text(original)
    args = dict(options, runtime="docker", config_path=str(path))
    assert run_module(container_runtime, args)["changed"]
    text = path.read_text()
    only_docker_keys(json.loads(text), json.loads(original or "{}"))
    assert "gpufleet" not in text
    written = snapshot(tmp_path)
    again = run_module(container_runtime, args)
    assert not again["changed"] and not again["restart_needed"]
    assert snapshot(tmp_path) == written  # the second run changes nothing, the state file included
    run_module(container_runtime, dict(args, state="absent"))
    if original is None:
        assert not path.exists()
    else:
        assert path.read_text() == original


def test_docker_state_file_check_mode_diff_then_written(tmp_path, docker_state_file):
    path = tmp_path / "etc" / "docker" / "daemon.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"default-runtime": "runc"}\n')
    args = {"runtime": "docker", "config_path": str(path), "set_as_default": True}
    before = snapshot(tmp_path)
    checked = run_module(container_runtime, args, check_mode=True, diff=True)
    assert snapshot(tmp_path) == before and not docker_state_file.parent.exists()  # check mode writes nothing
    assert checked["changed_files"] == [str(docker_state_file), str(path)]
    state_diff = checked["diff"][0]
    assert state_diff["before_header"] == "%s (absent)" % docker_state_file
    assert json.loads(state_diff["after"]) == {str(path): {"nvidia": {"default-runtime": "runc"}}}

    done = run_module(container_runtime, args, diff=True)
    assert done["diff"] == checked["diff"] and done["restart_needed"]
    assert json.loads(docker_state_file.read_text()) == {str(path): {"nvidia": {"default-runtime": "runc"}}}
    assert stat.S_IMODE(os.stat(str(docker_state_file)).st_mode) == 0o600
    gone = run_module(container_runtime, dict(args, state="absent"), diff=True)
    # the record is written before the change it describes, and taken out after it is undone
    assert gone["files"] == [{"path": str(path), "action": "update"}, {"path": str(docker_state_file), "action": "delete"}]
    assert path.read_text() == '{"default-runtime": "runc"}\n' and not docker_state_file.exists()


def test_docker_state_file_keeps_the_records_of_other_files_and_runtimes(tmp_path, docker_state_file):
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    one.write_text('{"default-runtime": "runc"}\n')
    two.write_text('{"default-runtime": "crun"}\n')
    for path, name in ((one, "nvidia"), (two, "nvidia"), (two, "nvidia-cdi")):
        run_module(container_runtime, {"runtime": "docker", "config_path": str(path), "runtime_name": name, "set_as_default": True})
    assert json.loads(docker_state_file.read_text()) == {
        str(one): {"nvidia": {"default-runtime": "runc"}},
        str(two): {"nvidia": {"default-runtime": "crun"}, "nvidia-cdi": {"default-runtime": "nvidia"}},
    }
    run_module(container_runtime, {"runtime": "docker", "config_path": str(one), "state": "absent"})
    assert one.read_text() == '{"default-runtime": "runc"}\n'
    assert list(json.loads(docker_state_file.read_text())) == [str(two)]


@pytest.mark.parametrize("damaged, why", [
    ("{", "is not valid JSON (line 1, column 2)"),
    ("[]", "must hold a JSON object"),
    ('{"/etc/docker/daemon.json": []}', ": /etc/docker/daemon.json is not an object"),
    ('{"/etc/docker/daemon.json": {"nvidia": true}}', ": /etc/docker/daemon.json.nvidia is not an object"),
    ('{"": [1]}', ":  is not an object"),
])
@pytest.mark.parametrize("state", ["present", "absent"])
def test_docker_a_damaged_state_file_is_refused_by_name(tmp_path, docker_state_file, damaged, why, state):
    docker_state_file.parent.mkdir(parents=True)
    docker_state_file.write_text(damaged)
    path = tmp_path / "daemon.json"
    path.write_text('{"debug": true}\n')
    before = snapshot(tmp_path)
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(container_runtime, {"runtime": "docker", "config_path": str(path), "state": state})
    msg = exc.value.result["msg"]
    assert msg.startswith(str(docker_state_file)) and why in msg, msg
    assert "nothing was written" in msg and "expected a JSON object {daemon.json path: {runtime name: record object}}" in msg
    assert snapshot(tmp_path) == before


def test_docker_an_old_in_file_record_moves_into_the_state_file(tmp_path, docker_state_file):
    """A daemon.json an earlier version wrote (its record in the runtime's entry): the next run moves the record out."""
    original = '{\n  "default-runtime": "runc",\n  "debug": true\n}\n'
    legacy = {"default-runtime": "nvidia", "debug": True, "runtimes": {"nvidia": {
        "path": "nvidia-container-runtime", "args": [],
        "gpufleet.nvidia.container_runtime state": {"default-runtime": "runc", "features.cdi": {}}}}, "features": {"cdi": True}}
    path = tmp_path / "daemon.json"
    path.write_text(json.dumps(legacy, indent=2) + "\n")
    args = {"runtime": "docker", "config_path": str(path), "set_as_default": True, "enable_cdi": True}
    moved = run_module(container_runtime, args)
    assert moved["changed"] and moved["changed_files"] == [str(docker_state_file), str(path)]
    config = json.loads(path.read_text())
    only_docker_keys(config, json.loads(original))
    assert config["runtimes"]["nvidia"] == {"path": "nvidia-container-runtime", "args": []}
    assert json.loads(docker_state_file.read_text()) == {str(path): {"nvidia": {"default-runtime": "runc", "features.cdi": {}}}}
    assert not run_module(container_runtime, args)["changed"]
    run_module(container_runtime, dict(args, state="absent"))
    assert path.read_text() == original and not docker_state_file.exists()
