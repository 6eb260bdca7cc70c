"""Every example fleet, planned through the roles' own expressions, validated offline."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.filter.gpu_node_label_patches import gpu_node_label_patches
from ansible_collections.gpufleet.nvidia.plugins.filter.image_pull_secret import image_pull_secret

from . import fleets as F
from . import validate

CASES = F.cases()
IDS = ["%s-%s" % case for case in CASES]
SECRET_CASES = [case for case in CASES if "gpufleet_registry_password" in (F.load(case[0]).get("vars") or {})]


def test_every_fleet_and_role_is_covered():
    roles = dict((role, [name for name, r in CASES if r == role]) for role in F.ROLES)
    assert len(roles["gpu_operator"]) >= 6 and len(roles["device_plugin"]) >= 3, roles


@pytest.mark.parametrize("name,role", CASES, ids=IDS)
def test_role_expression_and_filters_agree(name, role):
    fleet = F.load(name)
    planned = F.plan(fleet, role)
    assert planned == F.direct(fleet, role)
    assert planned["problems"] == []


@pytest.mark.parametrize("name,role", CASES, ids=IDS)
def test_objects_are_valid_kubernetes(name, role):
    planned = F.plan(F.load(name), role)
    for obj in planned["objects"]:
        validate.k8s_object(obj)
    patches = gpu_node_label_patches(planned["node_labels"], None, role)
    assert patches["problems"] == []
    for patch in patches["patches"]:
        validate.k8s_object(patch)


@pytest.mark.parametrize("name,role", SECRET_CASES, ids=["%s-%s" % case for case in SECRET_CASES])
def test_pull_secret_is_valid_kubernetes(name, role):
    fleet = F.load(name)
    settings = F.settings(fleet, role)
    assert settings["registry_password_set"] is True
    credentials = dict((k, fleet["vars"]["gpufleet_registry_" + k]) for k in ("server", "username", "password"))
    validate.k8s_object(image_pull_secret(credentials, settings["registry_secret_name"], settings["namespace"]))


@pytest.mark.parametrize("name,role", CASES, ids=IDS)
def test_values_use_only_known_chart_options(name, role):
    values = F.plan(F.load(name), role)["chart_values"]
    if role == "gpu_operator":
        assert validate.gpu_operator_values(values) == []
        configs = values["devicePlugin"]["config"]["data"]
    else:
        assert validate.device_plugin_values(values) == []
        configs = values["config"]["map"]
    assert configs, "every plan carries at least the default config"
    for text in configs.values():
        validate.plugin_config(text)


@pytest.mark.parametrize("name,role", CASES, ids=IDS)
def test_plans_are_deterministic(name, role):
    fleet = F.load(name)
    first = json.dumps(F.plan(fleet, role), sort_keys=True)
    fleet["hosts"] = dict(reversed(list(fleet["hosts"].items())))
    assert json.dumps(F.plan(fleet, role), sort_keys=True) == first
    assert json.dumps(F.direct(fleet, role), sort_keys=True) == first


def test_reference_copy_matches_the_reference():
    if not os.path.exists(F.REFERENCE):
        pytest.skip("shared/reference/nvidia-stack-facts.md is not beside this checkout")
    with open(F.REFERENCE) as f:
        reference = f.read()
    with open(F.REFERENCE_COPY) as f:
        copy = f.read()
    body = copy[copy.index("## Device plugin config"):]
    for section in body.split("\n## "):
        section = section if section.startswith("## ") else "## " + section
        assert section.strip() in reference, section[:80]
