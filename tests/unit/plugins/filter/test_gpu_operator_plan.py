"""gpu_operator: what each example fleet turns into, and the settings that stop the role."""

from __future__ import annotations

import os

import copy

import pytest
import yaml

from . import fleets as F

DEPLOY_DRIVER = "nvidia.com/gpu.deploy.driver"
DEPLOY_TOOLKIT = "nvidia.com/gpu.deploy.container-toolkit"
PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
MIG_CONFIG = "nvidia.com/mig.config"


def plan(name, **extra_vars):
    return F.plan(F.load(name), "gpu_operator", extra_vars)


def labels(planned):
    return dict((n["name"], n["labels"]) for n in planned["node_labels"])


def test_all_prepared_needs_neither_driver_nor_toolkit_and_no_labels():
    planned = plan("all-prepared")
    values = planned["chart_values"]
    assert values["driver"] == {"enabled": False}
    assert values["toolkit"] == {"enabled": False}
    # The chart does not read operator.defaultRuntime since v25.3: only upgradeCRD is set (off:
    # the role applies the chart's CRDs itself before the release).
    assert values["operator"] == {"upgradeCRD": False}
    assert labels(planned) == {"gpu-h100-01": {}, "gpu-h100-02": {}, "gpu-h200-01": {}}
    assert planned["summary"]["driver"] == "host" and planned["summary"]["toolkit"] == "host"
    assert planned["chart"] == {"ref": "gpu-operator", "repo_url": "https://helm.ngc.nvidia.com/nvidia", "version": "v26.7.0",
                                "check_values": True, "values_crd": "clusterpolicies.nvidia.com",
                                "lines": [{"line": "25.10", "newest": "v25.10.1"}, {"line": "26.3", "newest": "v26.3.3"},
                                          {"line": "26.7", "newest": "v26.7.0"}]}
    assert planned["summary"]["release"] == {"version": "v26.7.0", "line": "26.7", "support": "supported"}
    assert planned["warnings"] == []
    assert planned["objects"] == [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": "gpu-operator", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}
    ]


def test_none_prepared_lets_the_operator_deploy_both_without_labels():
    planned = plan("none-prepared")
    values = planned["chart_values"]
    assert values["driver"] == {"enabled": True, "version": "580", "usePrecompiled": True}
    assert values["toolkit"] == {"enabled": True}
    assert labels(planned) == {"gpu-l40s-01": {}, "gpu-l40s-02": {}}
    assert planned["summary"]["driver"] == "operator"


def test_mixed_fleet_enables_both_and_keeps_the_operator_off_prepared_nodes():
    planned = plan("mixed")
    values = planned["chart_values"]
    assert values["driver"] == {"enabled": True, "rdma": {"enabled": True, "useHostMofed": True}}
    assert values["toolkit"] == {"enabled": True}
    assert labels(planned) == {
        "gpu-a100-01": {DEPLOY_TOOLKIT: "false", DEPLOY_DRIVER: "false"},
        "gpu-a100-02": {DEPLOY_TOOLKIT: "false", DEPLOY_DRIVER: "false"},
        "gpu-l4-01": {DEPLOY_DRIVER: "false"},
        "gpu-t4-01": {},
    }
    assert planned["summary"]["driver"] == "mixed" and planned["summary"]["toolkit"] == "mixed"
    assert planned["summary"]["host_driver_nodes"] == ["gpu-a100-01", "gpu-a100-02", "gpu-l4-01"]


