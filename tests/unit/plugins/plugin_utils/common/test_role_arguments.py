"""gpufleet.nvidia.role_arguments (and gpu_facts' ``roles``): the roles' variables, checked in one task as Ansible checks them.

The functions are tested directly; tests/playbook/test_role_arguments_playbook.py runs the plugin in ansible-playbook on a local host, next to
Ansible's own ``validate_argument_spec`` given the same role's spec and the same variables: both
must find the same errors. A last test holds site.yml to its promise: every role it imports with
``rolespec_validate: false`` is one that its discovery task checks.
"""

from __future__ import annotations

import os

import pytest
import yaml

from ansible.errors import AnsibleActionFail

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.common import role_arguments as R

from ...filter import fleets as F


def _options(role):
    path = R.spec_path(role)
    assert path.endswith("/roles/%s/meta/argument_specs.yml" % role)
    return R.entry_point_options(R.load_specs(path), role, "main", path)


def test_the_collection_roles_are_found_by_name():
    names = R.role_names()
    assert set(F.SITE_ROLES + ["report", "gpu_operator", "device_plugin"]) <= set(names)
    assert R.short_name("gpufleet.nvidia.nvidia_driver") == "nvidia_driver"
    assert R.short_name("nvidia_driver") == "nvidia_driver"
    assert R.spec_path("no_such_role") is None


def test_the_specs_read_with_libyaml_are_those_ansible_reads():
    from ansible.parsing.dataloader import DataLoader

    for role in F.SITE_ROLES:
        path = R.spec_path(role)
        assert R.load_specs(path) == DataLoader().load_from_file(path)


@pytest.mark.parametrize("values, errors", [
    ({}, []),
    ({"nvidia_driver_method": "package", "nvidia_driver_version": "580"}, []),
    # A node left to the GPU Operator passes site.yml's first task (it was refused before).
    ({"nvidia_driver_method": "operator"}, []),
    ({"nvidia_driver_method": "pkg"}, ["value of nvidia_driver_method must be one of: package, preinstalled, operator, got: pkg"]),
    ({"nvidia_driver_reboot": "maybe"}, ["nvidia_driver_reboot"]),
])
def test_values_are_checked_against_one_entry_point(values, errors):
    found = R.check(_options("nvidia_driver"), values)
    assert len(found) == len(errors)
    for message, expected in zip(found, errors):
        assert expected in message


def test_a_spec_without_the_entry_point_is_refused(tmp_path):
    with pytest.raises(AnsibleActionFail, match="no argument spec for entry point 'upgrade'"):
        R.entry_point_options({"argument_specs": {"main": {"options": {}}}}, "r", "upgrade", "x.yml")
    with pytest.raises(AnsibleActionFail, match="no argument spec"):
        R.entry_point_options(None, "r", "main", "x.yml")
    bad = tmp_path / "argument_specs.yml"
    bad.write_text("argument_specs: [\n")
    with pytest.raises(AnsibleActionFail, match="cannot read"):
        R.load_specs(str(bad))


def test_a_role_that_is_not_there_or_has_no_spec_is_refused(monkeypatch):
    assert R.role_options("nvidia_driver", "main") == _options("nvidia_driver")
    with pytest.raises(AnsibleActionFail, match=r"^roles: 'nvidia_drivers' is not a role of gpufleet.nvidia \(expected one of: .*nvidia_driver"):
        R.role_options("nvidia_drivers", "main")
    monkeypatch.setattr(R, "spec_path", lambda role: None)
    with pytest.raises(AnsibleActionFail, match="^roles: gpufleet.nvidia.nvidia_driver has no meta/argument_specs.yml to check"):
        R.role_options("nvidia_driver", "main")


def test_the_message_names_every_error_with_its_role_in_the_roles_order():
    errors = {"validate": ["b"], "nvidia_driver": ["a1", "a2"]}
    assert R.summary(["nvidia_driver", "discover", "validate"], errors).splitlines() == [
        "The roles' variables are not valid:",
        "gpufleet.nvidia.nvidia_driver: a1", "gpufleet.nvidia.nvidia_driver: a2", "gpufleet.nvidia.validate: b"]
    assert R.summary(["discover", "validate"], {}) == "The variables of gpufleet.nvidia.discover, gpufleet.nvidia.validate are valid"


def _imports(tasks):
    for task in tasks or []:
        if "ansible.builtin.import_role" in task:
            yield task["ansible.builtin.import_role"]
        for key in ("block", "rescue", "always"):
            yield from _imports(task.get(key))


def test_site_checks_every_role_whose_own_check_it_turns_off():
    with open(os.path.join(F.ROOT, "playbooks", "site.yml")) as handle:
        plays = yaml.safe_load(handle)
    tasks = plays[0]["tasks"]
    # the check rides in discovery, in the block that discovers the node (its rescue keeps where a node stopped)
    index = next(i for i, t in enumerate(tasks) if "discover_check_roles" in ((t.get("block") or [{}])[0].get("vars") or {}))
    first = tasks[index]["block"][0]
    assert first["ansible.builtin.import_role"]["name"] == "gpufleet.nvidia.discover"
    # Before it, only what runs once on the control host (the report marked in progress).
    assert all(t.get("run_once") for t in tasks[:index]) and "always" in plays[0]["tags"]
    # and the role's discovery task checks them before it reads the node
    with open(os.path.join(F.ROOT, "roles", "discover", "tasks", "main.yml")) as handle:
        gather = next(t for t in yaml.safe_load(handle) if "gpufleet.nvidia.gpu_facts" in t)
    assert gather["gpufleet.nvidia.gpu_facts"]["roles"].startswith("{{ discover_check_roles ")
    checked = {R.short_name(name) for name in first["vars"]["discover_check_roles"]}
    assert sorted(checked) == sorted(F.SITE_ROLES)
    # every other role whose own check is off is checked, once, by a role_arguments task of its play, before it
    for play in plays:
        unchecked = [R.short_name(imp["name"]) for imp in _imports(play.get("tasks")) if imp.get("rolespec_validate") is False]
        once = [R.short_name(name) for task in play.get("tasks") or [] if task.get("run_once")
                for name in (task.get("gpufleet.nvidia.role_arguments") or {}).get("roles", [])]
        assert set(unchecked) <= checked | set(once), (play["name"], unchecked)
        if once:
            assert unchecked == ["report"] and once == ["report"] and play["name"] == "Write the fleet report"
    for play in plays:  # no play runs one of them through `roles:`, where Ansible would check it again
        assert not {R.short_name(r["role"]) for r in play.get("roles") or []} & checked
