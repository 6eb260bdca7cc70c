# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The feature labels and GPU metrics of a GPU node, judged from what the validate role read.

Two checks per GPU node, beside :mod:`validate.cluster`'s:

- ``gfd_labels``: GPU Feature Discovery's labels (``nvidia.com/gpu.product``, ``gpu.count``,
  ``gpu.memory``) are on the node with the values discovery found (``nvidia-smi``: the first GPU's
  product name with ``-`` for spaces, the number of GPUs, its memory in MiB). GFD appends
  ``-SHARED`` to the product where the GPUs are shared and the MIG profile where MIG is on, so the
  product is compared as a prefix there.
- ``metrics``: a DCGM exporter pod runs on the node and its metrics endpoint, read through the
  API server's proxy (``pods/<pod>:<port>/proxy/metrics``), answers with DCGM's metrics; in DRA
  mode (``validate_dcgm_exporter_dra``) the exporter's container has ``KUBERNETES_ENABLE_DRA=true``,
  the variable of its DRA attribution.

Where the pods cannot run, neither is ``ok``: a Running pod without a pod IP (no kubelet ran its
containers: a test control plane's fake kubelet) makes its check ``skipped`` with that reason;
labels missing there are not GFD's failure. A pod with an IP whose endpoint does not answer, or
labels that disagree with discovery, fail the node. Nothing here talks to the cluster.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import FAILED, OK, SKIPPED

PRODUCT = "nvidia.com/gpu.product"
COUNT = "nvidia.com/gpu.count"
MEMORY = "nvidia.com/gpu.memory"
DRA_ENV = "KUBERNETES_ENABLE_DRA"
#: The metric every DCGM exporter serves (DCGM's default counters).
METRIC = "DCGM_FI_DEV_GPU_UTIL"
NO_KUBELET = "no kubelet ran its containers (a test control plane with a fake kubelet?)"


def expected_labels(facts):
    """``{label: value}`` GFD writes for the GPUs discovery found, or ``{}`` without them."""
    gpus = dig(facts, "driver", "nvidia_smi", "gpus") or []
    if not gpus:
        return {}
    first = gpus[0]
    values = {COUNT: str(len(gpus))}
    if first.get("name"):
        values[PRODUCT] = "-".join(str(first["name"]).split())
    if first.get("memory_total_mib"):
        values[MEMORY] = str(first["memory_total_mib"])
    return values


def _pods_on(pods, node, marker):
    """The pods on ``node`` whose name or owner's name has ``marker`` (a pod's name is cut to 63
    characters: ``...-gpu-feature-discov6hf2p``; its DaemonSet's is whole)."""
    def named(pod):
        owners = [o.get("name") or "" for o in dig(pod, "metadata", "ownerReferences") or []]
        return any(marker in n for n in [dig(pod, "metadata", "name") or ""] + owners)
    return [p for p in pods or [] if dig(p, "spec", "nodeName") == node and named(p)]


def _without_ip(pods):
    """The pods that are Running but have no IP: nothing runs them."""
    return [dig(p, "metadata", "name") for p in pods if dig(p, "status", "phase") == "Running" and not dig(p, "status", "podIP")]


def _label_problems(labels, wanted, shared_or_mig):
    problems = []
    for key, value in sorted(wanted.items()):
        found = labels.get(key)
        if found is None:
            problems.append("%s is missing" % key)
        elif key == PRODUCT and shared_or_mig and str(found).startswith(value):
            continue
        elif str(found) != value:
            problems.append("%s is %r, discovery found %r" % (key, found, value))
    return problems


def check_labels(checks, name, labels, facts, pods, shared_or_mig):
    """The ``gfd_labels`` check of node ``name`` (its ``labels``), against discovery (``facts``)."""
    wanted = expected_labels(facts)
    if not wanted:
        return checks.add("gfd_labels", SKIPPED, "node %s: GFD labels not checked: discovery found no GPU through nvidia-smi" % name)
    problems = _label_problems(labels or {}, wanted, shared_or_mig)
    if not problems:
        return checks.add("gfd_labels", OK, "node %s: %s" % (name, ", ".join("%s=%s" % (k, labels[k]) for k in sorted(wanted))))
    idle = _without_ip(_pods_on(pods, name, "gpu-feature-discovery"))
    if idle and all(k not in (labels or {}) for k in wanted):
        return checks.add("gfd_labels", SKIPPED, "node %s: GFD labels not checked: GFD's pod %s is Running without a pod IP: %s"
                          % (name, idle[0], NO_KUBELET))
    return checks.add("gfd_labels", FAILED, "node %s: GFD labels: %s" % (name, "; ".join(problems)))


def _dra_problem(pod):
    env = dict((e.get("name"), e.get("value")) for c in dig(pod, "spec", "containers") or [] for e in c.get("env") or [])
    if str(env.get(DRA_ENV, "")).lower() != "true":
        return "its container has no %s=true (the chart's kubernetesDRA.enabled): GPUs taken through ResourceClaims are not attributed to pods" % DRA_ENV
    return None


def check_metrics(checks, name, pods, scrapes, dra):
    """The ``metrics`` check of node ``name``: its exporter pod (of ``pods``), what its endpoint
    answered (``scrapes``: pod name -> ``{ok, text, error}``), its DRA mode when ``dra``."""
    mine = _pods_on(pods, name, "dcgm-exporter")
    if not mine:
        return checks.add("metrics", FAILED, "node %s: no DCGM exporter pod on the node" % name)
    pod = mine[0]
    pod_name = dig(pod, "metadata", "name")
    if dra and _dra_problem(pod):
        return checks.add("metrics", FAILED, "node %s: DCGM exporter pod %s: %s" % (name, pod_name, _dra_problem(pod)))
    if _without_ip([pod]):
        return checks.add("metrics", SKIPPED, "node %s: metrics not checked: DCGM exporter pod %s is Running without a pod IP, so the "
                          "API server's proxy cannot reach it: %s" % (name, pod_name, NO_KUBELET))
    scrape = (scrapes or {}).get(pod_name) or {}
    if not scrape:
        return checks.add("metrics", SKIPPED, "node %s: metrics not checked: DCGM exporter pod %s (%s) was not read"
                          % (name, pod_name, dig(pod, "status", "phase") or "no phase"))
    if not scrape.get("ok"):
        return checks.add("metrics", FAILED, "node %s: DCGM exporter pod %s: the API server's proxy to its metrics failed: %s"
                          % (name, pod_name, scrape.get("error") or "no answer"))
    if METRIC not in (scrape.get("text") or ""):
        return checks.add("metrics", FAILED, "node %s: DCGM exporter pod %s answers without %s: no GPU seen" % (name, pod_name, METRIC))
    mode = ", DRA attribution on" if dra else ""
    return checks.add("metrics", OK, "node %s: DCGM exporter pod %s serves %s%s" % (name, pod_name, METRIC, mode))
