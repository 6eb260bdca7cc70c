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

Nothing here talks to a cluster; problems are collected as in :mod:`cluster.checks`.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import deep_merge
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import release
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.checks import Settings, check_input
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.node_labels import LABEL_GPU_PRESENT

PREFIX = "device_plugin_dcgm_exporter"
CHART = "dcgm-exporter"
IMAGE = "dcgm-exporter"
#: The variable of the exporter's DRA mode, in the container the chart renders.
DRA_ENV = "KUBERNETES_ENABLE_DRA"
#: Values the role derives; an override would undo the derivation silently.
DERIVED_VALUES = ("nodeSelector", "kubernetesDRA.enabled", "runtimeClassName")
_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")


def exporter_values(s):
    """The dcgm-exporter chart's values (see the module's docstring), then the overrides."""
    values = {
        "nodeSelector": {LABEL_GPU_PRESENT: "true"},
        "kubernetesDRA": {"enabled": s.flag("dra", False)},
        "serviceMonitor": {"enabled": s.flag("service_monitor", False)},
    }
    rc_name = s.get("runtime_class_name") or ""
    if rc_name:
        values["runtimeClassName"] = rc_name
    # the exporter's exact image, else its name under the mirror; the mirror and pull secrets are the device plugin's settings
    images = s.under("device_plugin")
    release.set_image(values, release.image_registry(images), IMAGE, s.get("image_repository"), release.pull_secrets(images))
    return deep_merge(values, release.overrides(s, DERIVED_VALUES))


def dcgm_exporter_plan(settings):
    """The plan of the exporter's release, in the shape helm_release takes: chart, values, the
    namespace, no node labels (the device plugin's release owns them). ``settings``: the
    exporter's variables without the ``device_plugin_dcgm_exporter_`` prefix, with the device
    plugin's ``namespace``, ``namespace_pod_security``, ``runtime_class_name`` and image settings."""
    s = Settings(settings, PREFIX)
    enabled = s.flag("enabled", True)
    check_input(s.get("release_name"), PREFIX + "_release_name", inputs.release_name, s.problems)
    chart = release.chart(s, CHART, "4.8.2", _VERSION)
    values = exporter_values(s)
    objects = [release.namespace_object(s.get("namespace"), s.get("namespace_pod_security") or "")]
    summary = {
        "enabled": enabled,
        "release": s.get("release_name"),
        "chart": chart.get("version") or chart["ref"],
        "dra": values["kubernetesDRA"]["enabled"],
        "nodes": "%s=true" % LABEL_GPU_PRESENT,
    }
    return release.result(s.problems, chart=chart, chart_values=values, objects=objects, node_labels=[], summary=summary, held=[])
