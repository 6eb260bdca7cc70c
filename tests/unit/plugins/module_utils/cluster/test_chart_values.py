"""The values the cluster roles build, against what each supported chart release declares.

For every GPU Operator release the role supports (v25.10.0, v26.3.3, v26.7.0) and the device
plugin chart v0.20.0, the published chart files beside the checkout
(``../shared/reference/charts/<chart>-<version>/``: values.yaml, Chart.yaml, crds/) are read as
``helm show values`` / ``show chart`` / ``show crds`` would answer them, and the values of every
example fleet are checked: each name is one the release declares (cluster/chart_values.py, the
check the helm_release module makes before anything is applied), and the ClusterPolicy the
values become validates against the release's own CRD schema with jsonschema. Skipped, visibly,
where the reference is not beside the checkout. The tests of chart_values itself below those run
everywhere, on small hand-made charts.
"""

from __future__ import annotations

import glob
import os

import jsonschema
import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.module_utils.cluster import chart_values as CV
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import deep_merge
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import fleets as F

OPERATOR_RELEASES = ("v25.10.0", "v26.3.3", "v26.7.0")
# Kubernetes 1.33-1.36 is the platform range of GPU Operator 26.7 (its platform support page);
# the rendered objects are validated against those schemas in test_fleets.py.


def _chart(folder):
    path = os.path.join(F.REFERENCE_CHARTS, folder)
    if not os.path.isdir(path):
        pytest.skip("../shared/reference/charts/%s is not beside this checkout" % folder)
    with open(os.path.join(path, "values.yaml")) as f:
        defaults = yaml.safe_load(f)
    with open(os.path.join(path, "Chart.yaml")) as f:
        meta = yaml.safe_load(f)
    crds = []
    for name in sorted(glob.glob(os.path.join(path, "crds", "*.yaml"))):
        with open(name) as f:
            crds.extend(d for d in yaml.safe_load_all(f) if d)
    subcharts = [d.get("alias") or d["name"] for d in meta.get("dependencies") or []]
    return defaults, crds, subcharts


def _operator_plans(release):
    for name in F.fleet_names():
        planned = F.plan(F.load(name), "gpu_operator", {"gpu_operator_chart_version": release})
        assert planned["problems"] == [], (name, planned["problems"])
        yield name, planned


@pytest.mark.parametrize("release", OPERATOR_RELEASES)
def test_operator_values_of_every_fleet_are_names_the_release_declares(release):
    defaults, crds, subcharts = _chart("gpu-operator-%s" % release)
    schema = CV.crd_spec_schema(crds, "clusterpolicies.nvidia.com")
    assert schema and "driver" in schema["properties"]
    for name, planned in _operator_plans(release):
        assert CV.problems(planned["chart_values"], defaults, schema, subcharts) == [], name


def _cluster_policy_spec(defaults, values, spec_schema):
    """What templates/clusterpolicy.yaml makes of the chart's defaults with the role's values
    merged over them: each component under its own name in the spec, and of the operator's
    values those the spec has (the rest configure the operator's own Deployment). Commented-out
    defaults are absent, as in the chart's rendering."""
    merged = deep_merge(defaults, values)
    spec = dict((k, v) for k, v in merged.items() if k in spec_schema["properties"] and k != "operator")
    operator = spec_schema["properties"]["operator"]["properties"]
    spec["operator"] = dict((k, v) for k, v in merged.get("operator", {}).items() if k in operator)
    return spec


@pytest.mark.parametrize("release", OPERATOR_RELEASES)
def test_the_cluster_policy_of_every_fleet_validates_against_the_release_crd(release):
    """Every component of the spec against its schema in the release's CRD (types, enums, the
    component's own required fields). The spec's top-level required list is left to the chart's
    template, which renders some fields itself (v25.10.0's CRD requires operator.defaultRuntime,
    a value its chart no longer takes from the values)."""
    defaults, crds, dummy_subcharts = _chart("gpu-operator-%s" % release)
    crd = next(c for c in crds if c["metadata"]["name"] == "clusterpolicies.nvidia.com")
    spec_schema = next(v for v in crd["spec"]["versions"] if v.get("storage"))["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for name, planned in _operator_plans(release):
        spec = _cluster_policy_spec(defaults, planned["chart_values"], spec_schema)
        assert {"driver", "toolkit", "devicePlugin", "cdi", "mig", "migManager"} <= set(spec), name
        for component, value in sorted(spec.items()):
            schema = dict(spec_schema["properties"][component])
            if component == "operator":
                schema.pop("required", None)
            jsonschema.validate(value, schema)


def test_the_crd_check_fails_on_a_wrong_value():
    defaults, crds, dummy_subcharts = _chart("gpu-operator-v26.7.0")
    crd = next(c for c in crds if c["metadata"]["name"] == "clusterpolicies.nvidia.com")
    spec_schema = next(v for v in crd["spec"]["versions"] if v.get("storage"))["schema"]["openAPIV3Schema"]["properties"]["spec"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"strategy": "dual"}, spec_schema["properties"]["mig"])


