"""The fleet report's DRA part: a node's row says what the dra_driver role found there."""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import fleet
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import html as report_html

DRA = {"name": "gpu-a", "host": "gpu-a", "published": 8, "expected": 8, "status": "ok", "text": "DRA: 8 devices published",
       "claim": "allocated, pod running"}


def test_a_dra_node_says_how_many_devices_it_publishes_and_what_became_of_its_claim():
    report = fleet.build_report(["gpu-a", "gpu-b"], {"gpu-a": {"dra_driver_node": DRA}, "gpu-b": {}}, generated_at="2026-12-01T00:00:00Z")
    rows = dict((r["host"], r) for r in report["nodes"])
    assert rows["gpu-a"]["dra"] == {"published": 8, "expected": 8, "status": "ok", "claim": "allocated, pod running",
                                    "text": "DRA: 8 devices published, claim allocated, pod running"}
    assert rows["gpu-b"]["dra"] is None
    assert "DRA: 8 devices published, claim allocated, pod running" in report_html.render_html(report)


def test_a_node_that_publishes_too_few_says_so():
    short = dict(DRA, published=7, status="mismatch", text="DRA: 7 GPUs published, discovery found 8", claim=None)
    report = fleet.build_report(["gpu-a"], {"gpu-a": {"dra_driver_node": short}}, generated_at="2026-12-01T00:00:00Z")
    assert report["nodes"][0]["dra"]["text"] == "DRA: 7 GPUs published, discovery found 8"
