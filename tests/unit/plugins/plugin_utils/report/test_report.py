"""Tests of plugin_utils/report/fleet.py: the fleet report of example fleets, as data, JSON and HTML (the example fleet: example_fleet.py)."""

from __future__ import annotations

import json
import os
import unicodedata
import xml.etree.ElementTree as ET

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible.template import trust_as_template

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import plain
from ansible_collections.gpufleet.nvidia.plugins.filter.fleet_report import fleet_report
from ansible_collections.gpufleet.nvidia.plugins.filter.fleet_report_html import fleet_report_html
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.common import hostvars as hostvars_reader
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import fleet as R
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report.rows import _name_groups, _stopped, _unvalidated
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import html as H
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import text as T
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate import host as V
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import fleets as F
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.discovery.captures import CaptureHost, fixture_facts
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.plugin_utils.report.example_fleet import (
    EXAMPLE,
    GENERATED_AT,
    HOSTS,
    ROOT,
    RUN,
    _validated,
    example_hostvars,
    example_report,
    row,
)


# --- the data -----------------------------------------------------------------------------------


def test_summary_and_order():
    report = example_report()
    assert report["status"] == "failed"
    assert report["summary"] == {
        "nodes": 6, "gpu_nodes": 4, "gpus": 12, "ok": 1, "drifted": 1, "failed": 2, "no_gpu": 1, "not_validated": 1,
        # gpu-h200-02 has a GPU and no driver: not without GPU; gpu-down-01 was never read: not known
        "without_gpu": 1, "gpu_unknown": 1,
    }
    assert [(r["host"], r["status"]) for r in report["nodes"]] == [
        ("gpu-h100-01", "failed"),
        ("gpu-h200-02", "failed"),
        ("gpu-down-01", "not_validated"),
        ("gpu-l40s-01", "drift"),
        ("gpu-h200-01", "ok"),
        ("lab-debian12", "no_gpu"),
    ]
    assert report["generated_at"] == GENERATED_AT and report["run"] == RUN
    assert json.loads(json.dumps(report)) == report  # plain data all the way down


def test_the_h200_row_from_the_real_facts():
    r = row(example_report(), "gpu-h200-01")
    assert r["os"] == "Ubuntu 24.04.3 LTS" and r["kernel"] == "6.18.44-fc-v657-gpu"
    assert r["gpus"] == {"count": 1, "names": ["NVIDIA H200"], "text": "1 x NVIDIA H200", "known": True}
    lifecycle = r["driver"].pop("lifecycle")
    assert r["driver"] == {"declared": "580", "installed": "580.159.04", "loaded": "580.159.04", "source": "preinstalled",
                           "flavor": "open", "flavor_why": None, "cuda": "13.0"}
    # judged on the day the report was generated (2026-11-29)
    assert [(e["of"], e["version"], e["state"], e["text"]) for e in lifecycle] == [
        ("declared and installed", "580.159.04", "supported",
         "R580: long-term support branch, end of life June 2028 (supported on 2026-11-29); CUDA 13; the last branch for "
         "Maxwell, Pascal and Volta; an older NVIDIA page gives August 2028"),
    ]
    assert r["runtime"] == {"name": "none", "versions": {}, "handler": "nvidia", "present": None, "text": "not checked"}
    assert r["allocatable"] == {"value": 1, "expected": 1, "resource": "nvidia.com/gpu", "text": "1 of 1"}
    assert r["sharing"]["text"] == "none"
    assert r["failed"] == [] and r["drifted"] == []


def test_drifted_failed_and_stopped_rows():
    report = example_report()
    l40s = row(report, "gpu-l40s-01")
    assert l40s["drifted"] == ["declared driver 580, loaded 550.163.01"]
    assert l40s["gpus"]["text"] == "2 x NVIDIA L40S"
    assert l40s["toolkit"] == {"declared": "1.17.8", "installed": "1.17.8-1"}
    assert l40s["runtime"]["text"] == "docker: yes"
    assert l40s["allocatable"]["text"] == "4 of 4"
    assert l40s["sharing"] == {"config": "ts-2", "replicas": 2, "text": "ts-2 (x2)"}
    failed = row(report, "gpu-h200-02")
    assert failed["failed"][0].startswith("nvidia-smi failed: NVIDIA-SMI has failed")
    assert "node gpu-h200-02 advertises no nvidia.com/gpu (expected 1): the device plugin is not running there, or found no GPU" in failed["failed"]
    assert any(m.startswith("NVIDIA device plugin pods not ready") or m.startswith("GPU Operator pods not ready") for m in failed["failed"])
    assert failed["allocatable"]["text"] == "none of 1"
    stopped = row(report, "gpu-h100-01")
    assert stopped["failed"] == [
        "the run stopped at driver upgrade: Drain the node / pods of PodDisruptionBudget default/llm-serving cannot be evicted"
    ]
    assert stopped["driver"]["declared"] == "580.95.05" and stopped["driver"]["loaded"] == "570.172.08"
    assert stopped["gpus"]["text"] == "8 x NVIDIA H100 80GB HBM3"
    down = row(report, "gpu-down-01")
    assert down["not_checked"] == ["no facts: the host was unreachable, or the run stopped before it was discovered"]
    assert down["gpus"]["text"] == "unknown (no facts)" and down["os"] is None  # never read: not a host without GPU


