"""dra_driver: what the example DRA fleets turn into, the checks that refuse them, and the objects validated.

The fleets are ``tests/unit/fixtures/fleets/dra-*.yml``: the usual format (``vars``, ``hosts``) with
``roles: []`` (the gpu_operator / device_plugin tests leave them alone), each host's discovery facts
under ``ansible_facts.gpufleet_nvidia`` where site.yml's discovery leaves them, and a ``cluster`` key:
what the cluster says of itself (the API server's version, the runtime each kubelet reports, its
ClusterPolicies), from which the tests build what kubernetes.core's k8s_cluster_info and k8s_info return.

Every plan is built through the role's own task expression (fleets.plan) and the chart values of the
GPUCluster path are checked against NVIDIA's gpu-operator v26.7.0 chart beside this checkout: each value
is an option of its values.yaml, and the GPUCluster the chart renders from ``draDriver`` is valid against
the CRD's openAPIV3Schema. Every Kubernetes object is validated strictly against the 1.34 and 1.37
schemas of kubernetes-validate.
"""

from __future__ import annotations

import copy
import os

import jsonschema
import kubernetes_validate
import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.filter.dra_cluster_check import dra_cluster_check
from ansible_collections.gpufleet.nvidia.plugins.filter.dra_validation import dra_validation
from ansible_collections.gpufleet.nvidia.plugins.filter.gpu_node_label_patches import gpu_node_label_patches
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import operator_releases

from . import fleets as F

ROLE = "dra_driver"
FLEETS = sorted(n for n in F.fleet_names() if n.startswith("dra-"))
OK_FLEETS = ["dra-r580", "dra-k8s133", "dra-standalone-mixed"]
# The Kubernetes versions DRA objects are validated against: resource.k8s.io/v1 from 1.34.
K8S_VERSIONS = ("1.34.0", "1.37.0")
OPERATOR_CHART = os.path.join(os.path.dirname(F.ROOT), "shared", "reference", "charts", "gpu-operator-v26.7.0")
LABEL = "nvidia.com/dra-kubelet-plugin"


def plan(name, **extra_vars):
    return F.plan(F.load(name), ROLE, extra_vars)


def labels(planned):
    return dict((n["name"], n["labels"]) for n in planned["node_labels"])


def cluster_answers(fleet):
    """What k8s_cluster_info and k8s_info would return for the fleet's ``cluster``."""
    cluster = fleet["cluster"]
    apis = {"v1": {"Node": {}}, "resource.k8s.io/v1": {"DeviceClass": {}, "ResourceClaim": {}, "ResourceSlice": {}}}
    info = {"version": {"server": {"kubernetes": {"gitVersion": cluster["version"]}}}, "apis": apis}
    nodes = [{"metadata": {"name": name}, "status": {"nodeInfo": {"containerRuntimeVersion": runtime}}}
             for name, runtime in sorted(cluster["runtimes"].items())]
    return info, copy.deepcopy(cluster.get("cluster_policies") or []), nodes


def k8s_object(obj):
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(obj, version, strict=True)


def _operator_chart():
    if not os.path.isdir(OPERATOR_CHART):
        pytest.skip("shared/reference/charts/gpu-operator-v26.7.0 is not beside this checkout")
    with open(os.path.join(OPERATOR_CHART, "values.yaml")) as f:
        values = yaml.safe_load(f)
    with open(os.path.join(OPERATOR_CHART, "crds", "nvidia.com_gpuclusters.yaml")) as f:
        crd = yaml.safe_load(f)
    return values, crd


def _merged(defaults, values):
    """Helm's merge of user values over the chart's defaults (maps merge, the rest replaces)."""
    merged = copy.deepcopy(defaults)
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


# --- The fleets ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FLEETS)
def test_every_dra_fleet_is_planned_by_the_dra_driver_only(name):
    fleet = F.load(name)
    assert fleet["roles"] == [] and "cluster" in fleet
    assert all("gpufleet_nvidia" in hv["ansible_facts"] for hv in fleet["hosts"].values())


