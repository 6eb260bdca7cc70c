"""site.yml reads each node once when nothing changes it: discovery's validation, reused.

ansible-playbook runs the discover and validate roles on a local host whose root is the H200
capture (``discover_host_root`` / ``validate_host_root``), with the plays' own ``vars`` taken from
``playbooks/site.yml`` itself, so what is tested is the playbook's wiring: the discover role's
copy of the validate role's options (``roles/discover/vars/main.yml``) must match what the
validate role passes, or the reuse is refused and every node is read twice.

Each case compares the reused validation with the one the validate role makes when it reads the
node itself (``gpufleet_reuse_discovery: false``): they must be the same. (nvidia-smi is not found
under the capture's root, so the host checks fail: the comparison does not depend on the verdict.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit import hostfs

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import fleets as F

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
H200_ROOT = os.path.join(F.FIXTURES, "hosts", "ubuntu2404-h200-preinstalled", "root")


def _tasks(tasks):
    """The tasks, those of their blocks included (site.yml imports its roles in blocks with a rescue)."""
    for task in tasks or []:
        yield task
        yield from _tasks(task.get("block"))


def _site_play_vars():
    with open(os.path.join(F.ROOT, "playbooks", "site.yml")) as handle:
        plays = yaml.safe_load(handle)
    by_role = {}
    for play in plays:
        names = [role["role"] for role in play.get("roles") or []]
        names += [task["ansible.builtin.import_role"]["name"] for task in _tasks(play.get("tasks"))
                  if "ansible.builtin.import_role" in task]
        for name in names:
            by_role[name] = play.get("vars") or {}
    return by_role["gpufleet.nvidia.discover"], by_role["gpufleet.nvidia.validate"]


def _run(tmp, host_vars, between=None, validate_vars=None):
    os.makedirs(tmp, exist_ok=True)
    root = hostfs.materialize(H200_ROOT)
    discover_vars, validate_play_vars = _site_play_vars()
    inventory = {"all": {"hosts": {"gpu-a": dict({"discover_host_root": root, "validate_host_root": root}, **host_vars)},
                         "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                  "discover_preflight": False, "validate_cluster": False}}}
    out = os.path.join(tmp, "out.json")
    plays = [{"name": "Discover", "hosts": "all", "gather_facts": False, "vars": discover_vars,
              "roles": [{"role": "gpufleet.nvidia.discover"}]}]
    if between:
        plays.append({"name": "A host layer", "hosts": "all", "gather_facts": False,
                      "tasks": [{"name": "Register what a layer would", "ansible.builtin.set_fact": between}]})
    plays += [
        {"name": "Validate", "hosts": "all", "gather_facts": False, "vars": validate_play_vars,
         "roles": [dict({"role": "gpufleet.nvidia.validate"}, **({"vars": validate_vars} if validate_vars else {}))]},
        {"name": "Keep what happened", "hosts": "all", "gather_facts": False, "tasks": [
            {"name": "Write it", "delegate_to": "localhost", "ansible.builtin.copy": {
                "dest": out,
                "content": "{{ {'discovered': discover_result.validation | default(none),"
                           " 'validation': ansible_facts.gpufleet_nvidia_validation} | to_json }}",
                "mode": "0644"}}]},
    ]
    with open(os.path.join(tmp, "inventory.yml"), "w") as handle:
        yaml.safe_dump(inventory, handle)
    with open(os.path.join(tmp, "playbook.yml"), "w") as handle:
        yaml.safe_dump(plays, handle, sort_keys=False)
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": F.COLLECTIONS,
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_HOME": os.path.join(tmp, "ansible-home"),
        "HOME": str(tmp),
    })
    proc = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-v", "-i", os.path.join(tmp, "inventory.yml"), os.path.join(tmp, "playbook.yml")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False, timeout=300,
    )
    output = proc.stdout.decode()
    assert proc.returncode == 0, output
    with open(out) as handle:
        return json.load(handle), output


def _reused(output):
    """Whether the validate role's host check took the earlier validation, from its -v result."""
    marks = [line for line in output.splitlines() if '"reused": ' in line]
    assert len(marks) == 1, output
    return '"reused": true' in marks[0]


INVENTORIES = {
    "the role defaults, driver declared": {"nvidia_driver_version": "580", "nvidia_driver_method": "preinstalled",
                                           "container_toolkit_runtime": "none"},
    "toolkit, CDI and handler declared through the layers' variables": {
        "nvidia_driver_version": "580", "container_toolkit_version": "1.17.8", "container_toolkit_enable_cdi": True,
        "container_toolkit_runtime": "none", "container_toolkit_runtime_name": "nvidia-cdi"},
    "the validate role's own variables in the inventory": {
        "nvidia_driver_version": "580", "validate_driver_version": "580.159.04", "validate_gpu_count": 1,
        "validate_container_runtime": "none", "validate_cdi": "disabled", "validate_host_cuda": False,
        "validate_nvcc_path": "/opt/cuda/bin/nvcc", "validate_host_cuda_timeout": 30,
        "validate_cdi_spec_dirs": ["/etc/cdi"], "validate_prepared_without_gpu": True},
}


@pytest.mark.parametrize("name", sorted(INVENTORIES))
def test_a_node_no_layer_changed_is_read_once_and_judged_the_same(tmp_path, name):
    once, output = _run(str(tmp_path / "once"), INVENTORIES[name])
    assert _reused(output), "the discover role's options differ from the validate role's"
    assert once["validation"] == dict(once["discovered"], cluster_expect=once["validation"]["cluster_expect"])
    twice, output = _run(str(tmp_path / "twice"), dict(INVENTORIES[name], gpufleet_reuse_discovery=False))
    assert not _reused(output)
    assert twice["discovered"] is None and '"reuse_refused"' not in output
    assert twice["validation"] == once["validation"]


@pytest.mark.parametrize("result", ["nvidia_driver_result", "container_toolkit_result"])
def test_a_node_a_host_layer_changed_is_read_again(tmp_path, result):
    got, output = _run(str(tmp_path), INVENTORIES["the role defaults, driver declared"],
                       between={result: {"changed": True}})
    assert not _reused(output) and '"reuse_refused"' not in output  # not even offered
    assert got["discovered"] is not None
    unchanged, output = _run(str(tmp_path / "unchanged"), INVENTORIES["the role defaults, driver declared"],
                             between={result: {"changed": False}})
    assert _reused(output) and unchanged["validation"] == dict(unchanged["discovered"], cluster_expect=unchanged["validation"]["cluster_expect"])


def test_validate_options_given_to_the_role_alone_are_not_answered_by_discovery(tmp_path):
    got, output = _run(str(tmp_path), INVENTORIES["the role defaults, driver declared"],
                       validate_vars={"validate_driver_version": "575"})
    assert not _reused(output)
    assert '"reuse_refused": "the earlier validation was made with other driver_version"' in output
    assert got["discovered"]["declared"]["driver_version"] == "580"
    assert got["validation"]["declared"]["driver_version"] == "575"
