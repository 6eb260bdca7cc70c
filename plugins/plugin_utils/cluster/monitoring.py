# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU metrics of the device-plugin path: NVIDIA's DCGM exporter, as a second Helm release.

On the device-plugin path (every GPU node prepared on the host) nothing else runs the exporter:
the GPU Operator's ``dcgmExporter`` is the operator path's. The ``device_plugin`` role installs
NVIDIA's ``dcgm-exporter`` chart (https://github.com/NVIDIA/dcgm-exporter, ``deployment/`` at
the tag ``4.5.3-4.8.2``: chart 4.8.2) beside the plugin, through the internal helm_release role,
with these values:

- ``nodeSelector``: ``nvidia.com/gpu.present=true``, the label the device plugin's plan puts on
  every GPU node of the inventory (the chart's default selects every node);
- ``runtimeClassName``: the plugin's RuntimeClass, so the NVIDIA runtime hands the exporter the
  GPUs;
- no ``securityContext.privileged``: the chart does not declare it (its ``securityContext`` default
  names runAsNonRoot, runAsUser, capabilities and allowPrivilegeEscalation), so the values check
  refuses it. The exporter asks for no ``nvidia.com/gpu`` and sees the node's GPUs through the
  image's ``NVIDIA_VISIBLE_DEVICES=all``, which the NVIDIA runtime ignores in unprivileged
  containers where the toolkit isolates them (``container_toolkit_isolate_unprivileged``): see
  docs/cluster.md;
- ``kubernetesDRA.enabled``: the exporter's DRA mode. The chart then sets
  ``KUBERNETES_ENABLE_DRA=true`` (``templates/daemonset.yaml``), the variable of the exporter's
  ``--kubernetes-enable-dra`` ("Capture metrics associated with GPUs managed by Kubernetes Dynamic
  Resource Allocation (DRA) API", ``pkg/cmd/app.go``), and gives the pod the service account
  token it reads the ResourceClaims with: a pod's GPU taken through a ResourceClaim is attributed
  to the pod, which the kubelet's pod-resources API alone does not do;
- ``serviceMonitor.enabled``: off unless asked for; the chart's default (on) needs the
  Prometheus Operator's ServiceMonitor API in the cluster.

Nothing here talks to a cluster; problems are collected as in :mod:`cluster.plan`.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import deep_merge, plain

PREFIX = "device_plugin_dcgm_exporter"
CHART = "dcgm-exporter"
IMAGE = "dcgm-exporter"
#: The variable of the exporter's DRA mode, in the container the chart renders.
DRA_ENV = "KUBERNETES_ENABLE_DRA"
#: Values the role derives; an override would undo the derivation silently.
DERIVED_VALUES = ("nodeSelector", "kubernetesDRA.enabled", "runtimeClassName")
_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")


def _chart(settings, problems):
    path = settings.get("chart_path") or ""
    if path:
        plan._check_input(path, PREFIX + "_chart_path", inputs.chart_path, problems)
        return {"ref": path, "check_values": True}
    version = settings.get("chart_version")
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        problems.append("%s_chart_version: %s is not a chart version (expected e.g. 4.8.2)" % (PREFIX, plan._q(version)))
    url = settings.get("chart_repo_url") or ""
    if not plan.chart_repo_url(url):
        problems.append(
            "%s_chart_repo_url: %s is not a chart repository URL (expected http(s)://... or oci://..., "
            "or %s_chart_path for a chart on the control host)" % (PREFIX, plan._q(url), PREFIX)
        )
    return {"ref": CHART, "repo_url": url, "version": version, "check_values": True}


def _images(settings, values, problems):
    """The image repository (the exporter's exact one, else the mirror's prefix) and pull secrets."""
    registry = plan._image_registry(settings, "device_plugin", problems)
    repository = settings.get("image_repository") or (registry + "/" + IMAGE if registry else "")
    if repository:
        values["image"] = {"repository": repository}
    secrets = plan._pull_secrets(settings, "device_plugin", problems)
    if secrets:
        values["imagePullSecrets"] = [{"name": n} for n in secrets]


def exporter_values(settings, problems):
    """The dcgm-exporter chart's values (see the module's docstring), then the overrides."""
    dra = plan.to_bool(settings.get("dra", False), PREFIX + "_dra", problems)
    monitor = plan.to_bool(settings.get("service_monitor", False), PREFIX + "_service_monitor", problems)
    values = {
        "nodeSelector": {plan.LABEL_GPU_PRESENT: "true"},
        "kubernetesDRA": {"enabled": dra},
        "serviceMonitor": {"enabled": monitor},
    }
    rc_name = settings.get("runtime_class_name") or ""
    if rc_name:
        values["runtimeClassName"] = rc_name
    _images(settings, values, problems)
    overrides = plan._check_overrides(settings.get("values_overrides") or {}, PREFIX + "_values_overrides", DERIVED_VALUES, problems)
    return deep_merge(values, overrides)


def dcgm_exporter_plan(settings):
    """The plan of the exporter's release, in the shape helm_release takes: chart, values, the
    namespace, no node labels (the device plugin's release owns them). ``settings``: the
    exporter's variables without the ``device_plugin_dcgm_exporter_`` prefix, with the device
    plugin's ``namespace``, ``namespace_pod_security``, ``runtime_class_name`` and image settings."""
    s = plain(settings or {})
    problems = []
    enabled = plan.to_bool(s.get("enabled", True), PREFIX + "_enabled", problems)
    plan._check_input(s.get("release_name"), PREFIX + "_release_name", inputs.release_name, problems)
    chart = _chart(s, problems)
    values = exporter_values(s, problems)
    objects = [plan.namespace_object(s.get("namespace"), s.get("namespace_pod_security") or "")]
    summary = {
        "enabled": enabled,
        "release": s.get("release_name"),
        "chart": chart.get("version") or chart["ref"],
        "dra": values["kubernetesDRA"]["enabled"],
        "nodes": "%s=true" % plan.LABEL_GPU_PRESENT,
    }
    return plan._result(problems, chart=chart, chart_values=values, objects=objects, node_labels=[], summary=summary, held=[])