def test_a_validation_made_before_the_stop_is_left_out_of_the_row():
    """site.yml: discovery validated the node, then its driver layer failed (the report role's stopped entry point).

    The cluster checks leave out a node where the run stopped: no cluster verdict here either."""
    hv = example_hostvars(cluster=False)
    stop = {"stage": "the driver layer", "task": "Install the driver", "msg": "apt failed"}
    hv["gpu-h200-02"]["report_stopped_at"] = dict(stop, validation_outdated=True)
    outdated = row(R.build_report(HOSTS, hv), "gpu-h200-02")
    assert len(outdated["failed"]) == 1
    assert outdated["failed"][0].startswith("the run stopped at the driver layer: Install the driver / apt failed")
    assert outdated["status"] == "failed" and outdated["day2"] == []
    # a stop that validation itself made (validate_fail_on) keeps the validation that made it
    hv["gpu-h200-02"]["report_stopped_at"] = stop
    kept = row(R.build_report(HOSTS, hv), "gpu-h200-02")
    assert kept["failed"][0] == outdated["failed"][0]
    assert kept["failed"][1].startswith("nvidia-smi failed: NVIDIA-SMI has failed")


def test_what_was_not_checked_is_said_once_with_its_hosts():
    report = example_report()
    by_msg = dict((i["msg"], i["hosts"]) for i in report["not_checked"])
    assert by_msg["no GPU: nothing to validate"] == ["lab-debian12"]
    assert by_msg["CUDA vectorAdd on the host: not run: no nvcc on the node (install the CUDA toolkit to run it)"] == [
        "gpu-l40s-01", "gpu-h200-01",
    ]
    assert by_msg["runtime handler: not checked: no container runtime declared (container_runtime none)"] == ["gpu-h200-02", "gpu-h200-01"]


def test_report_without_cluster_says_why_on_every_row():
    report = example_report(cluster=False)
    assert report["cluster"]["checked"] is False
    reason = report["cluster"]["reason"]
    assert reason.startswith("no cluster: the Python kubernetes client is not installed")
    assert report["not_checked"][0] == {"msg": reason, "hosts": []}
    assert row(report, "gpu-h200-01")["allocatable"]["text"] == "no cluster"
    assert row(report, "gpu-h200-01")["status"] == "ok"
    assert reason not in row(report, "gpu-h200-01")["not_checked"]  # said once, for the fleet


def test_report_of_hosts_that_never_ran_the_validate_role():
    hv = {"a": {"gpufleet_nvidia": fixture_facts("debian12-l40s-x2-package"), "nvidia_driver_version": "550"}, "b": {}}
    report = R.build_report(["a", "b"], hv)
    assert report["cluster"] == {"checked": False, "reason": "no cluster checks ran", "stack": None, "cuda_pod": None, "failed": []}
    assert report["not_checked"][0]["msg"] == "cluster: not checked: no host carries the validate role's cluster checks"
    assert row(report, "a")["status"] == "not_validated"
    assert row(report, "a")["not_checked"] == ["not validated: the run did not reach gpufleet.nvidia.validate on this host"]
    assert row(report, "a")["driver"]["declared"] == "550"
    assert report["status"] == "not_validated"


def test_host_data_reads_only_the_report_variables_and_survives_broken_ones():
    class Broken(dict):
        def __getitem__(self, key):
            if key == "nvidia_driver_version":
                raise ValueError("'undefined_thing' is undefined")
            return dict.__getitem__(self, key)

    hv = {"a": Broken({"gpufleet_nvidia": {"gpu_count": 0}, "nvidia_driver_version": "{{ undefined_thing }}", "secret": "x"})}
    assert hostvars_reader.host_data(["a", "missing"], hv, R.HOST_VARS) == {"a": {"gpufleet_nvidia": {"gpu_count": 0}}, "missing": {}}


def test_host_data_reads_the_facts_from_ansible_facts_without_touching_injected_ones():
    class NoInjected(dict):
        def __getitem__(self, key):
            if key in ("gpufleet_nvidia", "gpufleet_nvidia_validation"):
                raise AssertionError("read %s as a top-level variable" % key)
            return dict.__getitem__(self, key)

        def get(self, key, default=None):
            return self[key] if key in self else default

    hv = {"a": NoInjected({"ansible_facts": {"gpufleet_nvidia": {"gpu_count": 1}, "gpufleet_nvidia_validation": {"status": "ok"}},
                           "gpufleet_nvidia": {"gpu_count": 1}, "nvidia_driver_version": "580"})}
    assert hostvars_reader.host_data(["a"], hv, R.HOST_VARS) == {
        "a": {"gpufleet_nvidia": {"gpu_count": 1}, "gpufleet_nvidia_validation": {"status": "ok"}, "nvidia_driver_version": "580"}}


def _old_host_data(hosts, hostvars):
    """host_data as it was: every host's cluster verdict read whole."""
    return dict((h, dict((k, plain(hostvars[h][k], unknown=str)) for k in R.HOST_VARS if k in hostvars[h])) for h in hosts)


class _CountedNodes(dict):
    """A verdict's node verdicts that count how many of them are read."""

    reads = 0

    def __getitem__(self, key):
        _CountedNodes.reads += 1
        return dict.__getitem__(self, key)

    def items(self):
        _CountedNodes.reads += len(self)
        return dict.items(self)


def test_the_cluster_verdict_every_host_carries_is_read_once():
    # As Ansible keeps it: one verdict object, set on every host of the play by a run_once task.
    hv = example_hostvars()
    verdicts = [h for h in HOSTS if "validate_cluster_verdict" in hv[h]]
    assert len(verdicts) > 2
    expected = R.build_report(HOSTS, None, generated_at=GENERATED_AT, run=RUN, data=_old_host_data(HOSTS, hv))
    shared = hv[verdicts[0]]["validate_cluster_verdict"]
    shared["nodes"] = _CountedNodes(shared["nodes"])
    for h in verdicts:
        hv[h]["validate_cluster_verdict"] = shared
    _CountedNodes.reads = 0
    data = hostvars_reader.host_data(HOSTS, hv, R.HOST_VARS)
    # each node verdict read once, not once per host
    assert _CountedNodes.reads == len(shared["nodes"])
    assert [h for h in HOSTS if "validate_cluster_verdict" in data[h]] == verdicts[:1]
    assert R.build_report(HOSTS, hv, generated_at=GENERATED_AT, run=RUN) == expected


