"""gpu_fleet_nodes: per-host variables, their defaults and their problems."""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.filter.gpu_fleet_nodes import gpu_fleet_nodes


def test_defaults_make_a_host_prepared_on_containerd():
    assert gpu_fleet_nodes(["gpu-1"], {"gpu-1": {"nvidia_driver_method": "package"}}, "gpu_operator") == {
        "nodes": [{
            "host": "gpu-1", "name": "gpu-1", "driver_method": "package", "host_driver": True, "host_toolkit": True,
            "runtime": "containerd", "sharing_config": "", "mig_config": "", "gpus": None, "runtime_version": None, "cdi_ready": "enable_cdi",
            "operator_driver": False, "held": False, "moved_back": False,
        }],
        "problems": [],
    }


def test_a_node_that_does_not_declare_how_it_is_prepared_is_a_problem():
    result = gpu_fleet_nodes(["gpu-1"], {"gpu-1": {}}, "gpu_operator")
    assert result["problems"] == [
        "gpu_operator: host 'gpu-1': nvidia_driver_method is not set in the inventory, so how the node is prepared is "
        "not declared (expected one of: package, preinstalled, operator for every node of the GPU node group)"
    ]


def test_a_node_this_run_did_not_reach_refuses_the_plan_and_one_outside_it_does_not():
    hostvars = dict((h, {"nvidia_driver_method": "package"}) for h in ("a", "b", "c"))
    run = {"discovered": True, "hosts": ["a", "b"], "reached": ["a"]}
    result = gpu_fleet_nodes(["a", "b", "c"], hostvars, "gpu_operator", run)
    # c was outside the run (--limit): planned from the inventory; b failed: the plan is refused.
    assert [n["host"] for n in result["nodes"]] == ["a", "b", "c"]
    assert len(result["problems"]) == 1 and result["problems"][0].startswith(
        "gpu_operator: host 'b': failed or was unreachable in this run before the cluster layer")
    assert "--limit '!b'" in result["problems"][0]
    # A run that did not discover (--tags cluster) refuses nothing for it.
    assert gpu_fleet_nodes(["a", "b", "c"], hostvars, "gpu_operator", dict(run, discovered=False))["problems"] == []


def test_discovery_facts_give_the_gpus_the_plan_checks_mig_against():
    facts = {"gpu_count": 1, "driver": {"nvidia_smi": {"gpus": [
        {"name": "NVIDIA H200", "mig_capable": True, "memory_total_mib": 143771, "uuid": "GPU-x"}]}}}
    node, = gpu_fleet_nodes(["a"], {"a": {"nvidia_driver_method": "preinstalled", "gpufleet_nvidia": facts}}, "gpu_operator")["nodes"]
    assert node["gpus"] == {"count": 1, "smi": [{"name": "NVIDIA H200", "mig_capable": True, "memory_total_mib": 143771}], "pci": []}


def test_operator_method_leaves_the_toolkit_to_the_operator_unless_asked():
    nodes = gpu_fleet_nodes(
        ["a", "b", "c"],
        {"a": {"nvidia_driver_method": "operator"},
         "b": {"nvidia_driver_method": "operator", "container_toolkit_enabled": "yes"},
         "c": {"nvidia_driver_method": "preinstalled", "container_toolkit_enabled": False}},
        "gpu_operator",
    )["nodes"]
    assert [(n["host"], n["host_driver"], n["host_toolkit"]) for n in nodes] == [
        ("a", False, False), ("b", False, True), ("c", True, False),
    ]


def test_nodes_are_sorted_by_node_name_and_names_are_unique():
    result = gpu_fleet_nodes(
        ["z", "a", "dup"],
        {"z": {"gpufleet_node_name": "node-1", "nvidia_driver_method": "package"},
         "a": {"gpufleet_node_name": "node-2", "nvidia_driver_method": "package"},
         "dup": {"gpufleet_node_name": "node-1", "nvidia_driver_method": "package"}},
        "device_plugin",
    )
    assert [n["name"] for n in result["nodes"]] == ["node-1", "node-1", "node-2"]
    assert result["problems"] == [
        "device_plugin: host 'dup': gpufleet_node_name 'node-1' is also the node of host 'z' (expected one host per node)"
    ]


def test_bad_values_and_unknown_hosts_are_problems():
    result = gpu_fleet_nodes(
        ["a", "ghost"],
        {"a": {"nvidia_driver_method": "package", "container_toolkit_runtime": "podman", "gpufleet_sharing_config": "-bad-",
               "gpufleet_mig_config": "x" * 64}},
        "gpu_operator",
    )
    assert result["problems"] == [
        "gpu_operator: host 'a': container_toolkit_runtime 'podman' is not a container runtime (expected one of: "
        "containerd, crio, docker, k3s, rke2, none)",
        "gpu_operator: host 'a': gpufleet_sharing_config '-bad-' is not a label value (expected at most 63 "
        "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric)",
        "gpu_operator: host 'a': gpufleet_mig_config '%s' is not a label value (expected at most 63 alphanumerics, "
        "'-', '_' or '.', starting and ending with an alphanumeric)" % ("x" * 64),
        "gpu_operator: host 'ghost' of the node group is not in the inventory",
    ]