def test_all_r580_renders_the_gpucluster_path_with_the_host_driver():
    planned = plan("dra-r580")
    assert planned["problems"] == []
    assert planned["mode"] == "gpucluster"
    # The operator's chart: its values checked against the release, its upgrades one release line at a time.
    assert planned["chart"] == {"ref": "gpu-operator", "repo_url": "https://helm.ngc.nvidia.com/nvidia", "version": "v26.7.0",
                                "check_values": True, "values_crd": "clusterpolicies.nvidia.com",
                                "lines": operator_releases.chart_lines()}
    assert planned["release"] == {"name": "gpu-operator", "namespace": "gpu-operator"}
    values = planned["chart_values"]
    assert values["clusterPolicy"] == {"deployCR": False} and values["gpuCluster"] == {"deployCR": True}
    assert values["driver"] == {"enabled": False} and values["toolkit"] == {"enabled": False}
    # No empty map in the values (the chart's own featureGates: {} stays): what Helm keeps is what the role compares.
    assert values["draDriver"] == {"computeDomains": {"enabled": False}}
    gates = plan("dra-r580", dra_driver_feature_gates={"NVMLDeviceHealthCheck": "yes"})["chart_values"]["draDriver"]["featureGates"]
    assert gates == {"NVMLDeviceHealthCheck": True}


def test_all_r580_sets_no_label_and_keeps_what_validation_compares():
    planned = plan("dra-r580")
    # The operator places the kubelet plugin itself: the role sets no label, and owns only its own.
    assert labels(planned) == {"gpu-h100x8-01": {}, "gpu-h200-01": {}, "gpu-h200x2-01": {}}
    assert all(n["remove"] == {LABEL: ["true"]} for n in planned["node_labels"])
    assert dict((n["name"], n["gpus"]) for n in planned["nodes"]) == {"gpu-h100x8-01": 8, "gpu-h200-01": 1, "gpu-h200x2-01": 2}
    assert planned["summary"]["drivers"] == {"gpu-h100x8-01": "580.105.08", "gpu-h200-01": "580.159.04", "gpu-h200x2-01": "580.159.04"}


def test_a_node_on_r535_is_refused_by_name_before_anything_is_applied():
    planned = plan("dra-r535")
    assert planned["chart_values"] is None and planned["node_labels"] is None
    assert len(planned["problems"]) == 1, planned["problems"]
    problem = planned["problems"][0]
    assert "host 'gpu-h100x8-01'" in problem and "535.309.01 (from discovery)" in problem and "R580 or later" in problem


def test_kubernetes_1_33_is_refused_by_the_cluster_check():
    fleet = F.load("dra-k8s133")
    planned = F.plan(fleet, ROLE)
    assert planned["problems"] == []
    problems = dra_cluster_check(planned, *cluster_answers(fleet))
    assert len(problems) == 1 and "Kubernetes v1.33.2" in problems[0] and "1.34.2 or later" in problems[0], problems


@pytest.mark.parametrize("name", ["dra-r580", "dra-standalone-mixed"])
def test_a_cluster_that_offers_what_dra_needs_passes_the_check(name):
    fleet = F.load(name)
    assert dra_cluster_check(F.plan(fleet, ROLE), *cluster_answers(fleet)) == []


