"""Offline checks of what the roles would apply: Kubernetes objects against Kubernetes' published
schemas (kubernetes-validate, strict), Helm values against the option names of the reference and
the device plugin chart's own values schema, device plugin configs against the reference format."""

from __future__ import annotations

import json
import os

import jsonschema
import kubernetes_validate
import yaml

from . import fleets as F

# gpu-operator chart values the roles set that the reference does not list, each read by the
# chart (templates/clusterpolicy.yaml and the operator Deployment: `.Values.<component>.repository`
# and `.imagePullSecrets` for every operand, `.Values.migManager.enabled`, `.Values.operator.upgradeCRD` (its
# pre-upgrade CRD hook); the node-feature-discovery subchart's own `image.repository`).
GPU_OPERATOR_EXTRA_OPTIONS = (
    {"migManager.enabled", "node-feature-discovery.image.repository", "driver.manager.repository", "operator.upgradeCRD"}
    | set(
        "%s.%s" % (component, key)
        for component in (
            "operator", "validator", "driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter",
            "gfd", "migManager", "nodeStatusExporter", "gds", "gdrcopy",
        )
        for key in ("repository", "imagePullSecrets")
    )
)
# Maps whose keys are names the user chooses, not chart options.
GPU_OPERATOR_NAME_MAPS = ("devicePlugin.config.data",)
DEVICE_PLUGIN_NAME_MAPS = ("config.map",)
# nvidia-device-plugin values outside its schema: the `nfd` dependency's own image.repository, and
# nfd.enabled, the first path of the dependency's condition (Chart.yaml: nfd.enabled,gfd.enabled).
DEVICE_PLUGIN_EXTRA_OPTIONS = {"nfd.image.repository", "nfd.enabled"}


def k8s_object(obj):
    """Validate one object against every version of K8S_VERSIONS; raise on the first error."""
    for version in F.K8S_VERSIONS:
        kubernetes_validate.validate(obj, version, strict=True)


def _option_paths(values, name_maps):
    for path in F.leaf_paths(values):
        for prefix in name_maps:
            if path.startswith(prefix + "."):
                path = prefix
        yield path


def gpu_operator_values(values):
    """Every value path the role sets is a gpu-operator option the reference (or, for the few
    listed above, the chart) names. Returns the unknown paths."""
    options = F.reference_operator_options() | GPU_OPERATOR_EXTRA_OPTIONS
    wildcard = tuple(o[:-1] for o in options if o.endswith(".*"))
    unknown = []
    for path in sorted(set(_option_paths(values, GPU_OPERATOR_NAME_MAPS))):
        if path not in options and not path.startswith(wildcard):
            unknown.append(path)
    for entry in values.get("toolkit", {}).get("env", []):
        assert sorted(entry) == ["name", "value"] and all(isinstance(v, str) for v in entry.values()), entry
    return unknown


def _schema():
    with open(os.path.join(F.CHARTS_DIR, "nvidia-device-plugin", "values.schema.json")) as f:
        return json.load(f)


def device_plugin_values(values):
    """The values pass the chart's own schema, and every path the role sets is a property the
    schema names. Returns the unknown paths."""
    schema = _schema()
    jsonschema.validate(values, schema)
    unknown = []
    for path in sorted(set(_option_paths(values, DEVICE_PLUGIN_NAME_MAPS))):
        node = schema
        for part in path.split("."):
            node = (node.get("properties") or {}).get(part) if isinstance(node, dict) else None
            if node is None:
                break
        if node is None and path not in DEVICE_PLUGIN_EXTRA_OPTIONS:
            unknown.append(path)
    return unknown


def plugin_config(text):
    """One device plugin config: the reference's keys only, and what the reference says of
    them. Returns the parsed config."""
    doc = yaml.safe_load(text)
    allowed = F.reference_plugin_config_paths()
    unknown = [p for p in F.leaf_paths(doc) if p not in allowed]
    assert not unknown, "options the reference does not name: %s" % unknown
    assert doc["version"] == "v1"
    assert doc["flags"]["migStrategy"] in ("none", "single", "mixed")
    sharing = doc.get("sharing") or {}
    assert len(sharing) <= 1, "timeSlicing and mps exclude each other: %s" % sharing
    for kind, body in sharing.items():
        assert kind in ("timeSlicing", "mps")
        if kind == "mps":
            assert doc["flags"]["migStrategy"] == "none", "MPS does not combine with MIG"
        for resource in body["resources"]:
            assert sorted(resource) == ["name", "replicas"]
            assert isinstance(resource["replicas"], int) and resource["replicas"] >= 2
    return doc
