"""The cluster roles' settings: declared once, in meta/argument_specs.yml (defaults/main.yml giving the same
values), and handed to the plan filters as one structure: tasks/check.yml passes every variable of the role,
by its name without the prefix, and of the registry password only whether it is set."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible.template import trust_as_template

from . import fleets as F

ROLES = ("gpu_operator", "device_plugin", "dra_driver")
EMPTY = {"vars": {}, "hosts": {}}


def declared(role):
    with open(os.path.join(F.ROOT, "roles", role, "meta", "argument_specs.yml")) as f:
        return yaml.safe_load(f)["argument_specs"]["main"]["options"]


@pytest.mark.parametrize("role", ROLES)
def test_every_variable_is_declared_with_the_value_of_its_default(role):
    defaults, options = F.role_defaults(role), declared(role)
    assert sorted(defaults) == sorted(options)
    for name, value in defaults.items():
        if not (isinstance(value, str) and "{{" in value):  # one from a fleet-wide variable: the spec says its fallback
            assert options[name].get("default") == value, name


@pytest.mark.parametrize("role", ROLES)
def test_the_filter_gets_every_variable_and_never_the_password(role):
    settings = F.settings(EMPTY, role, {role + "_registry_password": "s3cret", role + "_namespace": "elsewhere"})
    keys = set(name[len(role) + 1:] for name in declared(role)) - {"registry_password"}
    assert set(settings) == keys | {"registry_password_set"}
    assert settings["registry_password_set"] is True and settings["namespace"] == "elsewhere"
    assert "s3cret" not in json.dumps(settings)


def test_the_exporter_gets_its_own_variables_over_the_device_plugins():
    with open(os.path.join(F.ROOT, "roles", "device_plugin", "tasks", "exporter.yml")) as f:
        task = yaml.safe_load(f)[0]
    variables = F._trusted(F.role_defaults("device_plugin"))
    variables.update(F._trusted({"device_plugin_registry_password": "s3cret", "device_plugin_dcgm_exporter_release_name": "mine"}))
    variables.update(F._trusted(task["vars"]))
    settings = F._plain(F._templar(variables).template(trust_as_template("{{ __device_plugin_exporter_settings }}")))
    defaults = F.role_defaults("device_plugin")
    assert settings["chart_version"] == defaults["device_plugin_dcgm_exporter_chart_version"] != defaults["device_plugin_chart_version"]
    assert settings["release_name"] == "mine" and settings["namespace"] == defaults["device_plugin_namespace"]
    assert settings["registry_password_set"] is True and "s3cret" not in json.dumps(settings)
