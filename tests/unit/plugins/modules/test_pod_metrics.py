"""The gpufleet.nvidia.pod_metrics module's read of one pod, with the API server's real refusal."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.modules import pod_metrics

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "fixtures", "k8s")
PARAMS = {"port": 9400, "path": "metrics", "prefix": "DCGM_", "max_lines": 2, "request_timeout": 5}
POD = {"name": "dcgm-exporter-x", "namespace": "nvidia-device-plugin"}


class Refused(Exception):
    def __init__(self, status, body):
        super().__init__("(%s)" % status)
        self.status, self.body, self.reason = status, body, "Bad Request"


class Core(object):
    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def connect_get_namespaced_pod_proxy_with_path(self, name, namespace, path, _request_timeout=None):
        self.calls.append((name, namespace, path))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_a_pod_without_ip_is_refused_with_the_api_servers_message():
    with open(os.path.join(FIXTURES, "pod-proxy-no-pod-ip.json"), "rb") as f:
        core = Core(Refused(400, f.read()))
    assert pod_metrics.scrape(core, POD, PARAMS) == {"ok": False, "text": "", "error": "HTTP 400: address not allowed"}
    assert core.calls == [("dcgm-exporter-x:9400", "nvidia-device-plugin", "metrics")]


@pytest.mark.parametrize("error, said", [(OSError("connection reset"), "connection reset"), (Refused(503, None), "HTTP 503: Bad Request")])
def test_other_failures_say_what_failed(error, said):
    assert pod_metrics.scrape(Core(error), POD, PARAMS)["error"] == said


def test_only_the_prefixed_lines_are_kept_up_to_the_limit():
    # Hand-written text in the exposition format, not an exporter's answer (none ran here): only the
    # module's line filter is tested.
    text = "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization.\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 3\nDCGM_FI_DEV_FB_USED{gpu=\"0\"} 1\nDCGM_X 2\n"
    assert pod_metrics.scrape(Core(text), POD, PARAMS) == {
        "ok": True, "text": "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 3\nDCGM_FI_DEV_FB_USED{gpu=\"0\"} 1", "error": None}
