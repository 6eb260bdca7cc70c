"""Tests of module_utils/common/io.py: the one writer, on real files in a temporary folder.

The module side goes through a stand-in AnsibleModule whose atomic_move is the rename a
same-directory move is in AnsibleModule (and can be made to fail, as an interrupted run does).
"""

from __future__ import annotations

import glob
import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import io as safe_io
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.common.fakes import FakeModule


class Module(FakeModule):
    """The shared fake module, its moves recorded and, with ``fail_move``, interrupted."""

    def __init__(self, tmpdir, fail_move=False):
        super().__init__(tmpdir)
        self.moves = []
        self.fail_move = fail_move

    def atomic_move(self, src, dest, unsafe_writes=False):
        self.moves.append((src, dest))
        if self.fail_move:
            raise KeyboardInterrupt("interrupted")
        super().atomic_move(src, dest, unsafe_writes)


def test_the_temporary_file_lies_outside_the_targets_folder_under_a_name_no_runtime_imports(tmp_path):
    conf_d = tmp_path / "conf.d"
    module = Module(tmp_path / "elsewhere")
    safe_io.write_file(module, str(conf_d / "99-nvidia.toml"), "version = 2\n")
    (src, dest), = module.moves
    # CRI-O reads every file under crio.conf.d, dotfiles and sub-folders included: the partial is one folder up
    assert os.path.dirname(src) == str(tmp_path) and dest == str(conf_d / "99-nvidia.toml")
    assert src.endswith(safe_io.PARTIAL_SUFFIX) and os.path.basename(src).startswith(".conf.d.99-nvidia.toml.")
    # containerd's import glob, which matches dotfiles, apt's and dnf's extensions: none reads it
    for pattern in ("*.toml", ".*.toml", "*.list", "*.sources", "*.repo", "*.conf", "*.pref"):
        assert not glob.fnmatch.fnmatch(os.path.basename(src), pattern)
    assert (conf_d / "99-nvidia.toml").read_text() == "version = 2\n"
    assert oct(os.stat(str(conf_d / "99-nvidia.toml")).st_mode & 0o777) == "0o644"


def test_an_interrupted_write_leaves_nothing_in_the_folder_a_runtime_reads(tmp_path):
    conf_d = tmp_path / "crio.conf.d"
    conf_d.mkdir()
    target = conf_d / "99-nvidia.toml"
    target.write_text("old\n")
    module = Module(tmp_path, fail_move=True)
    with pytest.raises(KeyboardInterrupt):
        safe_io.write_file(module, str(target), "new\n")
    assert target.read_text() == "old\n" and os.listdir(str(conf_d)) == ["99-nvidia.toml"]
    left = [p for p in os.listdir(str(tmp_path)) if p != "crio.conf.d"]
    assert all(p.endswith(safe_io.PARTIAL_SUFFIX) for p in left) and module.cleanup == [str(tmp_path / left[0])]


@pytest.mark.parametrize("change", ["write", "remove"])
def test_the_next_write_or_removal_takes_away_the_partials_of_an_interrupted_one(tmp_path, change):
    conf_d = tmp_path / "crio.conf.d"
    conf_d.mkdir()
    target = conf_d / "99-nvidia.toml"
    target.write_text("old\n")
    (conf_d / (".99-nvidia.toml.k2j4" + safe_io.PARTIAL_SUFFIX)).write_text("ha")  # a killed write of before
    (tmp_path / (".crio.conf.d.99-nvidia.toml.x7q1" + safe_io.PARTIAL_SUFFIX)).write_text("ha")
    (conf_d / (".10-crio.conf.aaaa" + safe_io.PARTIAL_SUFFIX)).write_text("another file's")
    if change == "write":
        safe_io.write_file(Module(tmp_path), str(target), "new\n")
    else:
        safe_io.remove_file(Module(tmp_path), str(target))
    assert sorted(os.listdir(str(conf_d))) == sorted([".10-crio.conf.aaaa" + safe_io.PARTIAL_SUFFIX] + (
        ["99-nvidia.toml"] if change == "write" else []))
    assert os.listdir(str(tmp_path)) == ["crio.conf.d"]
    assert safe_io.leftover_partials(str(target)) == []