def test_the_verdicts_of_several_batches_are_each_read():
    # A play with serial: the hosts of each batch carry that batch's verdict, with its nodes only.
    hv = example_hostvars()
    verdicts = [h for h in HOSTS if "validate_cluster_verdict" in hv[h]]
    batches = [verdicts[:2], verdicts[2:]]
    whole = hv[verdicts[0]]["validate_cluster_verdict"]
    for batch in batches:
        verdict = dict(whole, nodes=dict((k, v) for k, v in whole["nodes"].items() if k in batch))
        for h in batch:
            hv[h]["validate_cluster_verdict"] = verdict
    expected = R.build_report(HOSTS, None, generated_at=GENERATED_AT, run=RUN, data=_old_host_data(HOSTS, hv))
    data = hostvars_reader.host_data(HOSTS, hv, R.HOST_VARS)
    assert [h for h in HOSTS if "validate_cluster_verdict" in data[h]] == [batches[0][0], batches[1][0]]
    assert R._cluster_of(data)["nodes"].keys() == whole["nodes"].keys()  # pylint: disable=protected-access
    assert R.build_report(HOSTS, hv, generated_at=GENERATED_AT, run=RUN) == expected


# --- HTML ---------------------------------------------------------------------------------------


def test_html_is_well_formed_with_one_row_per_node():
    page = H.render_html(example_report())
    assert page.startswith("<!DOCTYPE html>\n<html lang=\"en\">")
    tree = ET.fromstring(page[page.index("<html"):])
    rows = tree.findall(".//details[@data-status]")
    assert [r.get("class") for r in rows] == ["node failed", "node failed", "node not_validated", "node drift", "node ok", "node no_gpu"]
    assert [r.find("summary/span[2]").text for r in rows] == [
        "gpu-h100-01", "gpu-h200-02", "gpu-down-01", "gpu-l40s-01", "gpu-h200-01", "lab-debian12"]
    # grouped by status, the bad ones first, each group with its count
    assert [(g.get("class"), g.find("summary/span[@class='count']").text) for g in tree.findall(".//details[@class]")
            if g.get("class").startswith("group")] == [
        ("group failed", "2"), ("group not_validated", "1"), ("group drift", "1"), ("group ok", "1"), ("group no_gpu", "1")]
    # the filters: one select each, with the fleet's values
    selects = dict((s.get("data-f"), [o.get("value") for o in s.findall("option")][1:]) for s in tree.findall(".//select"))
    assert selects["status"] == ["drift", "failed", "no GPU", "not validated", "ok"] and selects["branch"] == ["550", "570", "580", "none"]
    cards = dict((c.find("span[2]").text, c.find("span[1]").text) for c in tree.findall(".//div[@class='cards']/div"))
    assert cards == {"fleet": "FAILED", "nodes": "6", "GPU nodes": "4", "GPUs": "12", "ok": "1", "drifted": "1", "failed": "2",
                     "without GPU": "1", "not validated": "1", "past end of life": "2", "below a security floor": "3"}
    # self-contained: one inline script, no external resource
    assert page.count("<script") == 1 and "<script src" not in page and "http://" not in page and "https://" not in page and "<link" not in page
    assert "check mode" not in page.split("</header>")[0]


def test_html_says_check_mode_and_not_checked():
    report = example_report(cluster=False)
    report["run"]["check_mode"] = True
    page = H.render_html(report)
    assert "check mode: nothing was changed" in page
    assert "no cluster: the Python kubernetes client is not installed on the control host" in page
    assert "no GPU: nothing to validate <span class=\"small\">(lab-debian12)</span>" in page


def test_html_shows_the_notes_of_the_run_in_their_own_section():
    report = example_report(cluster=False)
    assert "About this fleet" not in H.render_html(report)
    report["run"]["notes"] = ["This is the local lab: no GPU.", "A stand-in serves <test doubles> & no NVIDIA software."]
    page = H.render_html(report)
    tree = ET.fromstring(page[page.index("<html"):])
    section = [s for s in tree.findall(".//section") if s.get("class") == "notes"]
    assert len(section) == 1 and section[0].find("h2").text == "About this fleet"
    assert [li.text for li in section[0].findall("ul/li")] == report["run"]["notes"]
    # at the top: before the cluster and the nodes
    assert page.index("About this fleet") < page.index("<h2>Cluster</h2>") < page.index("<h2>Nodes</h2>")


EVIL = '<script>alert("x")</script> & <b>bold</b> \'quoted\''


def test_html_escapes_everything_from_the_fleet():
    hv = example_hostvars(cluster=False)
    hv["gpu-h200-02"]["gpufleet_nvidia_validation"]["failed"].append(EVIL)
    hv["gpu-h200-02"]["gpufleet_nvidia"]["os"]["pretty_name"] = "Ubuntu <24.04> & co"
    hv['x"><img src=y onerror=alert(1)>'] = {}
    report = R.build_report(HOSTS + ['x"><img src=y onerror=alert(1)>'], hv, generated_at="<now>", run={"playbook": "<pb>.yml"}, title="Fleet <one>")
    page = H.render_html(report)
    ET.fromstring(page[page.index("<html"):])  # still well-formed
    assert "<script>alert" not in page and "<b>bold</b>" not in page and "<img" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt; &#x27;quoted&#x27;" in page
    assert "Ubuntu &lt;24.04&gt; &amp; co" in page
    assert "<title>Fleet &lt;one&gt;</title>" in page
    assert "generated &lt;now&gt;" in page and "playbook &lt;pb&gt;.yml" in page
    assert 'x&quot;&gt;&lt;img src=y onerror=alert(1)&gt;' in page


