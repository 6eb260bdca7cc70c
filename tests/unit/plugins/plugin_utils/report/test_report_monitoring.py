"""The fleet report's monitoring part: a node's row says its GFD labels and DCGM metrics as checked."""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import fleet, html, text as report_text

LABELS_OK = {"name": "gfd_labels", "status": "ok", "msg": "node gpu-a: nvidia.com/gpu.count=8, nvidia.com/gpu.memory=143771"}
METRICS_SKIPPED = {"name": "metrics", "status": "skipped", "msg": (
    "node gpu-a: metrics not checked: DCGM exporter pod dcgm-exporter-x is Running without a pod IP, so the API server's proxy "
    "cannot reach it: no kubelet ran its containers (a test control plane with a fake kubelet?)")}


def _report(checks):
    cluster = {"checked": True, "nodes": {"gpu-a": {"node": "gpu-a", "status": "ok", "checks": checks, "failed": [], "drifted": [],
                                                    "not_checked": [c["msg"] for c in checks if c["status"] == "skipped"]}}}
    hostvars = {"gpu-a": {"validate_cluster_verdict": cluster}, "gpu-b": {"validate_cluster_verdict": cluster}}
    return fleet.build_report(["gpu-a", "gpu-b"], hostvars, generated_at="2026-12-01T00:00:00Z")


def test_a_node_shows_its_labels_and_metrics_as_checked():
    report = _report([LABELS_OK, METRICS_SKIPPED])
    rows = dict((r["host"], r) for r in report["nodes"])
    assert rows["gpu-a"]["monitoring"] == {
        "labels": {"status": "ok", "msg": LABELS_OK["msg"]},
        "metrics": {"status": "skipped", "msg": METRICS_SKIPPED["msg"]},
        "text": "GFD labels: ok; DCGM metrics: not checked",
    }
    assert rows["gpu-b"]["monitoring"] is None
    assert "GFD labels: ok; DCGM metrics: not checked" in html.render_html(report)
    text = report_text.render_text(report)
    assert "  monitoring  ok: node gpu-a: nvidia.com/gpu.count=8" in text
    assert "  monitoring  not checked: node gpu-a: metrics not checked" in text


def test_a_node_without_those_checks_has_no_monitoring_entry():
    assert _report([{"name": "node", "status": "ok", "msg": "node gpu-a is Ready"}])["nodes"][0]["monitoring"] is None