def test_the_standalone_path_labels_only_the_dra_nodes_and_keeps_the_device_plugin_nodes():
    planned = plan("dra-standalone-mixed")
    assert planned["problems"] == []
    assert planned["mode"] == "standalone"
    assert planned["chart"]["ref"] == "dra-driver-nvidia-gpu" and planned["chart"]["version"] == "0.5.0"
    assert planned["release"] == {"name": "nvidia-dra-driver-gpu", "namespace": "nvidia-dra-driver-gpu"}
    values = planned["chart_values"]
    assert values["nvidiaDriverRoot"] == "/" and values["gpuResourcesEnabledOverride"] is True
    assert values["resources"] == {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}}
    assert values["kubeletPlugin"]["nodeSelector"] == {LABEL: "true"}
    terms = values["kubeletPlugin"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": LABEL, "operator": "In", "values": ["true"]}]}]
    assert labels(planned) == {"gpu-h200-01": {LABEL: "true"}, "gpu-h200x2-01": {LABEL: "true"}, "gpu-l40s-01": {}}
    # The R550 node is left to the device plugin: not checked, not validated.
    assert [n["name"] for n in planned["nodes"]] == ["gpu-h200-01", "gpu-h200x2-01"]
    assert planned["summary"]["device_plugin_nodes"] == ["gpu-l40s-01"]


def test_a_mix_of_device_plugin_and_dra_nodes_is_refused_on_the_gpucluster_path():
    planned = plan("dra-standalone-mixed", dra_driver_operator_version="v26.7.0")
    assert len(planned["problems"]) == 1 and "gpu-l40s-01" in planned["problems"][0]
    assert "cannot coexist with a ClusterPolicy" in planned["problems"][0]


def test_an_operator_older_than_26_7_or_none_takes_the_standalone_chart():
    assert plan("dra-r580", dra_driver_operator_version="v26.3.3")["mode"] == "standalone"
    assert plan("dra-r580", dra_driver_operator_version="")["mode"] == "standalone"
    assert plan("dra-r580", dra_driver_operator_version="v26.7.1")["mode"] == "gpucluster"
    bad = plan("dra-r580", dra_driver_operator_version="latest")
    assert bad["problems"] == ["dra_driver_operator_version: 'latest' is not a GPU Operator release (expected e.g. v26.7.0 for "
                               "the GPUCluster path, an older release such as v26.3.3 or '' for the standalone dra-driver-nvidia-gpu chart)"]


def test_containerd_1_7_without_cdi_is_refused_and_the_kubelets_report_is_checked_too():
    mixed = F.load("dra-standalone-mixed")
    mixed["vars"]["container_toolkit_enable_cdi"] = False
    planned = F.plan(mixed, ROLE)
    assert len(planned["problems"]) == 2 and all("container_toolkit_enable_cdi is false" in p for p in planned["problems"])
    fleet = F.load("dra-r580")
    fleet["hosts"]["gpu-h200-01"]["container_toolkit_enable_cdi"] = False  # on by default
    fleet["cluster"]["runtimes"]["gpu-h200-01"] = "containerd://1.7.27"
    problems = dra_cluster_check(F.plan(fleet, ROLE), *cluster_answers(fleet))
    assert len(problems) == 1 and "node 'gpu-h200-01': its kubelet reports containerd://1.7.27" in problems[0]


def test_a_k3s_node_is_judged_by_its_kubelets_containerd_not_the_hosts():
    fleet = F.load("dra-r580")
    host = fleet["hosts"]["gpu-h200-01"]
    host["container_toolkit_runtime"] = "k3s"
    host["container_toolkit_enable_cdi"] = False  # on by default
    host["ansible_facts"]["gpufleet_nvidia"]["container"]["containerd"]["version"] = "1.6.20~ds1"  # the host's own, unused
    planned = F.plan(fleet, ROLE)
    assert planned["problems"] == []
    fleet["cluster"]["runtimes"]["gpu-h200-01"] = "containerd://1.7.27-k3s1"
    problems = dra_cluster_check(planned, *cluster_answers(fleet))
    assert len(problems) == 1 and "containerd://1.7.27-k3s1" in problems[0]


def test_docker_and_no_runtime_cannot_inject_cdi_devices():
    fleet = F.load("dra-r580")
    fleet["hosts"]["gpu-h200-01"]["container_toolkit_runtime"] = "docker"
    problems = F.plan(fleet, ROLE)["problems"]
    assert problems == ["dra_driver: host 'gpu-h200-01': container_toolkit_runtime is 'docker', which cannot inject CDI devices "
                        "for the DRA driver (expected containerd, k3s, rke2 or crio)"]


def test_the_driver_version_comes_from_discovery_else_the_inventory_else_it_is_refused():
    fleet = F.load("dra-r580")
    del fleet["hosts"]["gpu-h200-01"]["ansible_facts"]
    problems = F.plan(fleet, ROLE)["problems"]
    assert len(problems) == 1 and "host 'gpu-h200-01': the driver's version is not known" in problems[0]
    fleet["hosts"]["gpu-h200-01"]["nvidia_driver_version"] = "580"
    planned = F.plan(fleet, ROLE)
    assert planned["problems"] == [] and planned["summary"]["drivers"]["gpu-h200-01"] == "580"
    # The top-level variable (facts injected as variables) is read when ansible_facts has none.
    fleet["hosts"]["gpu-h200-01"]["gpufleet_nvidia"] = {"gpu_count": 1, "driver": {"version": "570.172.08"}}
    assert "driver 570.172.08 (from discovery)" in F.plan(fleet, ROLE)["problems"][0]


def test_removal_does_not_check_the_nodes_drivers():
    assert plan("dra-r535", dra_driver_state="absent")["problems"] == []
    assert plan("dra-r535", dra_driver_state="present")["problems"] != []


def test_an_operator_managed_driver_is_refused():
    fleet = F.load("dra-r580")
    fleet["hosts"]["gpu-h200-01"]["nvidia_driver_method"] = "operator"
    problems = F.plan(fleet, ROLE)["problems"]
    assert len(problems) == 1 and "needs the driver on the host" in problems[0]


@pytest.mark.parametrize("extra, fragment", [
    ({"dra_driver_values_overrides": {"clusterPolicy": {"deployCR": True}}}, "dra_driver_values_overrides.clusterPolicy.deployCR"),
    ({"dra_driver_feature_gates": {"mps-support": True}}, "'mps-support' is not a feature gate name"),
    ({"dra_driver_feature_gates": {"MPSSupport": "maybe"}}, "dra_driver_feature_gates.MPSSupport: 'maybe' is not a boolean"),
    ({"dra_driver_device_classes": [{"name": "gpu.nvidia.com", "expression": "true"}]}, "a class the DRA driver creates itself"),
    ({"dra_driver_device_classes": [{"name": "h200.example.com"}]}, "expression: null is not a CEL expression"),
    ({"dra_driver_validate_namespace": "Not_A_Namespace"}, "dra_driver_validate_namespace"),
    ({"dra_driver_namespace": "Bad NS"}, "dra_driver_namespace: 'Bad NS' is not a namespace name"),
    ({"dra_driver_chart_repo_url": "helm.ngc.nvidia.com"}, "dra_driver_chart_repo_url"),
])
def test_settings_that_cannot_work_are_refused_by_name(extra, fragment):
    problems = plan("dra-r580", **extra)["problems"]
    assert len(problems) == 1 and fragment in problems[0], problems


def test_compute_domains_on_the_standalone_chart_need_its_webhook():
    problems = plan("dra-standalone-mixed", dra_driver_compute_domains_enabled=True)["problems"]
    assert len(problems) == 1 and "webhook" in problems[0]
    planned = plan("dra-standalone-mixed", dra_driver_compute_domains_enabled=True,
                   dra_driver_values_overrides={"webhook": {"enabled": True}})
    assert planned["problems"] == [] and planned["chart_values"]["webhook"] == {"enabled": True}


def test_a_mirror_and_pull_secrets_reach_the_drivers_image_on_both_paths():
    extra = {"dra_driver_image_registry": "registry.example.com:5000/nvidia", "dra_driver_image_pull_secrets": ["nvcr-pull"]}
    gpucluster = plan("dra-r580", **extra)["chart_values"]["draDriver"]
    assert gpucluster["repository"] == "registry.example.com:5000/nvidia" and gpucluster["imagePullSecrets"] == ["nvcr-pull"]
    standalone = plan("dra-standalone-mixed", **extra)["chart_values"]
    assert standalone["image"] == {"repository": "registry.example.com:5000/nvidia/dra-driver-nvidia-gpu"}
    assert standalone["imagePullSecrets"] == [{"name": "nvcr-pull"}]


# --- The cluster check --------------------------------------------------------------------------
def test_a_cluster_without_resource_k8s_io_v1_is_refused():
    fleet = F.load("dra-r580")
    info, policies, nodes = cluster_answers(fleet)
    info["apis"] = {"v1": {}, "resource.k8s.io/v1beta2": {"DeviceClass": {}}}
    problems = dra_cluster_check(F.plan(fleet, ROLE), info, policies, nodes)
    assert problems == ["dra_driver: the API server does not serve resource.k8s.io/v1 DeviceClass, ResourceClaim, ResourceSlice "
                        "(it serves resource.k8s.io/v1beta2; expected the resource.k8s.io/v1 API, on by default from Kubernetes 1.34)"]


def test_an_unreadable_server_version_is_refused():
    fleet = F.load("dra-r580")
    info, policies, nodes = cluster_answers(fleet)
    info["version"] = {}
    problems = dra_cluster_check(F.plan(fleet, ROLE), info, policies, nodes)
    assert len(problems) == 1 and "could not be read" in problems[0]


def test_a_clusterpolicy_conflicts_with_a_gpucluster_unless_the_release_is_turned():
    fleet = F.load("dra-r580")
    planned = F.plan(fleet, ROLE)
    info, dummy, nodes = cluster_answers(fleet)
    foreign = {"metadata": {"name": "cluster-policy", "annotations": {"meta.helm.sh/release-name": "nvidia-gpu-operator",
                                                                      "meta.helm.sh/release-namespace": "nvidia"}}}
    problems = dra_cluster_check(planned, info, [foreign], nodes)
    assert len(problems) == 1 and "ClusterPolicy 'cluster-policy' exists" in problems[0]
    own = {"metadata": {"name": "cluster-policy", "annotations": {"meta.helm.sh/release-name": "gpu-operator",
                                                                  "meta.helm.sh/release-namespace": "gpu-operator"}}}
    assert dra_cluster_check(planned, info, [own], nodes) == []


def test_an_undeclared_gpu_node_is_refused_on_the_gpucluster_path_only():
    for name, refused in (("dra-r580", True), ("dra-standalone-mixed", False)):
        fleet = F.load(name)
        info, policies, nodes = cluster_answers(fleet)
        nodes.append({"metadata": {"name": "gpu-other", "labels": {"nvidia.com/gpu.present": "true"}},
                      "status": {"nodeInfo": {"containerRuntimeVersion": "containerd://2.1.4"}}})
        nodes.append({"metadata": {"name": "cpu-1", "labels": {"nvidia.com/gpu.present": "false"}}, "status": {}})
        problems = dra_cluster_check(F.plan(fleet, ROLE), info, policies, nodes)
        assert bool(problems) is refused, (name, problems)
        assert not refused or ("nodes gpu-other are GPU nodes" in problems[0] and len(problems) == 1)


def test_an_older_operators_clusterpolicy_must_have_its_device_plugin_off():
    fleet = F.load("dra-standalone-mixed")
    info, policies, nodes = cluster_answers(fleet)
    policies[0]["spec"]["devicePlugin"]["enabled"] = True
    problems = dra_cluster_check(F.plan(fleet, ROLE), info, policies, nodes)
    assert len(problems) == 1 and "runs the device plugin (spec.devicePlugin.enabled is true)" in problems[0]
    del policies[0]["spec"]["devicePlugin"]  # the chart's default: enabled
    assert len(dra_cluster_check(F.plan(fleet, ROLE), info, policies, nodes)) == 1


def test_a_refused_plan_is_not_checked_further():
    planned = plan("dra-r535")
    assert dra_cluster_check(planned, {}, [], []) == planned["problems"]


# --- What gets applied is valid -----------------------------------------------------------------
@pytest.mark.parametrize("name", OK_FLEETS)
def test_objects_label_patches_and_claim_checks_are_valid_kubernetes(name):
    extra = {"dra_driver_device_classes": [{"name": "h200.gpu.example.com",
                                            "expression": "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"}]}
    planned = plan(name, **extra)
    kinds = [o["kind"] for o in planned["objects"]]
    assert kinds == ["Namespace", "DeviceClass"]
    for obj in planned["objects"]:
        k8s_object(obj)
    patches = gpu_node_label_patches(planned["node_labels"], None, ROLE)
    assert patches["problems"] == []
    for patch in patches["patches"]:
        k8s_object(patch)
    assert [c["node"] for c in planned["validation"]["checks"]] == [n["name"] for n in planned["nodes"]]
    for check in planned["validation"]["checks"]:
        k8s_object(check["claim"])
        k8s_object(check["pod"])
        assert check["pod"]["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": check["claim"]["metadata"]["name"]}]


