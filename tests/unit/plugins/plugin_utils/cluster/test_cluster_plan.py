"""The steps of the cluster plans (plugin_utils/cluster) on their own; the plans are tested whole in tests/unit/plugins/filter."""

from __future__ import annotations

# pylint: disable=protected-access

import pytest

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import checks, fleet, gpu_operator, node_labels, release, sharing
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.checks import Settings


@pytest.mark.parametrize("replicas,count", [(4, 4), ("3", 3), (True, None), (None, None), ("x", None), (2.0, None)])
def test_a_replica_count_is_an_int_or_a_string_of_digits(replicas, count):
    assert sharing._replica_count(replicas) == count


def test_too_few_replicas_are_a_problem_and_plan_as_two():
    problems = []
    assert sharing._replicas({"replicas": 1}, "c.ts", "time-slicing", problems) == 2
    assert problems == ["c.ts.replicas: 1 is not a number of replicas for time-slicing (expected an integer of at least 2)"]


@pytest.mark.parametrize("value,text", [("x", "x"), (True, "true"), (False, "false"), (3, "3"), (None, "null"), ([1], "[1]")])
def test_toolkit_env_values_as_text(value, text):
    assert gpu_operator._env_value(value) == text


def test_the_containerd_of_k3s_and_rke2_and_no_settings_for_the_others():
    env = dict(gpu_operator._rancher_env("rke2"))
    assert env["CONTAINERD_CONFIG"] == "/var/lib/rancher/rke2/agent/etc/containerd/config.toml"
    assert env["CONTAINERD_SOCKET"] == gpu_operator.RANCHER_CONTAINERD_SOCKET
    assert gpu_operator._rancher_env("containerd") == []


@pytest.mark.parametrize("version,precompiled,problem", [
    ("580", True, None),
    ("580.95.05", False, None),
    ("580.95.05", True, "is a release, but precompiled driver images are chosen by branch"),
    ("latest", False, "is not a driver version"),
])
def test_the_driver_version(version, precompiled, problem):
    problems = []
    assert gpu_operator._driver_version(version, precompiled, problems) == version
    assert [p for p in problems if problem and problem in p] == problems


def test_who_deploys_a_component():
    host = {"host_driver": True}
    operator = {"host_driver": False}
    assert gpu_operator._who_deploys([operator], "host_driver", True) == "operator"
    assert gpu_operator._who_deploys([host], "host_driver", False) == "host"
    assert gpu_operator._who_deploys([host, operator], "host_driver", True) == "mixed"


def test_a_prepared_node_keeps_the_operators_components_off():
    node = {"host_driver": True, "host_toolkit": False, "sharing_config": "ts-2", "mig_config": ""}
    labels = gpu_operator._node_labels({"driver": True, "toolkit": True}, node)
    assert labels == {node_labels.LABEL_DEPLOY_DRIVER: "false", node_labels.LABEL_PLUGIN_CONFIG: "ts-2"}
    assert gpu_operator._node_labels({"driver": False, "toolkit": False}, dict(node, sharing_config="")) == {}


@pytest.mark.parametrize("resource,seen,strategy,problem", [
    ("nvidia.com/gpu", set(), "none", None),
    ("nvidia.com/mig-1g.10gb", set(), "mixed", None),
    ("nvidia.com/mig-1g.10gb", set(), "single", "is only advertised with MIG strategy 'mixed'"),
    ("nvidia.com/gpu", {"nvidia.com/gpu"}, "none", "is listed twice"),
    ("amd.com/gpu", set(), "none", "is not a GPU resource name"),
])
def test_a_shared_resource(resource, seen, strategy, problem):
    found = sharing._resource_problem(resource, seen, strategy, "gpu_operator")
    assert (found is None) if problem is None else found.startswith(problem)


