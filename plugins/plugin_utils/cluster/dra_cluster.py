# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the cluster must offer the planned DRA layer, checked before anything is applied.

The code of the ``dra_cluster_check`` filter: Kubernetes 1.34.2 or later, ``resource.k8s.io/v1``
served, no ClusterPolicy the chosen path cannot live with, a runtime that injects CDI devices on
every DRA node (as its kubelet reports it) and, on the GPUCluster path, no GPU node the inventory
does not declare.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import plain
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.versions import version_tuple
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.checks import quoted
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.dra import RESOURCE_API, ROLE, runtime_cdi_problem
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.node_labels import LABEL_GPU_PRESENT

MIN_KUBERNETES = (1, 34, 2)


def cluster_problems(plan, cluster_info, cluster_policies, cluster_nodes):
    """Why the cluster cannot take the planned DRA layer, one message each; [] when it can.

    ``cluster_info`` is what kubernetes.core.k8s_cluster_info returned (the server's version and
    the API groups it serves), ``cluster_policies`` the ClusterPolicy objects (none where the CRD is
    not installed) and ``cluster_nodes`` the Node objects, for the runtime each kubelet reports.
    """
    plan = plain(plan or {})
    if plan.get("problems") or not plan.get("mode"):
        return list(plan.get("problems") or ["%s: no plan to check against the cluster" % ROLE])
    problems = []
    _check_kubernetes(cluster_info or {}, problems)
    _check_resource_api(cluster_info or {}, problems)
    for policy in plain(cluster_policies or []):
        _check_cluster_policy(plan, policy, problems)
    _check_node_runtimes(plan, plain(cluster_nodes or []), problems)
    if plan["mode"] == "gpucluster":
        _check_undeclared_gpu_nodes(plan, plain(cluster_nodes or []), problems)
    return problems


def server_version(cluster_info):
    """The API server's gitVersion from k8s_cluster_info's ``version.server`` ('' when not there)."""
    server = ((cluster_info or {}).get("version") or {}).get("server") or {}
    server = server.get("kubernetes") or server
    return str(server.get("gitVersion") or "")


def _check_kubernetes(cluster_info, problems):
    text = server_version(cluster_info)
    parsed = version_tuple(text)
    if parsed is None:
        problems.append("%s: the API server's version could not be read (got %s; expected Kubernetes %s or later)"
                        % (ROLE, quoted(text), ".".join(map(str, MIN_KUBERNETES))))
    elif parsed < MIN_KUBERNETES:
        problems.append(
            "%s: the cluster runs Kubernetes %s, and the DRA driver needs %s or later (what GPU Operator 26.7 and NVIDIA's "
            "DRA driver require of resource.k8s.io/v1; expected the control plane and kubelets upgraded first, or the "
            "device plugin layer)" % (ROLE, text, ".".join(map(str, MIN_KUBERNETES))))


def _check_resource_api(cluster_info, problems):
    apis = (cluster_info or {}).get("apis") or {}
    served = apis.get(RESOURCE_API) or {}
    missing = [kind for kind in ("DeviceClass", "ResourceClaim", "ResourceSlice") if kind not in served]
    if missing:
        groups = sorted(k for k in apis if k.startswith("resource.k8s.io/"))
        problems.append(
            "%s: the API server does not serve %s %s (it serves %s; expected the resource.k8s.io/v1 API, on by default "
            "from Kubernetes 1.34)" % (ROLE, RESOURCE_API, ", ".join(missing), ", ".join(groups) or "no resource.k8s.io version"))


def _owned_by_release(obj, release):
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return (annotations.get("meta.helm.sh/release-name") == release["name"]
            and annotations.get("meta.helm.sh/release-namespace") == release["namespace"])


def _check_cluster_policy(plan, policy, problems):
    """A ClusterPolicy: in the GPUCluster path only the release's own (its upgrade removes it); in the
    standalone path one whose device plugin is off."""
    name = (policy.get("metadata") or {}).get("name")
    release = plan["release"]
    if plan["mode"] == "gpucluster":
        if not _owned_by_release(policy, release):
            problems.append(
                "%s: ClusterPolicy %s exists, and a GPUCluster cannot coexist with a ClusterPolicy (expected it removed, "
                "or the gpu-operator release that made it to be %s in namespace %s, which this change turns to the "
                "GPUCluster)" % (ROLE, quoted(name), quoted(release["name"]), quoted(release["namespace"])))
        return
    plugin = ((policy.get("spec") or {}).get("devicePlugin") or {}).get("enabled", True)
    if plugin is not False:
        problems.append(
            "%s: ClusterPolicy %s runs the device plugin (spec.devicePlugin.enabled is %s), which cannot share the GPUs with "
            "the DRA driver (expected gpu_operator_values_overrides devicePlugin.enabled: false, or GPU Operator 26.7 and "
            "%s_operator_version v26.7.0)" % (ROLE, quoted(name), quoted(plugin), ROLE))


def _check_undeclared_gpu_nodes(plan, cluster_nodes, problems):
    """The GPUCluster's kubelet plugin goes to every GPU node (``nvidia.com/gpu.present=true``): one the
    inventory does not declare would get it unchecked (its driver, its runtime), or lose its device plugin."""
    declared = set(entry["name"] for entry in plan.get("node_labels") or [])
    found = sorted(
        (item.get("metadata") or {}).get("name") for item in cluster_nodes
        if ((item.get("metadata") or {}).get("labels") or {}).get(LABEL_GPU_PRESENT) == "true"
        and (item.get("metadata") or {}).get("name") not in declared)
    if found:
        problems.append(
            "%s: nodes %s are GPU nodes of the cluster (%s=true) that the inventory does not declare, and the GPUCluster of GPU "
            "Operator 26.7 places the DRA kubelet plugin on every GPU node (expected them in the node group, where their driver "
            "and runtime are checked, or %s_operator_version older than v26.7.0 or '' for the standalone chart, which runs only "
            "on the nodes it labels)" % (ROLE, ", ".join(found), LABEL_GPU_PRESENT, ROLE))


def _check_node_runtimes(plan, cluster_nodes, problems):
    """The runtime each DRA node's kubelet reports (``containerd://1.7.24``, ``cri-o://1.31.0``) must inject CDI devices."""
    reported = {}
    for item in cluster_nodes:
        meta, info = item.get("metadata") or {}, (item.get("status") or {}).get("nodeInfo") or {}
        reported[meta.get("name")] = str(info.get("containerRuntimeVersion") or "")
    for node in plan.get("nodes") or []:
        text = reported.get(node["name"])
        if not text:
            continue  # not in the cluster: the release check names it
        scheme, dummy, version = text.partition("://")
        runtime = {"containerd": "containerd", "cri-o": "crio"}.get(scheme, scheme)
        problem = runtime_cdi_problem(runtime, version, node["runtime"]["cdi_enabled"] is True)
        if problem:
            problems.append("%s: node %s: its kubelet reports %s: %s" % (ROLE, quoted(node["name"]), text, problem.replace(
                "container_toolkit_runtime is", "the runtime is")))
