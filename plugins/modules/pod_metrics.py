#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pod_metrics
short_description: Read pods' Prometheus metrics endpoints through the Kubernetes API server's proxy
version_added: 0.1.0
description:
  - "Runs on the control host (C(delegate_to: localhost)) with the Python kubernetes client. For each of
    O(pods), reads C(GET /api/v1/namespaces/<namespace>/pods/<name>:<port>/proxy/<path>) (the API server
    connects to the pod, so no route from the control host to the pod network is needed) and returns
    what it answered, or why it did not."
  - "A pod that does not answer is not a failure of the module: its entry in RV(scrapes) says
    C(ok: false) and the error; the validate role judges it. The module fails only where no client can
    be built (no kubeconfig, no Python kubernetes client)."
  - "The validate role reads the DCGM exporter's metrics with it (C(DCGM_FI_DEV_GPU_UTIL) and the
    other DCGM fields)."
author:
  - gpufleet.nvidia maintainers (@gpufleet)
options:
  pods:
    description: The pods to read, each with C(name) and C(namespace).
    type: list
    elements: dict
    required: true
  port:
    description: The port of the metrics endpoint (the DCGM exporter's is 9400).
    type: int
    default: 9400
  path:
    description: The endpoint's path, without the leading slash.
    type: str
    default: metrics
  prefix:
    description: Only the answer's lines that start with this are returned (V('') returns every line).
    type: str
    default: DCGM_
  max_lines:
    description: At most this many lines are returned per pod.
    type: int
    default: 50
  kubeconfig:
    description: Kubeconfig file; empty uses K8S_AUTH_KUBECONFIG, KUBECONFIG or ~/.kube/config.
    type: raw
  context:
    description: Kubeconfig context; empty is the current one.
    type: str
  request_timeout:
    description: Seconds one read may take.
    type: int
    default: 15
requirements:
  - the Python kubernetes client on the control host
extends_documentation_fragment:
  - gpufleet.nvidia.attributes.read_only
"""

EXAMPLES = r"""
- name: Read the DCGM exporters' metrics
  gpufleet.nvidia.pod_metrics:
    pods: [{name: dcgm-exporter-x7k2p, namespace: nvidia-device-plugin}]
  delegate_to: localhost
  register: scraped
"""

RETURN = r"""
scrapes:
  description: Per pod name, whether the endpoint answered, the matching lines, and the error.
  type: dict
  returned: success
  sample:
    dcgm-exporter-x7k2p:
      ok: true
      text: 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-5b2f...",modelName="NVIDIA H100 80GB HBM3"} 0'
      error: null
"""

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.upgrade import kube_api


def _error(exc):
    """The status and first line of what the API server (or the connection) said."""
    status = getattr(exc, "status", None)
    body = getattr(exc, "body", None)
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body or getattr(exc, "reason", None) or str(exc)
    try:
        text = json.loads(text).get("message") or text  # a Status object: its message
    except (ValueError, AttributeError):
        pass
    first = str(text).strip().splitlines()[0] if str(text).strip() else type(exc).__name__
    return "HTTP %s: %s" % (status, first[:300]) if status else first[:300]


def scrape(core, pod, params):
    """``{ok, text, error}`` of one pod's endpoint."""
    try:
        text = core.connect_get_namespaced_pod_proxy_with_path(
            "%s:%d" % (pod["name"], params["port"]), pod["namespace"], params["path"], _request_timeout=params["request_timeout"])
    except Exception as exc:  # pylint: disable=broad-except
        # Any failure is the pod's answer, judged by the validate role.
        return {"ok": False, "text": "", "error": _error(exc)}
    lines = [ln for ln in str(text).splitlines() if ln.startswith(params["prefix"])][: params["max_lines"]]
    return {"ok": True, "text": "\n".join(lines), "error": None}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            pods=dict(type="list", elements="dict", required=True),
            port=dict(type="int", default=9400),
            path=dict(type="str", default="metrics"),
            prefix=dict(type="str", default="DCGM_"),
            max_lines=dict(type="int", default=50),
            kubeconfig=dict(type="raw"),
            context=dict(type="str"),
            request_timeout=dict(type="int", default=15),
        ),
        supports_check_mode=True,
    )
    try:
        from kubernetes import client  # pylint: disable=import-outside-toplevel

        core = client.CoreV1Api(kube_api.api_client(module.params["kubeconfig"], module.params["context"], module.params["request_timeout"]))
    except ImportError as exc:
        module.fail_json(msg="pod_metrics: the Python kubernetes client is not installed on the control host (%s)" % exc)
    except GpuFleetError as exc:
        module.fail_json(msg=exc.msg.replace("gpu_drain:", "pod_metrics:", 1), **exc.details)
    scrapes = dict((p["name"], scrape(core, p, module.params)) for p in module.params["pods"])
    module.exit_json(changed=False, scrapes=scrapes)


if __name__ == "__main__":
    main()