# --- the example kept for people to open --------------------------------------------------------


def test_example_fleet_files_are_current():
    report = example_report()
    json_text = R.to_json(report)
    html_text = H.render_html(report)
    paths = {os.path.join(EXAMPLE, "example-fleet.json"): json_text, os.path.join(EXAMPLE, "example-fleet.html"): html_text,
             os.path.join(EXAMPLE, "example-fleet.txt"): T.render_text(report)}
    if os.environ.get("GPUFLEET_UPDATE_FIXTURES") == "1":
        for path, text in paths.items():
            with open(path, "w") as handle:
                handle.write(text)
    for path, text in paths.items():
        if not os.path.exists(path):
            pytest.fail("%s is missing: run with GPUFLEET_UPDATE_FIXTURES=1" % path)
        with open(path) as handle:
            assert handle.read() == text, "%s is stale: run with GPUFLEET_UPDATE_FIXTURES=1" % path


# --- the real run on the two-H200 machine -------------------------------------------------------


def test_real_h200_validation_has_todays_shape():
    """The capture of tests/unit/fixtures/report/h200-x2 has the keys validate_host returns now."""
    with open(os.path.join(EXAMPLE, "h200-x2", "host_validate.json")) as handle:
        real = json.load(handle)
    today, dummy = V.validate_host(CaptureHost("ubuntu2404-h200-preinstalled"), {"container_runtime": "none"})
    declared = real["declared"]
    assert set(declared) - {"seconds"} == set(today)
    assert declared["status"] == "ok" and declared["cuda"]["passed"] is True
    assert declared["cuda"]["output"].splitlines()[-1] == "Test PASSED"
    assert real["drift_and_runtime"]["status"] == "failed"
    assert real["drift_and_runtime"]["drifted"] == ["declared driver 575, loaded 580.159.04"]


# Fields of a row that the report computes from the validation alone (the facts give the rest).
FROM_VALIDATION = ("host", "node", "status", "toolkit", "runtime", "cdi", "cuda_host", "allocatable", "sharing", "drifted",
                   "failed", "not_checked")


def test_the_report_of_the_real_h200_validation_is_the_one_that_run_wrote():
    """The row, summary and what was not checked, rebuilt from the captured validation, are what
    the real run's report (h200-x2/gpufleet-report.json) holds."""
    with open(os.path.join(EXAMPLE, "h200-x2", "host_validate.json")) as handle:
        real = json.load(handle)
    with open(os.path.join(EXAMPLE, "h200-x2", "gpufleet-report.json")) as handle:
        written = json.load(handle)
    report = R.build_report(["localhost"], {"localhost": {"gpufleet_nvidia_validation": real["declared"]}})
    row, wrote = report["nodes"][0], written["nodes"][0]
    row["runtime"].pop("versions")  # read from the facts since that run (none here)
    assert dict((k, row[k]) for k in FROM_VALIDATION) == dict((k, wrote[k]) for k in FROM_VALIDATION)
    assert row["runtime"]["text"] == "not checked" and row["allocatable"]["text"] == "no cluster"
    assert row["gpus"] == {"count": 2, "names": [], "text": "2", "known": True}  # no facts: the count the validation found
    assert dict((k, report["summary"][k]) for k in written["summary"]) == written["summary"]
    assert report["status"] == written["status"] == "ok"
    assert report["not_checked"][1:] == written["not_checked"][1:]  # the first is the cluster's: no verdict here


def test_the_real_h200_validation_against_a_wrong_declaration_fails_the_fleet():
    with open(os.path.join(EXAMPLE, "h200-x2", "host_validate.json")) as handle:
        real = json.load(handle)
    hv = {"ok": {"gpufleet_nvidia_validation": real["declared"]}, "wrong": {"gpufleet_nvidia_validation": real["drift_and_runtime"]}}
    report = R.build_report(["ok", "wrong"], hv)
    assert report["status"] == "failed"
    assert [(r["host"], r["status"]) for r in report["nodes"]] == [("wrong", "failed"), ("ok", "ok")]
    assert report["summary"] == {"nodes": 2, "gpu_nodes": 2, "gpus": 4, "ok": 1, "drifted": 0, "failed": 1, "no_gpu": 0,
                                 "not_validated": 0, "without_gpu": 0, "gpu_unknown": 0}
    wrong = report["nodes"][0]
    assert wrong["drifted"] == ["declared driver 575, loaded 580.159.04"]
    assert wrong["failed"] == [
        "containerd is not installed (container_runtime containerd)",
        "CDI is enabled (declared enabled) but no spec of kind nvidia.com/gpu is in /etc/cdi, /var/run/cdi",
    ]
    page = H.render_html(report)
    assert ('<details class="node failed" data-status="failed" data-os="unknown" data-branch="575|580" data-gpu="none" '
            'data-guard=""><summary><span><span class="badge failed">failed</span></span><span class="host">wrong</span>') in page
    assert '<div class="card failed"><span class="n">1</span><span class="l">failed</span></div>' in page


# --- the run: in progress, partial, the cluster change -------------------------------------------


def test_a_report_of_a_run_in_progress_never_looks_like_a_finished_one():
    report = R.build_report([], {}, run={"state": "running", "limit": ""})
    assert report["status"] == "incomplete"
    assert "has not written its report" in H.render_html(report)


def test_a_limited_run_says_it_is_partial_and_which_nodes_it_covers():
    report = R.build_report(["gpu-a"], {"gpu-a": {}}, run={"limit": "gpu-a"})
    assert report["run"]["partial"] is True and report["run"]["covers"] == ["gpu-a"]
    assert "partial run (--limit gpu-a): it covers gpu-a only" in H.render_html(report)
    assert "partial" not in R.build_report(["gpu-a"], {"gpu-a": {}}, run={"limit": ""})["run"]