def test_the_gpucluster_values_are_options_of_the_v26_7_chart():
    defaults, dummy = _operator_chart()
    values = plan("dra-r580", dra_driver_feature_gates={"NVMLDeviceHealthCheck": True},
                  dra_driver_image_registry="registry.example.com/nvidia", dra_driver_image_pull_secrets=["pull"])["chart_values"]
    unknown = [p for p in F.leaf_paths(values) if not _is_option(defaults, p)]
    assert unknown == []


def _is_option(defaults, path):
    node = defaults
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        if part == "featureGates":  # a map of gate names
            return True
        node = node[part]
    return True


@pytest.mark.parametrize("extra", [{}, {"dra_driver_feature_gates": {"NVMLDeviceHealthCheck": True}, "dra_driver_compute_domains_enabled": True,
                                        "dra_driver_image_registry": "registry.example.com/nvidia", "dra_driver_image_pull_secrets": ["pull"]}])
def test_the_gpucluster_the_chart_renders_is_valid_against_the_crd(extra):
    defaults, crd = _operator_chart()
    values = _merged(defaults, plan("dra-r580", **extra)["chart_values"])
    assert values["gpuCluster"]["deployCR"] is True and values["clusterPolicy"]["deployCR"] is False
    # templates/gpucluster.yaml passes draDriver through as the GPUCluster's spec.draDriver.
    obj = {"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster", "metadata": {"name": "gpu-cluster"},
           "spec": {"draDriver": values["draDriver"]}}
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    jsonschema.validate(obj, schema)
    broken = copy.deepcopy(obj)
    broken["spec"]["draDriver"]["computeDomains"]["enabled"] = "yes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