def test_a_symlinked_config_is_written_through_and_stays_a_link(tmp_path):
    real = tmp_path / "real" / "config.toml"
    real.parent.mkdir()
    real.write_text("old\n")
    os.chmod(str(real), 0o600)
    link = tmp_path / "config.toml"
    os.symlink(str(real), str(link))
    backup = safe_io.write_file(Module(tmp_path), str(link), "new\n", backup=True)
    assert os.path.islink(str(link)) and os.readlink(str(link)) == str(real)
    assert real.read_text() == "new\n" and oct(os.stat(str(real)).st_mode & 0o777) == "0o600"
    assert open(backup).read() == "old\n"
    safe_io.replace_file(str(link), "again\n")
    assert os.path.islink(str(link)) and real.read_text() == "again\n"


def test_text_that_is_not_unicode_is_refused_and_nothing_is_written(tmp_path):
    target = tmp_path / "daemon.json"
    bad = '{"runtimes": {"nvidia\udcff": {}}}'
    with pytest.raises(GpuFleetError, match=r"daemon.json: the new content is not valid Unicode .*nothing was written"):
        safe_io.write_file(Module(tmp_path), str(target), bad)
    with pytest.raises(GpuFleetError):
        safe_io.replace_file(str(target), bad)
    assert os.listdir(str(tmp_path)) == []
    # a character outside the Basic Multilingual Plane, whole, is plain UTF-8
    safe_io.write_file(Module(tmp_path), str(target), '{"k": "\U0001f680"}')
    assert target.read_bytes() == b'{"k": "\xf0\x9f\x9a\x80"}'


def test_the_control_host_writer_sets_a_mode_asked_for_and_keeps_one_otherwise(tmp_path):
    target = tmp_path / "report" / "fleet.json"
    safe_io.replace_file(str(target), "{}")
    assert oct(os.stat(str(target)).st_mode & 0o777) == "0o644"
    os.chmod(str(target), 0o604)
    safe_io.replace_file(str(target), "{\"a\": 1}")
    assert oct(os.stat(str(target)).st_mode & 0o777) == "0o604" and target.read_text() == "{\"a\": 1}"
    safe_io.replace_file(str(target), "{}", mode=0o640)
    assert oct(os.stat(str(target)).st_mode & 0o777) == "0o640"
    assert os.listdir(str(target.parent)) == ["fleet.json"]


def test_removing_a_link_removes_the_link_only(tmp_path):
    real = tmp_path / "real.toml"
    real.write_text("x")
    link = tmp_path / "link.toml"
    os.symlink(str(real), str(link))
    assert safe_io.remove_file(Module(tmp_path), str(link)) is None
    assert not os.path.lexists(str(link)) and real.read_text() == "x"
    assert safe_io.remove_file(Module(tmp_path), str(link)) is None


@pytest.mark.parametrize("change", ["write", "remove"])
def test_a_backup_lies_outside_the_folder_a_runtime_reads(tmp_path, change):
    """AnsibleModule.backup_local puts the copy beside the file: in crio.conf.d, CRI-O would read it after the new
    drop-in (``99-nvidia.toml.<pid>.<date>~`` sorts after ``99-nvidia.toml``), its old settings winning."""
    conf_d = tmp_path / "crio.conf.d"
    conf_d.mkdir()
    target = conf_d / "99-nvidia.toml"
    target.write_text("old\n")
    if change == "write":
        backup = safe_io.write_file(Module(tmp_path), str(target), "new\n", backup=True)
    else:
        backup = safe_io.remove_file(Module(tmp_path), str(target), backup=True)
    assert os.listdir(str(conf_d)) == (["99-nvidia.toml"] if change == "write" else [])
    assert os.path.dirname(backup) == str(tmp_path) and os.path.basename(backup) == "crio.conf.d.99-nvidia.toml.bak"
    assert open(backup).read() == "old\n"