@pytest.mark.parametrize("state,failed", [
    ("refused", "cluster change refused before any layer ran, nothing changed: no helm"),
    ("failed", "cluster layer gpu_operator failed: no helm"),
    ("applied", None),
])
def test_a_refused_or_failed_cluster_change_fails_the_report(state, failed):
    run = {"cluster_change": {"layer": "gpu_operator", "state": state, "msg": "no helm"}}
    report = R.build_report([], {}, run=run)
    assert report["cluster"]["failed"] == ([failed] if failed else [])
    assert (report["status"] == "failed") == bool(failed)


# --- the steps, on their own ----------------------------------------------------------------------


def test_gpu_names_are_grouped_in_the_order_they_come():
    assert _name_groups(["B", "A", None, "B"]) == [["B", 2], ["A", 1], ["unknown NVIDIA GPU", 1]]  # pylint: disable=protected-access


@pytest.mark.parametrize("facts,stopped,status,not_checked", [
    ({}, None, "not_validated", ["no facts: the host was unreachable, or the run stopped before it was discovered"]),
    ({}, "the run stopped at drain", "failed", []),  # unreachable, or failed before discovery: failed, not unknown
    ({"gpu_count": 1}, "the run stopped at drain", "failed", ["kept"]),
    ({"gpu_count": 1}, None, "not_validated", ["not validated: the run did not reach gpufleet.nvidia.validate on this host"]),
])
def test_a_host_the_validate_role_did_not_reach(facts, stopped, status, not_checked):
    assert _unvalidated(facts, stopped, ["kept"]) == (status, not_checked)  # pylint: disable=protected-access


@pytest.mark.parametrize("run,counts,fleet_failed,status", [
    ({"state": "running"}, {"failed": 1, "drift": 0, "not_validated": 0}, [], "incomplete"),
    ({}, {"failed": 0, "drift": 0, "not_validated": 0}, ["cluster change refused"], "failed"),
    ({}, {"failed": 0, "drift": 1, "not_validated": 1}, [], "drift"),
    ({}, {"failed": 0, "drift": 0, "not_validated": 1}, [], "not_validated"),
    ({}, {"failed": 0, "drift": 0, "not_validated": 0}, [], "ok"),
])
def test_the_fleets_status(run, counts, fleet_failed, status):
    assert R._overall(run, counts, fleet_failed) == status  # pylint: disable=protected-access


def test_what_rows_were_not_checked_is_grouped_by_message():
    rows = [{"host": "a", "not_checked": ["x", "y"]}, {"host": "b", "not_checked": ["y"]}]
    assert R._grouped_not_checked(rows) == [{"msg": "x", "hosts": ["a"]}, {"msg": "y", "hosts": ["a", "b"]}]  # pylint: disable=protected-access


def test_the_cluster_lines_of_the_page():
    assert H._cluster_lines({"checked": True}) == ["read"]  # pylint: disable=protected-access
    lines = H._cluster_lines({"checked": True, "stack": {"status": "failed", "msg": "1 pod not ready",  # pylint: disable=protected-access
                                                         "not_ready": [{"name": "p", "node": "n", "why": "<crash>"}]}})
    assert lines == ['<span class="badge failed">failed</span> 1 pod not ready', '<span class="small">p on n: &lt;crash&gt;</span>']
    assert H._cluster_lines({"checked": False}) == ['<span class="badge skipped">skipped</span> not checked']  # pylint: disable=protected-access


# --- driver branches: type and end of life per node (common/lifecycle.py) ------------------------


def _lab_driver_version(group):
    with open(os.path.join(ROOT, "inventory", "lab", "group_vars", "%s.yml" % group)) as handle:
        return yaml.safe_load(handle)["nvidia_driver_version"]


def _lab_hostvars():
    """The lab's two nodes as site.yml leaves them for the report: Debian's branch declared in the
    lab inventory, the facts of the real Debian 12 capture, the validate role's result on them."""
    hv = {}
    for host, group in (("lab-debian12", "lab_debian12"), ("lab-debian13", "lab_debian13")):
        version = _lab_driver_version(group)
        hv[host] = dict(_validated("debian12-nogpu", {"driver_version": version}, expect={"node": host}),
                        nvidia_driver_version=version)
    return hv


def test_the_lab_debian12_row_says_its_535_driver_is_past_its_end_of_life():
    """What `make demo` reports: the roles/report path (the fleet_report filter, generated_at as the
    role writes it), from the lab inventory's declared branch to the row, the page and the summary line."""
    assert _lab_driver_version("lab_debian12") == "535"  # Debian 12's archive carries 535 only
    report = fleet_report(["lab-debian12", "lab-debian13"], _lab_hostvars(), generated_at="2026-12-01T18:30:00Z")
    (entry,) = row(report, "lab-debian12")["driver"]["lifecycle"]
    assert (entry["of"], entry["version"], entry["state"]) == ("declared", "535", "past")
    text = "R535: long-term support branch, end of life June 2026 (past on 2026-12-01); CUDA 12 at most"
    assert entry["text"] == text
    (debian13,) = row(report, "lab-debian13")["driver"]["lifecycle"]
    assert (debian13["version"], debian13["state"], debian13["text"]) == (
        "550", "past", "R550: branch type not recorded, end of life June 2025 (past on 2026-12-01)")
    assert report["lifecycle"] == [
        {"branch": 535, "state": "past", "msg": text, "hosts": ["lab-debian12"]},
        {"branch": 550, "state": "past", "msg": "R550: branch type not recorded, end of life June 2025 (past on 2026-12-01)", "hosts": ["lab-debian13"]},
    ]
    # the status is the validation's: an old branch is said, not counted as a failure
    assert row(report, "lab-debian12")["status"] == "no_gpu"
    page = fleet_report_html(report)
    assert '<span class="branch past">declared 535 - %s</span>' % text in page
    assert '<li><span class="badge drift">past</span> %s <span class="small">(lab-debian12)</span></li>' % text in page
    assert '<div class="card drift"><span class="n">2</span><span class="l">past end of life</span></div>' in page
    ET.fromstring(page[page.index("<html"):])