# --- What validation reads ----------------------------------------------------------------------
def _slice(node, count, generation=1, pool=None, kind="gpu"):
    devices = [{"name": "gpu-%d" % i, "attributes": {"type": {"string": kind}, "index": {"int": i}}} for i in range(count)]
    spec = {"driver": "gpu.nvidia.com", "nodeName": node, "devices": devices,
            "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": 1}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "%s-%d" % (node, generation)}, "spec": spec}


def test_every_node_publishing_as_many_gpus_as_discovered_is_ok():
    planned = plan("dra-r580")
    slices = [_slice("gpu-h100x8-01", 8), _slice("gpu-h200-01", 1), _slice("gpu-h200x2-01", 2)]
    for obj in slices:
        k8s_object(obj)
    found = dra_validation(slices, planned["nodes"])
    assert found["failed"] == [] and found["claims"] == {}
    assert [n["message"] for n in found["nodes"]] == ["DRA: 8 devices published", "DRA: 1 devices published", "DRA: 2 devices published"]


def test_a_missing_node_a_short_count_and_an_old_generation_are_told_apart():
    planned = plan("dra-r580")
    slices = [_slice("gpu-h100x8-01", 7), _slice("gpu-h200x2-01", 1, generation=1), _slice("gpu-h200x2-01", 2, generation=2),
              _slice("gpu-h200x2-01", 3, kind="mig", pool="gpu-h200x2-01", generation=2)]
    slices[3]["spec"]["devices"] = [{"name": "mig-%d" % i, "attributes": {"type": {"string": "mig"}}} for i in range(3)]
    found = dra_validation(slices, planned["nodes"])
    states = dict((n["name"], (n["status"], n["published"])) for n in found["nodes"])
    assert states == {"gpu-h100x8-01": ("mismatch", 7), "gpu-h200-01": ("missing", 0), "gpu-h200x2-01": ("ok", 2)}
    assert found["failed"] == ["dra_driver: node gpu-h100x8-01: 7 GPUs published, discovery found 8",
                               "dra_driver: node gpu-h200-01: no GPU published in a ResourceSlice of driver gpu.nvidia.com"]