@pytest.mark.parametrize("release, path", [
    ("v25.10.0", "cdi.nriPluginEnabled"),  # first read by 26.3
    ("v26.3.3", "gpuCluster"),  # first read by 26.7
    ("v26.7.0", "driver.precompiledImage"),  # no such value in any release
])
def test_a_value_the_release_does_not_know_is_named(release, path):
    defaults, crds, subcharts = _chart("gpu-operator-%s" % release)
    values = F.plan(F.load("all-prepared"), "gpu_operator", {"gpu_operator_chart_version": release})["chart_values"]
    node = values
    keys = path.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = True
    found = CV.problems(values, defaults, CV.crd_spec_schema(crds, "clusterpolicies.nvidia.com"), subcharts)
    assert found == [(path, "unknown")]
    assert "values the chart does not know: %s" % path in CV.describe(found, "gpu-operator " + release)


def test_a_value_the_release_crd_refuses_is_named_with_the_type_and_enum():
    defaults, crds, subcharts = _chart("gpu-operator-v26.7.0")
    values = {"mig": {"strategy": "dual"}, "driver": {"version": 580}, "cdi": {"enabled": "yes"}}
    found = CV.problems(values, defaults, CV.crd_spec_schema(crds, "clusterpolicies.nvidia.com"), subcharts)
    assert found == [
        ("cdi.enabled", "is 'yes', expected a boolean"),
        ("driver.version", "is 580, expected a string"),
        ("mig.strategy", "is 'dual', expected one of 'none', 'single', 'mixed'"),
    ]


def test_device_plugin_values_of_every_fleet_are_names_the_chart_declares():
    defaults, dummy_crds, subcharts = _chart("nvidia-device-plugin-v0.20.0")
    checked = 0
    for name in F.fleet_names():
        planned = F.plan(F.load(name), "device_plugin")
        if planned["problems"]:
            continue  # a fleet the standalone plugin refuses (operator-managed nodes)
        assert CV.problems(planned["chart_values"], defaults, None, subcharts) == [], name
        checked += 1
    assert checked >= 4


# --- chart_values on hand-made charts -------------------------------------------------------------
SCHEMA = {"type": "object", "properties": {
    "driver": {"type": "object", "properties": {"version": {"type": "string"}, "enabled": {"type": "boolean"},
                                                "maxParallel": {"x-kubernetes-int-or-string": True}}},
    "env": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
}}


@pytest.mark.parametrize("values, expected", [
    ({"driver": {"enabled": True}}, []),
    ({"driver": {"version": "580.95.05"}}, []),  # in the schema only (commented out in the defaults)
    ({"driver": {"maxParallel": "25%"}}, []),
    ({"driver": {"maxParallel": 2}}, []),
    ({"driver": {"maxParallel": True}}, [("driver.maxParallel", "is True, expected an integer or a string")]),
    ({"driver": {"enabled": 1}}, [("driver.enabled", "is 1, expected a boolean")]),
    ({"driver": {"bogus": 1}}, [("driver.bogus", "unknown")]),
    ({"nope": {}}, [("nope", "unknown")]),
    ({"resources": {"limits": {"cpu": "1"}}}, []),  # an empty map in the defaults takes any name
    ({"labels": {"a": "b"}}, []),  # an open object in the schema
    ({"env": [{"name": "A", "value": "1"}]}, []),
    ({"env": [{"name": "A", "value": 1}]}, [("env[0].value", "is 1, expected a string")]),
    ({"nfd": {"anything": {"at": "all"}}}, []),  # a subchart's values are its own
])
def test_problems_on_a_small_chart(values, expected):
    defaults = {"driver": {"enabled": False}, "resources": {}, "env": []}
    assert CV.problems(values, defaults, SCHEMA, ["nfd"]) == expected


def test_the_spec_schema_is_the_storage_version_of_the_named_crd():
    crd = {"kind": "CustomResourceDefinition", "metadata": {"name": "things.example.com"}, "spec": {"versions": [
        {"name": "v1alpha1", "storage": False, "schema": {"openAPIV3Schema": {"properties": {"spec": {"title": "old"}}}}},
        {"name": "v1", "storage": True, "schema": {"openAPIV3Schema": {"properties": {"spec": {"title": "new"}}}}},
    ]}}
    assert CV.crd_spec_schema([{"kind": "Other"}, crd], "things.example.com") == {"title": "new"}
    assert CV.crd_spec_schema([crd], "others.example.com") is None