def test_the_report_roles_summary_line_names_the_branches_past_their_end_of_life():
    """roles/report's 'Say what the report says' message, templated by Ansible's Templar on the lab's report."""
    with open(os.path.join(ROOT, "roles", "report", "tasks", "main.yml")) as handle:
        (say,) = [t for t in yaml.safe_load(handle)[0]["block"] if t["name"] == "Say what the report says and where it is"]
    report = R.build_report(["lab-debian12", "lab-debian13"], _lab_hostvars(), generated_at="2026-12-01T18:30:00Z")
    variables = {"__report": report, "s": report["summary"], "report_formats": ["json", "html", "txt"], "__report_path": "/r/report",
                 "report_summary_nodes": 20}
    # With the plugin loader set up to find the collection's filters (the message uses fleet_report_text).
    msg = F._templar(variables).template(trust_as_template(say["ansible.builtin.debug"]["msg"]))
    lines = msg.splitlines()
    assert lines[-1] == "The whole report: /r/report.txt"
    assert all(len(line) <= T.TEXT_WIDTH for line in lines)
    said = " ".join(msg.split())  # the wrapped lines joined again: nothing was cut
    assert "branch R535: long-term support branch, end of life June 2026 (past on 2026-12-01); CUDA 12 at most (lab-debian12)" in said
    assert "branch R550: branch type not recorded, end of life June 2025 (past on 2026-12-01) (lab-debian13)" in said


@pytest.mark.parametrize(
    "declared, installed, expected",
    [
        ("580", "580.95.05", [("declared and installed", "580.95.05", "supported")]),
        ("580", "570.172.08", [("declared", "580", "supported"), ("installed", "570.172.08", "past")]),
        (None, "470.256.02", [("installed", "470.256.02", "unknown")]),  # not in the table: said, not guessed
        ("590", None, [("declared", "590", "no_end_date")]),
        (595, None, [("declared", "595", "supported")]),  # an unquoted YAML number
        ("5x5", None, []),  # not a version: nothing to judge
    ],
)
def test_each_rows_declared_and_installed_branches(declared, installed, expected):
    hv = {"n": {"nvidia_driver_version": declared, "gpufleet_nvidia_validation": {"driver": {"installed": installed}}}}
    report = R.build_report(["n"], hv, today="2026-12-01")
    assert [(e["of"], e["version"], e["state"]) for e in row(report, "n")["driver"]["lifecycle"]] == expected


def test_the_report_date_is_today_else_the_day_it_was_generated():
    hv = {"n": {"nvidia_driver_version": "535"}}
    assert R.build_report(["n"], hv, generated_at="2026-06-30T23:59:59Z")["nodes"][0]["driver"]["lifecycle"][0]["state"] == "supported"
    assert R.build_report(["n"], hv, generated_at="2026-06-30T23:59:59Z", today="2026-07-01")["lifecycle"][0]["state"] == "past"
    # generated_at is free text: one that is not a date leaves the branch not compared
    assert R.build_report(["n"], hv, generated_at="yesterday")["lifecycle"][0]["state"] == "not_compared"
    with pytest.raises(GpuFleetError, match="today: 'soon' is not a date"):
        R.build_report(["n"], hv, today="soon")


def test_the_filter_refuses_a_bad_today():
    with pytest.raises(AnsibleFilterError, match="fleet_report: today: 'soon' is not a date"):
        fleet_report(["n"], {"n": {}}, today="soon")


def test_an_unknown_branch_is_marked_on_the_page():
    report = R.build_report(["n"], {"n": {"nvidia_driver_version": "470"}}, today="2026-12-01")
    page = H.render_html(report)
    assert ('<span class="branch unknown">declared 470 - R470: not in the collection\'s driver lifecycle table (read '
            '2026-12-03): its support and end of life are unknown</span>') in page.replace("&#x27;", "'")
    assert '<div class="card "><span class="n">0</span><span class="l">past end of life</span></div>' in page
    supported = H.render_html(R.build_report(["m"], {"m": {"nvidia_driver_version": "580"}}, today="2026-12-01"))
    assert '<span class="branch">declared 580 - R580 supported</span>' in supported  # in full once, under Driver branches
    assert 'R580: long-term support branch, end of life June 2028 (supported on 2026-12-01)' in supported


# --- day-2 guards, the flavour, without GPU, long reasons ------------------------------------------


def test_each_row_gives_its_day2_guards():
    report = example_report()
    guards = row(report, "gpu-l40s-01")["day2"]
    assert [(g["name"], g["status"]) for g in guards] == [
        ("kernel_next_boot", "ok"), ("driver_libraries", "ok"), ("nvml_reload", "ok"), ("isolation", "ok"),
        ("runtime_drift", "ok")]
    # Docker: isolation is not the toolkit role's default there
    assert guards[3]["title"] == "isolation of unprivileged containers" and "not declared" in guards[3]["msg"]
    assert row(report, "gpu-h100-01")["day2"] == []  # not validated: no guard was checked
    page = H.render_html(report)
    assert "<th>day-2 guards</th>" in page
    # the guards that are ok on one line, those not checked on another; one that drifted or failed on its own, with why
    assert ('<span class="badge ok">ok</span> next boot kernel&#x27;s module, library / module versions, NVML after '
            'daemon-reload, isolation of unprivileged containers, runtime drift') in page
    assert '<span class="badge skipped">not checked</span> next boot kernel&#x27;s module, library / module versions' in page
    bad = H._guards_html([{"title": "runtime drift", "status": "drift", "msg": "<x> moved"}])  # pylint: disable=protected-access
    assert bad == '<span class="badge drift">drift</span> runtime drift <span class="small">&lt;x&gt; moved</span>'
    text = T.render_text(report)
    assert "  day-2       next boot kernel's module: ok; library / module versions: ok; NVML after" in text