def test_k3s_points_the_toolkit_at_k3s_containerd_and_uses_node_names():
    planned = plan("k3s")
    base = "/var/lib/rancher/k3s/agent/etc/containerd"
    assert planned["chart_values"]["toolkit"] == {
        "enabled": True,
        "env": [
            {"name": "CONTAINERD_CONFIG", "value": base + "/config.toml"},
            {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"},
            {"name": "RUNTIME_CONFIG_SOURCE", "value": "file=" + base + "/config.toml"},
            {"name": "RUNTIME_DROP_IN_CONFIG", "value": base + "/config-v3.toml.d/99-nvidia.toml"},
        ],
    }
    assert planned["chart_values"]["operator"] == {"upgradeCRD": False}
    assert labels(planned) == {
        "edge-gpu-1": {},
        "edge-gpu-2": {},
        "edge-gpu-3": {DEPLOY_TOOLKIT: "false", DEPLOY_DRIVER: "false"},
    }
    assert planned["summary"]["container_runtime"] == "k3s"


def test_rke2_points_the_toolkit_at_rke2_containerd_and_switches_components_off():
    planned = plan("rke2")
    env = dict((e["name"], e["value"]) for e in planned["chart_values"]["toolkit"]["env"])
    assert env == {
        "CONTAINERD_CONFIG": "/var/lib/rancher/rke2/agent/etc/containerd/config.toml",
        "CONTAINERD_SOCKET": "/run/k3s/containerd/containerd.sock",
        "RUNTIME_CONFIG_SOURCE": "file=/var/lib/rancher/rke2/agent/etc/containerd/config.toml",
        "RUNTIME_DROP_IN_CONFIG": "/var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.d/99-nvidia.toml",
    }
    assert planned["chart_values"]["dcgmExporter"] == {"enabled": False}
    assert planned["chart_values"]["cdi"] == {"enabled": False}


def test_toolkit_env_can_replace_a_path_and_add_a_variable():
    planned = plan("k3s", gpu_operator_toolkit_env={
        "RUNTIME_DROP_IN_CONFIG": "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.d/99-nvidia.toml",
        "CONTAINERD_SET_AS_DEFAULT": False,
    })
    env = planned["chart_values"]["toolkit"]["env"]
    assert [e["name"] for e in env] == [
        "CONTAINERD_CONFIG", "CONTAINERD_SOCKET", "RUNTIME_CONFIG_SOURCE", "RUNTIME_DROP_IN_CONFIG", "CONTAINERD_SET_AS_DEFAULT",
    ]
    assert env[3]["value"] == "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.d/99-nvidia.toml"
    assert env[4] == {"name": "CONTAINERD_SET_AS_DEFAULT", "value": "false"}


def test_no_toolkit_env_when_every_host_has_its_toolkit():
    fleet = F.load("k3s")
    for host in fleet["hosts"].values():
        host["nvidia_driver_method"] = "package"
    assert F.plan(fleet, "gpu_operator")["chart_values"]["toolkit"] == {"enabled": False}


def test_time_slicing_configs_become_the_device_plugin_config_and_labels():
    planned = plan("time-sliced")
    config = planned["chart_values"]["devicePlugin"]["config"]
    assert config["create"] is True
    assert config["name"] == "gpufleet-device-plugin-config"
    assert config["default"] == "default"
    assert sorted(config["data"]) == ["default", "inference", "notebooks"]
    assert config["data"]["inference"] == (
        "version: v1\n"
        "flags:\n"
        "  migStrategy: none\n"
        "sharing:\n"
        "  timeSlicing:\n"
        "    renameByDefault: true\n"
        "    failRequestsGreaterThanOne: false\n"
        "    resources:\n"
        "    - name: nvidia.com/gpu\n"
        "      replicas: 4\n"
    )
    assert yaml.safe_load(config["data"]["notebooks"])["sharing"]["timeSlicing"]["failRequestsGreaterThanOne"] is True
    assert config["data"]["default"] == "version: v1\nflags:\n  migStrategy: none\n"
    assert labels(planned) == {
        "gpu-inf-01": {PLUGIN_CONFIG: "inference"},
        "gpu-inf-02": {PLUGIN_CONFIG: "inference"},
        "gpu-nb-01": {PLUGIN_CONFIG: "notebooks"},
        "gpu-train-01": {},
    }
    train = [n for n in planned["node_labels"] if n["name"] == "gpu-train-01"][0]
    assert train["remove"][PLUGIN_CONFIG] == ["default", "inference", "notebooks"]


def test_mps_default_config():
    planned = plan("mps")
    config = planned["chart_values"]["devicePlugin"]["config"]
    assert config["default"] == "mps-2"
    assert sorted(config["data"]) == ["exclusive", "mps-2"]
    mps = yaml.safe_load(config["data"]["mps-2"])
    assert mps["sharing"] == {"mps": {"renameByDefault": False, "failRequestsGreaterThanOne": False,
                                      "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}
    assert "sharing" not in yaml.safe_load(config["data"]["exclusive"])
    assert labels(planned)["gpu-excl-01"] == {PLUGIN_CONFIG: "exclusive"}
    assert labels(planned)["gpu-mps-01"] == {}


def test_mig_strategy_manager_config_and_per_node_layouts():
    planned = plan("mig")
    values = planned["chart_values"]
    assert values["mig"] == {"strategy": "mixed"}
    assert values["migManager"] == {"enabled": True, "config": {"name": "gpufleet-mig-parted-config", "default": "all-disabled"}}
    (namespace, configmap) = planned["objects"]
    assert configmap["kind"] == "ConfigMap" and configmap["metadata"]["namespace"] == "gpu-operator"
    parted = yaml.safe_load(configmap["data"]["config.yaml"])
    assert parted["version"] == "v1"
    assert sorted(parted["mig-configs"]) == ["all-1g.18gb", "all-disabled", "balanced"]
    assert parted["mig-configs"]["balanced"][0]["mig-devices"] == {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
    sliced = yaml.safe_load(values["devicePlugin"]["config"]["data"]["sliced-1g"])
    assert sliced["flags"]["migStrategy"] == "mixed"
    assert sliced["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/mig-1g.18gb", "replicas": 2}]
    assert labels(planned) == {
        "gpu-h100-01": {},
        "gpu-h200-mig-01": {MIG_CONFIG: "all-1g.18gb", PLUGIN_CONFIG: "sliced-1g"},
        "gpu-h200-mig-02": {MIG_CONFIG: "balanced"},
    }


def test_airgapped_site_redirects_every_image_and_pulls_with_the_created_secret():
    planned = plan("airgapped")
    values = planned["chart_values"]
    mirror = "registry.example.internal:5000/nvidia"
    assert planned["chart"] == {"ref": "/srv/charts/gpu-operator-v25.10.0.tgz", "check_values": True,
                                "values_crd": "clusterpolicies.nvidia.com"}
    for component in ("operator", "validator", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd",
                      "migManager", "nodeStatusExporter", "gds", "gdrcopy"):
        assert values[component]["repository"] == mirror, component
        assert values[component]["imagePullSecrets"] == ["gpufleet-registry"], component
    assert values["driver"]["repository"] == "registry.example.internal:5000/nvidia-drivers"
    assert values["driver"]["manager"] == {"repository": mirror}
    assert values["node-feature-discovery"] == {"image": {"repository": mirror + "/node-feature-discovery"}}
    assert "not-a-real-secret" not in repr(planned)
    # Both hosts have their toolkit (toolkit.enabled false); only gpu-sec-01 has its driver.
    assert values["toolkit"]["enabled"] is False
    assert labels(planned) == {"gpu-sec-01": {DEPLOY_DRIVER: "false"}, "gpu-sec-02": {}}


def test_overrides_merge_over_the_built_values():
    planned = plan("all-prepared", gpu_operator_values_overrides={"dcgmExporter": {"serviceMonitor": {"enabled": True}},
                                                                  "nfd": {"enabled": False}})
    values = planned["chart_values"]
    assert values["dcgmExporter"] == {"enabled": True, "serviceMonitor": {"enabled": True}}
    assert values["nfd"] == {"enabled": False}


# --- Settings that stop the role before anything is applied --------------------------------------
def _mutate(name, hosts=None, **extra_vars):
    fleet = F.load(name)
    for host, changes in (hosts or {}).items():
        fleet["hosts"].setdefault(host, {}).update(changes)
    return F.plan(fleet, "gpu_operator", extra_vars)


INVALID = [
    (
        "mps-with-mig",
        dict(name="mps", gpufleet_mig_strategy="single"),
        [
            "gpu_operator_sharing_configs.mps-2.strategy: 'mps' does not combine with MIG (gpu_operator_mig_strategy "
            "is 'single'; expected gpu_operator_mig_strategy 'none' for a fleet that uses MPS, or strategy time-slicing)",
        ],
    ),
    (
        "time-slicing-one-replica",
        dict(name="time-sliced", gpufleet_sharing_configs={
            "inference": {"strategy": "time-slicing", "replicas": 1},
            "notebooks": {"strategy": "time-slicing", "replicas": 8},
        }),
        [
            "gpu_operator_sharing_configs.inference.replicas: 1 is not a number of replicas for time-slicing "
            "(expected an integer of at least 2)",
        ],
    ),
    (
        "unknown-mig-strategy",
        dict(name="all-prepared", gpu_operator_mig_strategy="dual"),
        ["gpu_operator_mig_strategy: 'dual' is not a MIG strategy (expected one of: none, single, mixed)"],
    ),
    (
        "unknown-sharing-strategy-and-option",
        dict(name="all-prepared", gpufleet_sharing_configs={"ts": {"strategy": "slicing", "replica": 4}}),
        [
            "gpu_operator_sharing_configs.ts: unknown option 'replica' (expected one of: strategy, replicas, "
            "rename_by_default, fail_requests_greater_than_one, resources)",
            "gpu_operator_sharing_configs.ts.strategy: 'slicing' is not a sharing strategy (expected one of: none, "
            "time-slicing, mps)",
        ],
    ),
    (
        "node-asks-for-a-missing-config",
        dict(name="time-sliced", hosts={"gpu-train-01": {"gpufleet_sharing_config": "training"}}),
        [
            "gpu_operator: host 'gpu-train-01': gpufleet_sharing_config 'training' is not one of the configs in "
            "gpu_operator_sharing_configs (expected one of: default, inference, notebooks)",
        ],
    ),
    (
        "default-config-missing",
        dict(name="time-sliced", gpufleet_sharing_default="shared"),
        [
            "gpu_operator_sharing_default: 'shared' is not one of the configs in gpu_operator_sharing_configs "
            "(expected one of: inference, notebooks)",
        ],
    ),
    (
        "mig-resource-without-mixed",
        dict(name="mig", gpufleet_mig_strategy="single"),
        [
            "gpu_operator_sharing_configs.sliced-1g.resources: 'nvidia.com/mig-1g.18gb' is only advertised with MIG "
            "strategy 'mixed' (gpu_operator_mig_strategy is 'single'; expected nvidia.com/gpu)",
        ],
    ),
    (
        "mig-layout-with-strategy-none",
        dict(name="all-prepared", hosts={"gpu-h200-01": {"gpufleet_mig_config": "all-1g.18gb"}}),
        [
            "gpu_operator: host 'gpu-h200-01': gpufleet_mig_config 'all-1g.18gb' partitions the GPUs, but "
            "gpu_operator_mig_strategy is 'none', which advertises no MIG devices (expected gpu_operator_mig_strategy "
            "single or mixed)",
        ],
    ),
    (
        "mig-layout-not-among-own-configs",
        dict(name="mig", hosts={"gpu-h100-01": {"gpufleet_mig_config": "all-3g.71gb"}}),
        [
            "gpu_operator: host 'gpu-h100-01': gpufleet_mig_config 'all-3g.71gb' is not one of the configs in "
            "gpu_operator_mig_configs (expected one of: all-1g.18gb, all-disabled, balanced)",
        ],
    ),
    (
        "mig-layout-without-manager",
        dict(name="mig", gpu_operator_mig_manager_enabled=False),
        [
            "gpu_operator: host 'gpu-h200-mig-01': gpufleet_mig_config 'all-1g.18gb' needs the MIG manager "
            "(gpu_operator_mig_manager_enabled is false; expected true)",
            "gpu_operator: host 'gpu-h200-mig-02': gpufleet_mig_config 'balanced' needs the MIG manager "
            "(gpu_operator_mig_manager_enabled is false; expected true)",
        ],
    ),
    (
        "rdma-with-host-drivers-only",
        dict(name="all-prepared", gpu_operator_rdma_enabled=True, gpu_operator_gds_enabled=True),
        [
            "gpu_operator_rdma_enabled: true needs the operator's driver containers, which load the kernel modules it "
            "adds, but every GPU node has a host driver (nvidia_driver_method package or preinstalled) (expected "
            "nvidia_driver_method: operator on the nodes that need it, or the module loaded on the hosts and "
            "gpu_operator_rdma_enabled: false)",
            "gpu_operator_gds_enabled: true needs the operator's driver containers, which load the kernel modules it "
            "adds, but every GPU node has a host driver (nvidia_driver_method package or preinstalled) (expected "
            "nvidia_driver_method: operator on the nodes that need it, or the module loaded on the hosts and "
            "gpu_operator_gds_enabled: false)",
        ],
    ),
    (
        "host-mofed-without-rdma",
        dict(name="none-prepared", gpu_operator_rdma_use_host_mofed=True),
        [
            "gpu_operator_rdma_use_host_mofed: true only applies to GPUDirect RDMA (gpu_operator_rdma_enabled is "
            "false; expected gpu_operator_rdma_enabled: true, or gpu_operator_rdma_use_host_mofed: false)",
        ],
    ),
    (
        "precompiled-with-a-release",
        dict(name="none-prepared", gpu_operator_driver_version="580.95.05"),
        [
            "gpu_operator_driver_version: '580.95.05' is a release, but precompiled driver images are chosen by "
            "branch (gpu_operator_driver_use_precompiled is true; expected a branch such as 580)",
        ],
    ),
    (
        "bad-driver-version",
        dict(name="none-prepared", gpu_operator_driver_version="5x5"),
        [
            "gpu_operator_driver_version: '5x5' is not a driver version (expected a branch such as 580 or a "
            "release such as 580.95.05)",
        ],
    ),
    (
        "mixed-runtimes",
        # gpu-t4-01 and gpu-l4-01 get the operator's toolkit, whose containerd settings are one per release.
        dict(name="mixed", hosts={"gpu-t4-01": {"container_toolkit_runtime": "k3s"}}),
        [
            "gpu_operator: the nodes whose toolkit the operator deploys run container runtimes that keep containerd "
            "in different places (containerd: gpu-l4-01; k3s: gpu-t4-01), and the toolkit's containerd settings "
            "(toolkit.env) are one per release (expected one of k3s, rke2 or the others for those nodes, the toolkit "
            "prepared on the host for the rest (container_toolkit_enabled: true), or gpu_operator_container_runtime set)",
        ],
    ),
    (
        "prepared-node-without-runtime",
        dict(name="all-prepared", hosts={"gpu-h100-02": {"container_toolkit_runtime": "none"}}),
        [
            "gpu_operator: host 'gpu-h100-02': container_toolkit_runtime is 'none', but the operator's pods run with "
            "runtimeClassName nvidia, which needs the host's runtime to have an nvidia handler (expected containerd, "
            "crio, docker, k3s or rke2; or container_toolkit_enabled: false so the operator deploys the toolkit)",
        ],
    ),
    (
        "derived-value-overridden",
        dict(name="all-prepared", gpu_operator_values_overrides={"driver": {"enabled": True}}),
        [
            "gpu_operator_values_overrides.driver.enabled: the role sets this value from the inventory; remove it "
            "from gpu_operator_values_overrides (see the role's README for the variable that drives it)",
        ],
    ),
    (
        "bad-chart-version-and-registry",
        dict(name="all-prepared", gpu_operator_chart_version="latest", gpu_operator_image_registry="https://mirror/nvidia"),
        [
            "gpu_operator_chart_version: 'latest' is not a chart version (expected e.g. v26.7.0)",
            "gpu_operator_image_registry: 'https://mirror/nvidia' is not a registry prefix (expected host[:port][/path] "
            "without a scheme, e.g. registry.example.com:5000/nvidia)",
        ],
    ),
    (
        "registry-credentials-incomplete",
        dict(name="all-prepared", gpufleet_registry_server="registry.example.internal:5000", gpufleet_registry_username="robot"),
        [
            "gpu_operator_registry_password: not set, but gpu_operator_registry_server, gpu_operator_registry_username "
            "are (expected all of gpu_operator_registry_server, _username and _password for a pull secret, or none)",
        ],
    ),
    (
        "unknown-image-component",
        dict(name="all-prepared", gpu_operator_image_repositories={"plugin": "r.example/x"}),
        [
            "gpu_operator_image_repositories: 'plugin' is not a chart component (expected one of: operator, validator, "
            "driver, driver.manager, toolkit, devicePlugin, dcgm, dcgmExporter, gfd, migManager, nodeStatusExporter, "
            "gds, gdrcopy, node-feature-discovery)",
        ],
    ),
    (
        "bad-host-variables",
        dict(name="all-prepared", hosts={
            "gpu-h100-01": {"nvidia_driver_method": "rpm"},
            "gpu-h100-02": {"container_toolkit_enabled": "maybe", "gpufleet_node_name": "GPU_02"},
        }),
        [
            "gpu_operator: host 'gpu-h100-01': nvidia_driver_method 'rpm' is not a driver method (expected one of: "
            "package, preinstalled, operator)",
            "gpu_operator: host 'gpu-h100-02': gpufleet_node_name 'GPU_02' is not a Kubernetes node name (expected "
            "lower-case alphanumerics, '-' and '.'; set gpufleet_node_name to the node's name in the cluster)",
            "gpu_operator: host 'gpu-h100-02': container_toolkit_enabled: 'maybe' is not a boolean (expected true or false)",
        ],
    ),
]


@pytest.mark.parametrize("case,change,expected", INVALID, ids=[c[0] for c in INVALID])
def test_settings_that_cannot_work_stop_the_role_with_exact_messages(case, change, expected):
    change = copy.deepcopy(change)
    name = change.pop("name")
    hosts = change.pop("hosts", None)
    planned = _mutate(name, hosts, **change)
    assert planned["problems"] == expected
    assert planned["chart_values"] is None and planned["objects"] is None and planned["node_labels"] is None


def test_an_empty_node_group_says_how_to_fill_it():
    fleet = F.load("all-prepared")
    fleet["hosts"] = {}
    assert F.plan(fleet, "gpu_operator")["problems"] == [
        "gpu_operator_node_group: no GPU nodes in group 'gpu_nodes' (expected the inventory group that declares every "
        "GPU node of the cluster, each with its nvidia_driver_method; or gpufleet_gpu_node_group set to that group)"
    ]


def test_nodes_on_containerd_and_cri_o_share_one_release():
    # The operator reads each node's runtime since v25.3; only the toolkit's containerd settings
    # are one per release, and containerd and CRI-O nodes need none.
    fleet = F.load("mixed")
    fleet["hosts"]["gpu-t4-01"] = dict(fleet["hosts"]["gpu-t4-01"], container_toolkit_runtime="crio")
    planned = F.plan(fleet, "gpu_operator")
    assert planned["problems"] == []
    assert "env" not in planned["chart_values"]["toolkit"]


def _smi_facts(path):
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.nvidia_smi import parse_nvidia_smi_xml
    with open(os.path.join(F.FIXTURES, path)) as f:
        smi = parse_nvidia_smi_xml(f.read())
    return {"gpu_count": len(smi["gpus"]), "driver": {"nvidia_smi": smi}}


def test_mig_configs_are_checked_against_the_gpus_discovery_found():
    # The captured nvidia-smi answers of the H200 host and of the two-L40S host (no MIG).
    fleet = F.load("mig")
    fleet["hosts"]["gpu-h200-mig-01"] = dict(fleet["hosts"]["gpu-h200-mig-01"], gpufleet_nvidia=_smi_facts("cdi/h200/nvidia-smi-q-x.xml"))
    planned = F.plan(fleet, "gpu_operator")
    assert planned["problems"] == []
    assert planned["summary"]["notes"] == [
        "host 'gpu-h200-mig-02': MIG config 'balanced' not checked against its GPUs: this run did not discover the node",
        "CDI in containerd not checked on 3 nodes (gpu-h100-01, gpu-h200-mig-01, gpu-h200-mig-02): this run did not read their "
        "containerd version (containerd before 2.0 needs container_toolkit_enable_cdi: true for the operator's CDI devices)"]
    fleet["hosts"]["gpu-h200-mig-02"] = dict(fleet["hosts"]["gpu-h200-mig-02"],
                                             gpufleet_nvidia=_smi_facts("hosts/debian12-l40s-x2-package/commands/nvidia-smi-q-x.txt"))
    problems = F.plan(fleet, "gpu_operator")["problems"]
    assert problems == [
        "gpu_operator: host 'gpu-h200-mig-02': gpufleet_mig_config: MIG config 'balanced': GPU %d (NVIDIA L40S) cannot do MIG "
        "(nvidia-smi reports its MIG mode as N/A) (expected a config whose profiles the node's GPUs have, or no "
        "gpufleet_mig_config)" % i for i in (0, 1)]


def test_without_cdi_the_operator_plugin_also_mounts_the_devices_for_hosts_that_isolate_unprivileged_containers():
    # A host toolkit isolates unprivileged containers by default (NVIDIA_VISIBLE_DEVICES ignored
    # in them): without CDI, the operator's plugin must hand the GPUs over as volume mounts too.
    assert "env" not in F.plan(F.load("all-prepared"), "gpu_operator")["chart_values"]["devicePlugin"]
    planned = F.plan(F.load("all-prepared"), "gpu_operator", {"gpu_operator_cdi_enabled": False})
    assert planned["chart_values"]["devicePlugin"]["env"] == [{"name": "DEVICE_LIST_STRATEGY", "value": "envvar,volume-mounts"}]
    # No node with its toolkit from the host: the operator's own toolkit, nothing to add.
    planned = F.plan(F.load("none-prepared"), "gpu_operator", {"gpu_operator_cdi_enabled": False})
    assert "env" not in planned["chart_values"]["devicePlugin"]


def _containerd(version):
    return {"ansible_facts": {"gpufleet_nvidia": {"gpu_count": 1, "container": {"containerd": {"version": version}}}}}


OFF = {"container_toolkit_enable_cdi": False}


@pytest.mark.parametrize("version, node_vars, refused", [
    ("1.7.24", OFF, "off"),
    ("1.6.20~ds1", OFF, "1.6"),  # Debian 12's containerd, as it prints its version
    ("1.7.24", {}, None),  # the toolkit role's default: CDI on, as NVIDIA's since toolkit 1.18 and operator 25.10
    ("1.7.24", {"container_toolkit_enable_cdi": True}, None),
    ("1.7.24", dict(OFF, container_toolkit_set_as_default=True), None),  # the NVIDIA runtime reads the CDI annotations itself
    ("2.1.4", OFF, None),  # CDI on by default in containerd 2
    # containerd 1.6's CRI plugin has no CDI at all: enable_cdi there is ignored
    ("1.6.20~ds1", {}, "1.6"),
    ("1.6.20~ds1", {"container_toolkit_set_as_default": True}, None),
])
def test_the_host_runtime_must_hand_over_the_cdi_devices_the_operator_names(version, node_vars, refused):
    fleet = F.load("all-prepared")
    host = sorted(fleet["hosts"])[0]
    fleet["hosts"][host] = dict(fleet["hosts"][host], **dict(_containerd(version), **node_vars))
    problems = F.plan(fleet, "gpu_operator")["problems"]
    expected = {
        "off": ["gpu_operator: host %r: containerd %s has CDI off unless enable_cdi is set, and its toolkit is the host's with "
                "container_toolkit_enable_cdi false: the operator (cdi.enabled) hands GPUs over as CDI devices, which that "
                "runtime would drop (expected container_toolkit_enable_cdi: true on the node, or gpu_operator_cdi_enabled: false)"
                % (host, version)],
        "1.6": ["gpu_operator: host %r: containerd %s has no CDI in its CRI plugin (it ignores enable_cdi; 1.7 and later "
                "have it), and its toolkit is the host's: the operator (cdi.enabled) hands GPUs over as CDI devices, which "
                "that runtime would drop (expected container_toolkit_set_as_default: true on the node, so that the NVIDIA "
                "runtime reads them itself, containerd 1.7 or later, or gpu_operator_cdi_enabled: false)" % (host, version)],
    }
    assert problems == expected.get(refused, [])
    # Without CDI in the operator there is nothing to agree on.
    assert F.plan(fleet, "gpu_operator", {"gpu_operator_cdi_enabled": False})["problems"] == []


def _smi_failing_facts(device_id=None):
    """The facts of the captured H200 host whose nvidia-smi fails (tests/unit/fixtures/hosts/README.md);
    with ``device_id``, the same host with another GPU on its PCI bus (derived: only the id and name changed)."""
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import gpu_table
    from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.discovery.captures import fixture_facts
    facts = fixture_facts("ubuntu2404-h200-smi-failing")
    if device_id:
        for gpu in facts["gpus"]:
            gpu["device_id"], gpu["name"] = device_id, gpu_table.lookup(int(device_id, 16))[0]
    return facts


def test_mig_capability_comes_from_the_pci_id_where_nvidia_smi_does_not_answer():
    # An L4 (10de:27b8, AD104: no MIG) was accepted with a MIG config because nvidia-smi could not be
    # read, although discovery knew its PCI id; the H200 (10de:2335, GH100) can do MIG.
    fleet = F.load("mig")
    fleet["hosts"]["gpu-h200-mig-01"] = dict(fleet["hosts"]["gpu-h200-mig-01"], gpufleet_nvidia=_smi_failing_facts())
    fleet["hosts"]["gpu-h200-mig-02"] = dict(fleet["hosts"]["gpu-h200-mig-02"], gpufleet_nvidia=_smi_failing_facts("0x27b8"))
    planned = F.plan(fleet, "gpu_operator")
    assert planned["problems"] == [
        "gpu_operator: host 'gpu-h200-mig-02': gpufleet_mig_config: MIG config 'balanced': GPU 0 (AD104GL [L4]) cannot do MIG "
        "(its PCI device id 0x27b8 is not a MIG chip (discovery read it; nvidia-smi did not answer)) (expected a config whose "
        "profiles the node's GPUs have, or no gpufleet_mig_config)"]


def test_the_mig_chips_of_the_gpu_table():
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import gpu_table
    assert [gpu_table.mig_capable(i) for i in ("0x27b8", "0x2335", 0x20B7, 0x2901, "0x26b9", "0x9999", "zz")] == [
        False, True, True, True, False, None, None]
