"""cluster.monitoring: the DCGM exporter release of the device-plugin path, and the settings that stop it."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import monitoring as M

BASE = {
    "enabled": True,
    "chart_version": "4.8.2",
    "chart_repo_url": "https://nvidia.github.io/dcgm-exporter/helm-charts",
    "chart_path": "",
    "release_name": "dcgm-exporter",
    "dra": False,
    "service_monitor": False,
    "image_repository": "",
    "values_overrides": {},
    "namespace": "nvidia-device-plugin",
    "namespace_pod_security": "privileged",
    "runtime_class_name": "nvidia",
    "image_registry": "",
    "image_pull_secrets": [],
    "registry_server": "",
    "registry_username": "",
    "registry_password_set": False,
    "registry_secret_name": "gpufleet-registry",
}


def planned(**changes):
    settings = dict(BASE)
    settings.update(changes)
    return M.dcgm_exporter_plan(settings)


def test_every_gpu_node_with_the_plugins_runtime_class():
    plan = planned()
    assert plan["problems"] == []
    assert plan["chart"] == {"ref": "dcgm-exporter", "repo_url": BASE["chart_repo_url"], "version": "4.8.2", "check_values": True}
    assert plan["chart_values"] == {
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "kubernetesDRA": {"enabled": False},
        "serviceMonitor": {"enabled": False},
        "runtimeClassName": "nvidia",
    }
    assert plan["objects"] == [{"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "nvidia-device-plugin", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}]
    assert plan["node_labels"] == [] and plan["held"] == []


@pytest.mark.parametrize("value, enabled", [(True, True), ("true", True), (False, False), ("no", False)])
def test_dra_mode_is_the_charts_kubernetes_dra(value, enabled):
    assert planned(dra=value)["chart_values"]["kubernetesDRA"] == {"enabled": enabled}


def test_default_runtime_and_a_chart_on_the_control_host():
    plan = planned(runtime_class_name="", chart_path="/srv/charts/dcgm-exporter-4.8.2.tgz")
    assert "runtimeClassName" not in plan["chart_values"]
    assert plan["chart"] == {"ref": "/srv/charts/dcgm-exporter-4.8.2.tgz", "check_values": True}


def test_mirror_and_pull_secrets_are_the_plugins():
    plan = planned(image_registry="registry.example.internal:5000/nvidia", image_pull_secrets=["site-pull"],
                   registry_server="registry.example.internal:5000", registry_username="robot", registry_password_set=True)
    values = plan["chart_values"]
    assert values["image"] == {"repository": "registry.example.internal:5000/nvidia/dcgm-exporter"}
    assert values["imagePullSecrets"] == [{"name": "site-pull"}, {"name": "gpufleet-registry"}]
    exact = planned(image_registry="registry.example.internal:5000/nvidia", image_repository="mirror.example/nv/exporter")
    assert exact["chart_values"]["image"] == {"repository": "mirror.example/nv/exporter"}


def test_overrides_merge_over_the_values():
    plan = planned(values_overrides={"resources": {"limits": {"memory": "1Gi"}}, "serviceMonitor": {"interval": "30s"}})
    assert plan["chart_values"]["resources"] == {"limits": {"memory": "1Gi"}}
    assert plan["chart_values"]["serviceMonitor"] == {"enabled": False, "interval": "30s"}


INVALID = [
    ({"dra": "maybe"}, "device_plugin_dcgm_exporter_dra: 'maybe' is not a boolean"),
    ({"enabled": "perhaps"}, "device_plugin_dcgm_exporter_enabled: 'perhaps' is not a boolean"),
    ({"chart_version": "latest"}, "device_plugin_dcgm_exporter_chart_version: 'latest' is not a chart version (expected e.g. 4.8.2)"),
    ({"chart_repo_url": "ftp://x"}, "device_plugin_dcgm_exporter_chart_repo_url: 'ftp://x' is not a chart repository URL"),
    ({"values_overrides": {"kubernetesDRA": {"enabled": True}}},
     "device_plugin_dcgm_exporter_values_overrides.kubernetesDRA.enabled: the role sets this value"),
    ({"values_overrides": {"nodeSelector": {"a": "b"}}}, "device_plugin_dcgm_exporter_values_overrides.nodeSelector: the role sets"),
    ({"release_name": "Bad_Name"}, "device_plugin_dcgm_exporter_release_name"),
]


@pytest.mark.parametrize("changes, message", INVALID)
def test_settings_that_cannot_work_stop_the_plan(changes, message):
    plan = planned(**changes)
    assert any(p.startswith(message) for p in plan["problems"]), plan["problems"]
    assert plan["chart_values"] is None
