"""device_plugin: the standalone path for each example fleet, and the settings that stop it."""

from __future__ import annotations

import copy

import pytest
import yaml

from . import fleets as F

PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
PRESENT = "nvidia.com/gpu.present"


def plan(name, hosts=None, **extra_vars):
    fleet = F.load(name)
    for host, changes in (hosts or {}).items():
        fleet["hosts"][host].update(changes)
    return F.plan(fleet, "device_plugin", extra_vars)


def labels(planned):
    return dict((n["name"], n["labels"]) for n in planned["node_labels"])


def test_prepared_fleet_gets_the_nvidia_runtime_class_and_plain_config():
    planned = plan("all-prepared")
    assert planned["chart"] == {
        "ref": "nvidia-device-plugin", "repo_url": "https://nvidia.github.io/k8s-device-plugin", "version": "0.20.0",
        "check_values": True,
    }
    assert planned["objects"] == [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": "nvidia-device-plugin", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}},
        {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}, "handler": "nvidia"},
    ]
    assert planned["chart_values"] == {
        "config": {"map": {"default": "version: v1\nflags:\n  migStrategy: none\n  failOnInitError: true\n  plugin:\n"
                           "    deviceListStrategy:\n    - envvar\n    - volume-mounts\n"}, "default": "default"},
        "gfd": {"enabled": True},
        "nfd": {"enabled": True},
        "runtimeClassName": "nvidia",
    }
    assert labels(planned) == dict((n, {PRESENT: "true"}) for n in ("gpu-h100-01", "gpu-h100-02", "gpu-h200-01"))


def test_default_runtime_means_no_runtime_class():
    planned = plan("all-prepared", device_plugin_runtime_class_name="")
    assert [o["kind"] for o in planned["objects"]] == ["Namespace"]
    assert "runtimeClassName" not in planned["chart_values"]


def test_time_slicing_per_node_group():
    planned = plan("time-sliced")
    configs = planned["chart_values"]["config"]["map"]
    assert sorted(configs) == ["default", "inference", "notebooks"]
    notebooks = yaml.safe_load(configs["notebooks"])
    assert notebooks == {
        "version": "v1",
        "flags": {"migStrategy": "none", "failOnInitError": True, "plugin": {"deviceListStrategy": ["envvar", "volume-mounts"]}},
        "sharing": {"timeSlicing": {"renameByDefault": False, "failRequestsGreaterThanOne": True,
                                    "resources": [{"name": "nvidia.com/gpu", "replicas": 8}]}},
    }
    assert labels(planned) == {
        "gpu-inf-01": {PLUGIN_CONFIG: "inference", PRESENT: "true"},
        "gpu-inf-02": {PLUGIN_CONFIG: "inference", PRESENT: "true"},
        "gpu-nb-01": {PLUGIN_CONFIG: "notebooks", PRESENT: "true"},
        "gpu-train-01": {PRESENT: "true"},
    }


def test_mps_by_default():
    planned = plan("mps")
    values = planned["chart_values"]
    assert values["config"]["default"] == "mps-2"
    assert yaml.safe_load(values["config"]["map"]["mps-2"])["sharing"]["mps"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 2}
    ]


def test_the_same_sharing_configs_serve_both_paths():
    for name in ("time-sliced", "mps"):
        fleet = F.load(name)
        operator = F.plan(fleet, "gpu_operator")["chart_values"]["devicePlugin"]["config"]["data"]
        plugin = F.plan(fleet, "device_plugin")["chart_values"]["config"]["map"]
        assert sorted(operator) == sorted(plugin)
        for key in operator:
            without_flag = yaml.safe_load(plugin[key])
            assert without_flag["flags"].pop("failOnInitError") is True
            # The operator sets its plugin's strategy itself (CDI, or the variable below).
            assert without_flag["flags"].pop("plugin") == {"deviceListStrategy": ["envvar", "volume-mounts"]}
            assert without_flag == yaml.safe_load(operator[key])


def test_airgapped_images_and_pull_secrets():
    planned = plan("airgapped-standalone")
    values = planned["chart_values"]
    assert planned["chart"] == {"ref": "/srv/charts/nvidia-device-plugin-0.20.0.tgz", "check_values": True}
    assert values["image"] == {"repository": "registry.example.internal:5000/nvidia/k8s-device-plugin"}
    assert values["nfd"] == {"enabled": True, "image": {"repository": "registry.example.internal:5000/nvidia/node-feature-discovery"}}
    assert values["imagePullSecrets"] == [{"name": "site-pull"}, {"name": "gpufleet-registry"}]
    assert "not-a-real-secret" not in repr(planned)


def test_exact_image_repository_wins():
    planned = plan("airgapped-standalone", device_plugin_image_repository="mirror.example/nv/plugin", device_plugin_gfd_enabled=False)
    assert planned["chart_values"]["image"] == {"repository": "mirror.example/nv/plugin"}
    assert planned["chart_values"]["nfd"] == {"enabled": False}


@pytest.mark.parametrize("gfd, nfd, deployed", [(True, True, True), (True, False, False), (False, True, False)])
def test_node_feature_discovery_comes_with_gfd_unless_switched_off(gfd, nfd, deployed):
    planned = plan("all-prepared", device_plugin_gfd_enabled=gfd, device_plugin_nfd_enabled=nfd)
    assert planned["chart_values"]["gfd"] == {"enabled": gfd}
    assert planned["chart_values"]["nfd"] == {"enabled": deployed}


