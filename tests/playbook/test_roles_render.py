"""The roles themselves, run by ansible-playbook in plan-and-render mode (no cluster): a fleet
renders the same values, objects and labels as the filters, a second run changes nothing, and a
setting that cannot work stops the role with the filters' message.

Every example fleet goes through the roles' own planning expression in test_fleets.py (Ansible's
templar, in process); here a few of them go through ansible-playbook end to end, which costs
seconds per fleet."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.filter.gpu_node_label_patches import gpu_node_label_patches

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import fleets as F
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import validate

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
# The operator path mixed and on k3s, the standalone path with time-slicing.
CASES = [("mixed", "gpu_operator"), ("k3s", "gpu_operator"), ("time-sliced", "device_plugin")]


def _group(name):
    return "fleet_" + re.sub(r"[^a-z0-9]", "_", name)


def _write_project(tmp, cases, extra_vars=None):
    """One inventory with a group per fleet (hosts named <fleet>--<host>, their node name kept),
    and one play per fleet and role."""
    groups = {}
    for name in sorted(set(case[0] for case in cases)):
        fleet = F.load(name)
        hosts = {}
        for host, hv in fleet["hosts"].items():
            hv = dict(hv or {})
            hv.setdefault("gpufleet_node_name", host)
            hosts["%s--%s" % (name, host)] = hv
        groups[_group(name)] = {"hosts": hosts, "vars": dict(fleet.get("vars") or {}, **(extra_vars or {}))}
    inventory = {"all": {"children": groups, "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}
    plays = []
    for name, role in cases:
        plays.append({
            "name": "%s with %s" % (name, role),
            "hosts": _group(name),
            "gather_facts": False,
            "roles": [{
                "role": "gpufleet.nvidia." + role,
                "vars": {
                    role + "_node_group": _group(name),
                    role + "_apply": False,
                    role + "_render_dir": os.path.join(str(tmp), "render", name, role),
                },
            }],
        })
    with open(os.path.join(str(tmp), "inventory.yml"), "w") as f:
        yaml.safe_dump(inventory, f)
    with open(os.path.join(str(tmp), "playbook.yml"), "w") as f:
        yaml.safe_dump(plays, f, sort_keys=False)


def _run(tmp):
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": F.COLLECTIONS,
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
        "ANSIBLE_DISPLAY_OK_HOSTS": "1",
        "ANSIBLE_HOME": os.path.join(str(tmp), "ansible-home"),
        "ANSIBLE_PIPELINING": "1",
    })
    return subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", "inventory.yml", "playbook.yml"],
        cwd=str(tmp), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=600, check=False,
    )


def _recap(output):
    return dict((m.group(1), dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))))
                for m in re.finditer(r"^(\S+)\s+:\s+(ok=.*)$", output, re.M))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("roles")
    _write_project(tmp, CASES)
    first = _run(tmp)
    assert first.returncode == 0, first.stdout[-6000:]
    second = _run(tmp)
    assert second.returncode == 0, second.stdout[-6000:]
    return tmp, first.stdout, second.stdout


def _load(tmp, name, role, what):
    with open(os.path.join(str(tmp), "render", name, role, what)) as f:
        return yaml.safe_load(f)


@pytest.mark.parametrize("name,role", CASES, ids=["%s-%s" % c for c in CASES])
def test_the_role_renders_what_the_filters_plan(rendered, name, role):
    tmp = rendered[0]
    planned = F.direct(F.load(name), role)
    assert _load(tmp, name, role, "values.yaml") == planned["chart_values"]
    objects = _load(tmp, name, role, "objects.yaml")
    assert objects["kind"] == "List" and objects["items"] == planned["objects"]
    labels = _load(tmp, name, role, "node-labels.yaml")
    assert labels["items"] == gpu_node_label_patches(planned["node_labels"], None, role)["patches"]
    for obj in objects["items"] + labels["items"]:
        validate.k8s_object(obj)
    if role == "gpu_operator":
        assert validate.gpu_operator_values(_load(tmp, name, role, "values.yaml")) == []
    else:
        assert validate.device_plugin_values(_load(tmp, name, role, "values.yaml")) == []


def test_a_second_run_changes_nothing(rendered):
    first, second = _recap(rendered[1]), _recap(rendered[2])
    assert sum(r["changed"] for r in first.values()) > 0
    assert dict((h, r["changed"]) for h, r in second.items()) == dict((h, 0) for h in second), rendered[2][-4000:]


def test_a_setting_that_cannot_work_stops_the_role_before_anything(tmp_path):
    _write_project(tmp_path, [("mps", "gpu_operator")], extra_vars={"gpufleet_mig_strategy": "mixed"})
    result = _run(tmp_path)
    assert result.returncode != 0
    expected = F.plan(F.load("mps"), "gpu_operator", {"gpufleet_mig_strategy": "mixed"})["problems"]
    assert expected and all(message in result.stdout for message in expected), result.stdout[-4000:]
    assert "Stop before anything is applied" in result.stdout
    assert not os.path.exists(os.path.join(str(tmp_path), "render"))