def test_a_node_name_is_checked_and_taken_once():
    seen, problems = {}, []
    assert fleet._node_name("gpu-a", "h1", "gpufleet: host 'h1'", seen, problems) == "gpu-a"
    fleet._node_name("gpu-a", "h2", "gpufleet: host 'h2'", seen, problems)
    fleet._node_name("GPU_A", "h3", "gpufleet: host 'h3'", seen, problems)
    assert seen == {"gpu-a": "h1"}
    assert problems[0] == "gpufleet: host 'h2': gpufleet_node_name 'gpu-a' is also the node of host 'h1' (expected one host per node)"
    assert problems[1].startswith("gpufleet: host 'h3': gpufleet_node_name 'GPU_A' is not a Kubernetes node name")


def test_the_runs_record_is_looked_up_in_sets():
    run = fleet._run_lookup({"discovered": True, "hosts": ["a", "b"], "reached": ["a"]})
    assert run == {"discovered": True, "hosts": {"a", "b"}, "reached": {"a"}, "failed": set(), "moved": set()}
    assert fleet._run_lookup({"discovered": False}) == {"discovered": False, "hosts": set(), "reached": set(), "failed": set(),
                                                        "moved": set()}
    assert fleet._run_lookup(None) is None
    assert fleet._run_problem("b", "gpufleet: host 'b'", run).startswith("gpufleet: host 'b': failed or was unreachable")
    assert fleet._run_problem("a", "gpufleet: host 'a'", run) is None


# --- the inputs that reach helm's argv or an API object: the whole value, a final newline included --------


@pytest.mark.parametrize("check", [
    lambda problems: checks.check_namespace("gpu-operator\n", "gpu_operator_namespace", problems),
    lambda problems: checks.check_duration("10m\n", "gpu_operator_wait_timeout", problems),
    lambda problems: checks.check_name("gpu-operator\n", "gpu_operator_release_name", checks.DNS_LABEL, "a release name", problems),
    lambda problems: checks.check_label_value("ts-2\n", "gpufleet_sharing_config", problems),
    lambda problems: release.image_registry(Settings({"image_registry": "registry.example.com\n"}, "gpu_operator", problems)),
    lambda problems: problems.append(sharing._resource_problem("nvidia.com/gpu\n", set(), "single", "device_plugin") and "'\\n'"),
    lambda problems: gpu_operator._driver_version("580\n", True, problems),
    lambda problems: release.chart(Settings({"chart_version": "v26.7.0\n", "chart_repo_url": "https://helm.ngc.nvidia.com/nvidia"},
                                            "gpu_operator", problems), "gpu-operator", "v26.7.0"),
])
def test_a_final_newline_is_refused(check):
    problems = []
    check(problems)
    assert [p for p in problems if p] and all("\\n" in p for p in problems if p)


@pytest.mark.parametrize("url", ["https://helm.ngc.nvidia.com/nvidia\n--post-renderer=/tmp/x", "https://x y", "oci://"])
def test_a_chart_repository_url_is_a_whole_url(url):
    problems = []
    release.chart(Settings({"chart_version": "v26.7.0", "chart_repo_url": url}, "gpu_operator", problems), "gpu-operator", "v26.7.0")
    assert problems and problems[0].startswith("gpu_operator_chart_repo_url: %r is not" % url)


@pytest.mark.parametrize("path", ["--post-renderer=/tmp/x", "charts/gpu-operator", "/srv/../tmp/x", "/srv/chart\n"])
def test_a_chart_path_is_an_absolute_path(path):
    problems = []
    release.chart(Settings({"chart_path": path}, "gpu_operator", problems), "gpu-operator", "v26.7.0")
    assert problems == ["gpu_operator_chart_path: %r is not %s" % (path, problems[0].split(" is not ", 1)[1])]
    assert "an absolute, normalized path" in problems[0]


def test_a_release_name_is_helms():
    problems = []
    release.common(Settings({"namespace": "gpu-operator", "release_name": "a" * 54, "wait_timeout": "10m"}, "gpu_operator", problems))
    assert problems and problems[0].startswith("gpu_operator_release_name: ")
