"""The role_arguments action plugin in ansible-playbook on a local host, next to Ansible's own
validate_argument_spec: both must name the same wrong values (its functions are tested in
tests/unit/plugins/plugin_utils/common/test_role_arguments.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.common import role_arguments as R
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import fleets as F

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def _playbook(tmp, host_vars, tasks):
    inventory = {"all": {"hosts": {"node-a": host_vars},
                         "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}
    with open(os.path.join(tmp, "inventory.yml"), "w") as handle:
        yaml.safe_dump(inventory, handle)
    with open(os.path.join(tmp, "playbook.yml"), "w") as handle:
        yaml.safe_dump([{"name": "Check", "hosts": "all", "gather_facts": False, "tasks": tasks}], handle, sort_keys=False)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=F.COLLECTIONS, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_HOME=os.path.join(tmp, "ansible-home"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", os.path.join(tmp, "inventory.yml"), os.path.join(tmp, "playbook.yml")],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False, timeout=300)
    return proc.returncode, proc.stdout.decode()


BAD = {
    "nvidia_driver_method": "pkg",
    "container_toolkit_hold": "sometimes",
    "container_toolkit_runtime": "podman",
    "validate_host_cuda_timeout": "soon",
    "discover_waive": "kernel_headers",  # a string where a list is declared: converted, as Ansible does
}


def test_the_plugin_finds_what_ansibles_own_check_finds(tmp_path):
    out = str(tmp_path / "out.json")
    tasks = []
    for role in F.SITE_ROLES:
        path = R.spec_path(role)
        tasks.append({
            "name": "Ansible's own check of %s" % role,
            "ansible.builtin.validate_argument_spec": {
                "argument_spec": "{{ (lookup('ansible.builtin.file', '%s') | from_yaml).argument_specs.main.options }}" % path},
            "register": "own_%s" % role, "ignore_errors": True})
    tasks += [
        {"name": "The collection's check", "gpufleet.nvidia.role_arguments": {"roles": ["gpufleet.nvidia." + F.SITE_ROLES[0]] + F.SITE_ROLES[1:]},
         "register": "ours", "ignore_errors": True},
        {"name": "Keep both", "ansible.builtin.copy": {
            "dest": out, "mode": "0644",
            "content": "{{ {'ours': ours, 'own': {%s}} | to_json }}" % ", ".join("'%s': own_%s" % (r, r) for r in F.SITE_ROLES)}},
    ]
    rc, output = _playbook(str(tmp_path), BAD, tasks)
    assert rc == 0, output
    with open(out) as handle:
        got = json.load(handle)
    ours, own = got["ours"], got["own"]
    assert ours["failed"] is True and ours["roles"] == F.SITE_ROLES
    for role in F.SITE_ROLES:
        assert ours["argument_errors"].get(role, []) == own[role].get("argument_errors", []), role
    # every wrong value is named, once, under its own role; the list given as a string is not an error
    assert sorted(ours["argument_errors"]) == ["container_toolkit", "nvidia_driver", "validate"]
    assert len(ours["argument_errors"]["container_toolkit"]) == 2
    assert ours["msg"].splitlines()[0] == "The roles' variables are not valid:"
    assert "gpufleet.nvidia.nvidia_driver: value of nvidia_driver_method must be one of: package, preinstalled, operator, got: pkg" in ours["msg"]


def test_valid_variables_pass_and_a_bad_task_fails_with_the_reason(tmp_path):
    tasks = [
        {"name": "Valid", "gpufleet.nvidia.role_arguments": {"roles": F.SITE_ROLES}},
        {"name": "Not a role", "gpufleet.nvidia.role_arguments": {"roles": ["nvidia_drivers"]}, "register": "nope", "ignore_errors": True},
        {"name": "Its reason", "ansible.builtin.assert": {"that": [
            "nope is failed",
            "nope.msg.startswith(\"roles: 'nvidia_drivers' is not a role of gpufleet.nvidia (expected one of: \")"]}},
    ]
    rc, output = _playbook(str(tmp_path), {"nvidia_driver_version": "580", "validate_gpu_count": 8}, tasks)
    assert rc == 0, output
    assert "ok: [node-a]" in output