def test_the_claim_check_needs_an_allocated_claim_and_a_running_pod_per_node():
    planned = plan("dra-standalone-mixed")
    checks = planned["validation"]["checks"]
    slices = [_slice("gpu-h200-01", 1), _slice("gpu-h200x2-01", 2)]
    results = [{"driver": "gpu.nvidia.com", "pool": c["node"], "device": "gpu-0", "request": "gpu"} for c in checks]
    claims = [dict(c["claim"], status={"allocation": {"devices": {"results": [r]}}}) for c, r in zip(checks, results)]
    pods = [dict(checks[0]["pod"], status={"phase": "Running"}), dict(checks[1]["pod"], status={"phase": "Pending"})]
    for obj in claims:
        k8s_object(obj)
    found = dra_validation(slices, planned["nodes"], checks, claims, pods)
    assert found["claims"] == {"gpu-h200-01": "allocated, pod running", "gpu-h200x2-01": "allocated, pod not running"}
    assert found["failed"] == ["dra_driver: node gpu-h200x2-01: the ResourceClaim gpufleet-dra-gpu-h200x2-01 for one GPU: "
                               "allocated, pod not running"]


# --- The role's documentation -------------------------------------------------------------------
def test_the_readmes_resourceclaimtemplate_and_pod_are_valid_and_ask_for_the_drivers_class():
    with open(os.path.join(F.ROOT, "roles", "dra_driver", "README.md")) as f:
        text = f.read()
    block = text[text.index("A workload asks for one GPU"):]
    block = block[block.index("```yaml\n") + 8:]
    docs = list(yaml.safe_load_all(block[:block.index("```")]))
    assert [d["kind"] for d in docs] == ["ResourceClaimTemplate", "Pod"]
    for doc in docs:
        k8s_object(doc)
    request = docs[0]["spec"]["spec"]["devices"]["requests"][0]
    assert request["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    assert docs[1]["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == docs[0]["metadata"]["name"]


# --- the chart from an OCI registry, DeviceClasses serving an extended resource ------------------
OCI = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"


def test_the_standalone_chart_from_its_oci_reference():
    planned = plan("dra-standalone-mixed", dra_driver_chart_ref=OCI, dra_driver_chart_version="0.5.0")
    assert planned["problems"] == []
    assert planned["chart"] == {"ref": OCI, "version": "0.5.0", "check_values": True}  # no --repo for an OCI chart


@pytest.mark.parametrize("name, extra, fragment", [
    ("dra-standalone-mixed", {"dra_driver_chart_ref": "oci://registry.k8s.io/dra-driver-nvidia/charts/other"},
     "dra_driver_chart_ref: 'oci://registry.k8s.io/dra-driver-nvidia/charts/other' is not an OCI reference of the "
     "dra-driver-nvidia-gpu chart"),
    ("dra-standalone-mixed", {"dra_driver_chart_ref": "https://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"},
     "is not an OCI reference"),
    ("dra-standalone-mixed", {"dra_driver_chart_ref": OCI, "dra_driver_chart_version": "latest"},
     "dra_driver_chart_version: 'latest' is not a chart version"),
    ("dra-r580", {"dra_driver_chart_ref": OCI}, "the GPUCluster path installs the gpu-operator chart"),
    ("dra-standalone-mixed", {"dra_driver_chart_repo_url": "oci://registry.k8s.io/dra-driver-nvidia/charts"},
     "expected dra_driver_chart_ref: oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"),
])
def test_a_chart_reference_that_cannot_work_is_refused_by_name(name, extra, fragment):
    problems = plan(name, **extra)["problems"]
    assert len(problems) == 1 and fragment in problems[0], problems


H200_CLASS = {"name": "h200.gpu.example.com", "expression": "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"}


@pytest.mark.parametrize("name, resource", [("dra-r580", "nvidia.com/gpu"), ("dra-standalone-mixed", "example.com/h200")])
def test_a_site_class_serves_an_extended_resource_and_is_valid_kubernetes(name, resource):
    planned = plan(name, dra_driver_device_classes=[dict(H200_CLASS, extended_resource_name=resource)])
    assert planned["problems"] == []
    (cls,) = [o for o in planned["objects"] if o["kind"] == "DeviceClass"]
    assert cls["spec"]["extendedResourceName"] == resource
    for version in ("1.36.0", "1.37.0"):  # resource.k8s.io/v1 DeviceClassSpec.extendedResourceName
        kubernetes_validate.validate(cls, version, strict=True)
    assert "extendedResourceName" not in [o for o in plan(name, dra_driver_device_classes=[H200_CLASS])["objects"]
                                          if o["kind"] == "DeviceClass"][0]["spec"]


@pytest.mark.parametrize("name, classes, fragment", [
    ("dra-standalone-mixed", [dict(H200_CLASS, extended_resource_name="nvidia.com/gpu")],
     "'nvidia.com/gpu' is already served by the chart's own gpu.nvidia.com class"),
    ("dra-r580", [dict(H200_CLASS, extended_resource_name="nvidia.com/gpu"),
                  {"name": "l40s.gpu.example.com", "expression": "true", "extended_resource_name": "nvidia.com/gpu"}],
     "'nvidia.com/gpu' is already served by h200.gpu.example.com (dra_driver_device_classes[0])"),
    ("dra-r580", [dict(H200_CLASS, extended_resource_name="gpu")], "'gpu' is not an extended resource name"),
    ("dra-r580", [dict(H200_CLASS, extended_resource_name="example.kubernetes.io/gpu")], "is not an extended resource name"),
    ("dra-r580", [dict(H200_CLASS, extendedResourceName="nvidia.com/gpu")], "is not {name, expression, extended_resource_name}"),
])
def test_an_extended_resource_that_cannot_work_is_refused_by_name(name, classes, fragment):
    problems = plan(name, dra_driver_device_classes=classes)["problems"]
    assert len(problems) == 1 and fragment in problems[0], problems