def test_the_flavour_is_never_blank_where_a_driver_is_there():
    report = example_report()
    smi_failing = row(report, "gpu-h200-02")["driver"]  # the driver's files are there, its module is not loaded
    assert (smi_failing["flavor"], smi_failing["flavor_why"]) == (
        "unknown", "no nvidia module is loaded and modinfo found no installed one to read it from")
    assert "flavour unknown (no nvidia module is loaded and modinfo found no installed one to read it from), preinstalled" \
        in H.render_html(report)
    assert "(flavour unknown (no nvidia module is loaded and modinfo found no installed one to read it from), preinstalled)" \
        in " ".join(T.render_text(report).split())
    assert (row(report, "lab-debian12")["driver"]["flavor"], row(report, "gpu-l40s-01")["driver"]["flavor"]) == (None, "proprietary")
    loaded = R.build_report(["n"], {"n": {"gpufleet_nvidia": {"gpu_count": 1, "driver": {"version": "580.95.05", "flavor": None}}}})
    assert loaded["nodes"][0]["driver"]["flavor"] == "unknown"
    assert "names neither open nor proprietary" in loaded["nodes"][0]["driver"]["flavor_why"]


def test_without_gpu_counts_only_the_nodes_known_to_have_none():
    report = example_report()
    page = H.render_html(report)
    assert '<div class="card "><span class="n">1</span><span class="l">without GPU</span></div>' in page
    assert row(report, "gpu-h200-02")["gpus"]["count"] == 1  # GPUs, no driver: not without GPU
    assert T.summary_line(report) == ("FAILED: 6 nodes, 4 with GPUs (12 GPUs), 1 without GPU, 1 never read: 1 ok, 1 drifted, "
                                      "2 failed, 1 with nothing to validate (no GPU), 1 not validated")


def test_long_reasons_are_wrapped_not_cut():
    reason = "containerd is not installed (container_runtime containerd) " * 6 + "/var/lib/rancher/rke2/agent/etc/" + "x" * 120
    hv = {"n": {"gpufleet_nvidia_validation": {"status": "failed", "gpu_count": 1, "failed": [reason], "checks": []}}}
    report = R.build_report(["n"], hv)
    lines = T.render_text(report).splitlines()
    start = [i for i, line in enumerate(lines) if line.startswith("  failed ")][0]
    end = [i for i, line in enumerate(lines) if line.startswith("  fix ")][0]  # the fix follows the reasons
    block = lines[start:end]
    assert len(block) > 3 and " ".join(" ".join(block).split()[1:]) == " ".join(reason.split())
    assert [line for line in block if len(line) > T.TEXT_WIDTH] == [line for line in block if "x" * 120 in line]  # a path stays whole
    page = H.render_html(report)
    assert "<li>%s</li>" % reason.strip() in page and "overflow-wrap: anywhere" in page


@pytest.mark.parametrize("msg, fix", [
    ("Task failed: Premature end of stream waiting for become success.\n>>> Standard Error\n/bin/sh: 1: sudo: not found",
     "gpufleet_become: false"),
    ("Failed to connect to the host via ssh: ssh: connect to host 10.0.0.9 port 22: Connection timed out",
     "-m ansible.builtin.ping"),
    ("apt-get update failed (rc 100): E: Failed to fetch http://repo.invalid/dists/InRelease  Could not resolve 'repo.invalid'",
     "cannot reach the package repository"),
])
def test_where_the_run_stopped_comes_with_the_fix_of_a_known_cause(msg, fix):
    stopped = _stopped({"stage": "the driver layer", "task": "Install", "msg": msg})  # pylint: disable=protected-access
    assert stopped.startswith("the run stopped at the driver layer: Install / ") and ("(fix: " + "") in stopped
    assert fix in stopped.split("(fix: ")[1]


def test_a_message_that_gives_its_fix_gets_no_other():
    msg = "preflight: 1 blocking problem: [x] y (fix: z). To accept it on purpose instead: waive: [x]"
    assert _stopped({"stage": "discovery", "msg": msg}).count("(fix: ") == 1  # pylint: disable=protected-access


def test_a_declared_gpu_node_without_a_gpu_is_failed_with_the_fix():
    # lab-debian12 has no GPU: not declared, it is a node without GPU; declared in gpu_nodes, it is a failure
    hv = example_hostvars(cluster=False)
    plain_row = row(R.build_report(HOSTS, hv, generated_at=GENERATED_AT, run=RUN), "lab-debian12")
    assert plain_row["status"] == "no_gpu" and plain_row["failed"] == []
    report = R.build_report(HOSTS, hv, generated_at=GENERATED_AT, run=dict(RUN, gpu_nodes=["lab-debian12", "gpu-h200-01"]))
    declared = row(report, "lab-debian12")
    assert declared["status"] == "failed" and report["status"] == "failed"
    assert declared["failed"] == [
        "declared a GPU node (inventory group gpu_nodes), but no NVIDIA GPU was found on it, so no GPU layer prepared it "
        "(fix: check that the node sees its GPU on the PCI bus, lspci -nn -d 10de:, and its instance type or BIOS; or "
        "take the host out of gpu_nodes; or set gpufleet_prepare_without_gpu: true to prepare it without one, as for an "
        "image build)"]
    again = R.build_report(HOSTS, hv, generated_at=GENERATED_AT, run=RUN)
    assert row(report, "gpu-h200-01")["status"] == row(again, "gpu-h200-01")["status"]


