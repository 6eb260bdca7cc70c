"""The controller-side action plugins' own functions (writing the report, looking at the client)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ansible_collections.gpufleet.nvidia.plugins.action import fleet_report_files as F
from ansible_collections.gpufleet.nvidia.plugins.action import kube_client_info as K
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import fleet as R
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import html as H

REPORT = R.build_report(["n1"], {"n1": {}}, generated_at="2026-11-29T18:00:00Z", run={"notes": ["lab"]})


def test_report_files_are_written_once_then_left_alone(tmp_path):
    path = str(tmp_path / "new" / "dir" / "gpufleet-report")
    written, unchanged = F.write_report_files(REPORT, path, ["json", "html"])
    assert written == [path + ".json", path + ".html"] and unchanged == []
    with open(path + ".json") as handle:
        assert json.load(handle) == REPORT
    with open(path + ".html") as handle:
        assert handle.read() == H.render_html(REPORT)
    assert stat.S_IMODE(os.stat(path + ".json").st_mode) == 0o644
    before = os.stat(path + ".html").st_mtime_ns
    written, unchanged = F.write_report_files(REPORT, path, ["json", "html"])
    assert written == [] and unchanged == [path + ".json", path + ".html"]
    assert os.stat(path + ".html").st_mtime_ns == before
    # no temporary file left beside them
    assert sorted(os.listdir(os.path.dirname(path))) == ["gpufleet-report.html", "gpufleet-report.json"]


def test_a_changed_report_is_rewritten_and_only_the_formats_asked(tmp_path):
    path = str(tmp_path / "r")
    F.write_report_files(REPORT, path, ["json"])
    other = dict(REPORT, generated_at="2026-11-30T00:00:00Z")
    written, unchanged = F.write_report_files(other, path, ["json"], mode=0o600)
    assert written == [path + ".json"] and not os.path.exists(path + ".html")
    assert stat.S_IMODE(os.stat(path + ".json").st_mode) == 0o600


def test_kube_client_is_seen_in_this_process():
    kubernetes = pytest.importorskip("kubernetes")
    assert K.client_version() == kubernetes.__version__


def test_kube_client_is_found_without_being_imported(monkeypatch):
    import sys

    pytest.importorskip("kubernetes")
    monkeypatch.delitem(sys.modules, "kubernetes", raising=False)
    assert K.client_version()
    assert "kubernetes" not in sys.modules  # found and its version read, not imported


def test_no_kube_client(monkeypatch):
    monkeypatch.setattr(K.importlib.util, "find_spec", lambda name: None)
    assert K.client_version() is None