INVALID = [
    (
        "node-left-to-the-operator",
        dict(name="all-prepared", hosts={"gpu-h100-01": {"nvidia_driver_method": "operator"}}),
        [
            "device_plugin: host 'gpu-h100-01': nvidia_driver_method is 'operator', but the standalone device plugin "
            "needs the driver on the host (expected package or preinstalled; or the gpufleet.nvidia.gpu_operator role "
            "for this fleet)",
            "device_plugin: host 'gpu-h100-01': container_toolkit_enabled is false, but the standalone device plugin "
            "needs the NVIDIA Container Toolkit on the host (expected true; or the gpufleet.nvidia.gpu_operator role)",
        ],
    ),
    (
        "no-runtime-configured",
        dict(name="all-prepared", hosts={"gpu-h200-01": {"container_toolkit_runtime": "none"}}),
        [
            "device_plugin: host 'gpu-h200-01': container_toolkit_runtime is 'none', so no runtime has an nvidia "
            "handler for the device plugin's pods (expected containerd, crio, docker, k3s or rke2)",
        ],
    ),
    (
        "mps-with-mig",
        dict(name="mps", device_plugin_mig_strategy="mixed"),
        [
            "device_plugin_sharing_configs.mps-2.strategy: 'mps' does not combine with MIG (device_plugin_mig_strategy "
            "is 'mixed'; expected device_plugin_mig_strategy 'none' for a fleet that uses MPS, or strategy time-slicing)",
        ],
    ),
    (
        "replicas-not-a-number",
        dict(name="time-sliced", gpufleet_sharing_configs={
            "inference": {"strategy": "time-slicing", "replicas": "four"},
            "notebooks": {"strategy": "mps"},
        }),
        [
            "device_plugin_sharing_configs.inference.replicas: 'four' is not a number of replicas for time-slicing "
            "(expected an integer of at least 2)",
            "device_plugin_sharing_configs.notebooks.replicas: null is not a number of replicas for mps (expected an "
            "integer of at least 2)",
        ],
    ),
    (
        "sharing-options-on-a-plain-config",
        dict(name="all-prepared", gpufleet_sharing_configs={"plain": {"replicas": 4}}),
        [
            "device_plugin_sharing_configs.plain: replicas only apply to a shared config (strategy is 'none'; expected "
            "strategy time-slicing or mps)",
        ],
    ),
    (
        "bad-config-name-and-resource",
        dict(name="all-prepared", gpufleet_sharing_configs={
            "Time Sliced": {"strategy": "time-slicing", "replicas": 2},
            "ts": {"strategy": "time-slicing", "replicas": 2, "resources": ["gpu", "nvidia.com/gpu", "nvidia.com/gpu"]},
        }),
        [
            "device_plugin_sharing_configs: 'Time Sliced' is not a config name (expected a label value: at most 63 "
            "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric)",
            "device_plugin_sharing_configs.ts.resources: 'gpu' is not a GPU resource name (expected nvidia.com/gpu or "
            "nvidia.com/mig-<profile>, e.g. nvidia.com/mig-1g.10gb)",
            "device_plugin_sharing_configs.ts.resources: 'nvidia.com/gpu' is listed twice (expected each resource once)",
        ],
    ),
    (
        "derived-values-overridden",
        dict(name="all-prepared", device_plugin_values_overrides={"migStrategy": "mixed", "config": {"name": "x"}}),
        [
            "device_plugin_values_overrides.migStrategy: the role sets this value from the inventory; remove it from "
            "device_plugin_values_overrides (see the role's README for the variable that drives it)",
            "device_plugin_values_overrides.config: the role sets this value from the inventory; remove it from "
            "device_plugin_values_overrides (see the role's README for the variable that drives it)",
        ],
    ),
    (
        "bad-namespace-handler-and-timeout",
        dict(name="all-prepared", device_plugin_namespace="NVIDIA", device_plugin_runtime_class_handler="Nvidia_Runtime",
             device_plugin_wait_timeout="ten minutes"),
        [
            "device_plugin_namespace: 'NVIDIA' is not a namespace name (expected a DNS label: lower-case alphanumerics "
            "and '-', at most 63 characters)",
            "device_plugin_wait_timeout: 'ten minutes' is not a duration (expected e.g. 10m or 900s)",
            "device_plugin_runtime_class_handler: 'Nvidia_Runtime' is not a runtime handler (expected a DNS label such "
            "as nvidia)",
        ],
    ),
]


@pytest.mark.parametrize("case,change,expected", INVALID, ids=[c[0] for c in INVALID])
def test_settings_that_cannot_work_stop_the_role_with_exact_messages(case, change, expected):
    change = copy.deepcopy(change)
    planned = plan(change.pop("name"), change.pop("hosts", None), **change)
    assert planned["problems"] == expected
    assert planned["chart_values"] is None


@pytest.mark.parametrize("value, problem", [
    (["cdi-cri"], None),
    ("volume-mounts", "device_plugin_device_list_strategy: 'volume-mounts' is not a list of strategies (expected e.g. ['envvar', 'volume-mounts'])"),
    ([], "device_plugin_device_list_strategy: [] is not a list of strategies (expected e.g. ['envvar', 'volume-mounts'])"),
    (["envvar", "mounts"], "device_plugin_device_list_strategy: 'mounts' is not a device list strategy (expected one of: envvar, "
                           "volume-mounts, cdi-annotations, cdi-cri)"),
    (["envvar", "envvar"], "device_plugin_device_list_strategy: ['envvar', 'envvar'] names a strategy twice (expected each once)"),
])
def test_the_device_list_strategy_is_checked(value, problem):
    planned = plan("all-prepared", device_plugin_device_list_strategy=value)
    if problem is None:
        assert planned["problems"] == []
        assert yaml.safe_load(planned["chart_values"]["config"]["map"]["default"])["flags"]["plugin"] == {"deviceListStrategy": value}
    else:
        assert planned["problems"] == [problem]