@pytest.mark.parametrize("packages, flavor", [
    (["nvidia-kernel-dkms", "nvidia-driver", "libcuda1"], "proprietary"),  # Debian's, as the lab installs them
    (["nvidia-open-kernel-dkms", "nvidia-driver"], "open"),
    (["linux-modules-nvidia-580-server-open-6.8.0-45-generic", "nvidia-utils-580-server"], "open"),  # Ubuntu's
    (["nvidia-dkms-550-server", "nvidia-utils-550-server"], "proprietary"),
])
def test_without_a_module_the_flavour_is_the_installed_packages_as_the_driver_role_says(packages, flavor):
    # The driver role says which flavour it installed; the report said "flavour unknown" where
    # DKMS built no module (the lab): the packages say which.
    driver = {"version": None, "flavor": None, "installed": {"state": "missing", "flavor": None},
              "packages": [{"name": n, "version": "1"} for n in packages], "source": "package"}
    report = R.build_report(["n"], {"n": {"gpufleet_nvidia": {"gpu_count": 0, "driver": driver}}})
    found = report["nodes"][0]["driver"]
    assert found["flavor"] == flavor and "installed packages" in found["flavor_why"]


# --- security floors ----------------------------------------------------------------------------


def test_the_example_fleet_has_a_node_below_each_kind_of_floor_each_line_naming_its_bulletin():
    report = example_report()
    kinds = dict((f["kind"], r["host"]) for r in report["nodes"] for f in r["security"]["findings"])
    assert kinds == {"driver": "gpu-h200-01", "toolkit": "gpu-l40s-01", "runtime": "lab-debian12", "pairing": "lab-debian12"}
    assert [(i["bulletin"], i["hosts"]) for i in report["security"]] == [
        ("nvidia-5850", ["gpu-l40s-01"]), ("nvidia-5861", ["gpu-h200-01"]),
        ("containerd-eol", ["gpu-l40s-01", "lab-debian12"]), ("k8s-containerd", ["lab-debian12"])]
    text = " ".join(T.render_text(report).split())
    assert ("security below a floor: driver 580.159.04 is below R580's security floor 580.178.04: NVIDIA security "
            "bulletin 5861 (GPU Display Driver, September 2026: CVE-2026-47587 and more); install 580.178.04 or later") in text
    assert "Container Toolkit 1.17.8-1 is below its security floor 1.19.1: NVIDIA security bulletin 5850" in text
    page = H.render_html(report)
    assert "<h2>Security floors</h2>" in page and "<li>driver 580.159.04 - nvidia-5861, fixed in 580.178.04</li>" in page


def test_a_fleet_at_its_floors_says_so():
    report = R.build_report(["n"], {"n": {"nvidia_driver_version": "580"}}, today="2026-12-03")
    assert report["nodes"][0]["security"]["state"] == "not_judged" and report["security"] == []
    assert "<li>no node below a security floor</li>" in H.render_html(report)


@pytest.mark.parametrize("hostile", ["\x1b[2J\x1b]0;owned\x07", "\x9b2J", "\x9d0;owned\x9c", "a\rb", "\u202eevil", "\x00\x7f"])
def test_the_text_report_passes_no_terminal_control_through(hostile):
    """A reason read from a node reaches the terminal of whoever reads the role's output: an ESC or a C1
    CSI (U+009B) there would move the cursor, retitle the window or hide lines."""
    validation = {"status": "failed", "gpu_count": 1, "failed": ["bad " + hostile], "checks": []}
    hv = {"n" + hostile: {"gpufleet_nvidia_validation": validation}}
    text = T.render_text(R.build_report(["n" + hostile], hv))
    assert not any(ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf") for ch in text)
    assert "bad " + hostile.encode("unicode_escape").decode("ascii") in text.replace("\n" + " " * 14, " ")


def test_text_and_summary_show_the_notes_of_the_run_at_the_top():
    """The notes (what a lab lacks, for instance) are in the text as in the HTML and JSON: whole in the
    .txt file, their first sentences in the summary the report role prints."""
    report = example_report(cluster=False)
    assert "note" not in T.render_text(report).split("\n\n", maxsplit=1)[0]
    report["run"]["notes"] = [
        "This is the local lab: no GPU. The nodes share\nthis machine's kernel.",
        "The EL 9 node is a STAND-IN, not Rocky Linux: a Debian 12 userland whose os-release says Rocky Linux "
        "9.6 (scripts/build-el-images.sh), with the real dnf 4.14 and rpm.",
    ]
    text = T.render_text(report)
    head = text[: text.index("  cluster")]
    assert [line for line in head.splitlines() if line.startswith("  note")] == [
        "  note        This is the local lab: no GPU. The nodes share this machine's kernel.",
        "  note        The EL 9 node is a STAND-IN, not Rocky Linux: a Debian 12 userland whose os-release",
    ]
    assert "              says Rocky Linux 9.6 (scripts/build-el-images.sh), with the real dnf 4.14 and rpm.\n" in head
    summary = T.render_summary(report, path="gpufleet-report/gpufleet-report.txt")
    head = summary[: summary.index("  cluster")]
    assert "  note        This is the local lab: no GPU. [...]\n" in head
    assert "  note        The EL 9 node is a STAND-IN, not Rocky Linux: a Debian 12 userland whose os-release\n" in head
    assert "share this machine's kernel" not in summary
