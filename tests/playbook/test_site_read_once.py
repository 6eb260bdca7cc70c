"""site.yml reads each node once when nothing changes it: discovery's validation stands.

Discovery's gpu_facts validates each node in its pass with the validate role's options, copied in
``roles/discover/vars/main.yml``, and site.yml validates again only the nodes a host layer changed.
So the copy must make the same validation as the validate role's own task: the first tests run the
discover role (with the plays' own ``vars`` from ``playbooks/site.yml``) and then the validate
role's ``node`` entry point on a local host whose root is the H200 capture, and compare the two.
The others run site.yml itself (no host layer: ``--skip-tags driver,toolkit,runtime``) and look at
which nodes its validate play reads again, and at what the validate role's fleet entry point does
with ``validate_fail_on``. (nvidia-smi is not found under the capture's root, so the host checks
fail: the comparison does not depend on the verdict.)
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
SITE = os.path.join(F.ROOT, "playbooks", "site.yml")
H200_ROOT = os.path.join(F.FIXTURES, "hosts", "ubuntu2404-h200-preinstalled", "root")
# the task of the validate role that reads the node (roles/validate/tasks/node.yml)
READ_TASK = "TASK [gpufleet.nvidia.validate : Check the node's GPUs, driver, runtime handler, CDI spec and CUDA]"


def _tasks(tasks):
    """The tasks, those of their blocks included (site.yml imports its roles in blocks with a rescue)."""
    for task in tasks or []:
        yield task
        yield from _tasks(task.get("block"))


def _discover_play_vars():
    with open(SITE) as handle:
        plays = yaml.safe_load(handle)
    for play in plays:
        if any(task.get("ansible.builtin.import_role", {}).get("name") == "gpufleet.nvidia.discover"
               for task in _tasks(play.get("tasks"))):
            return play.get("vars") or {}
    raise AssertionError("site.yml imports no discover role")


def _env(tmp):
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": F.COLLECTIONS,
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_HOME": os.path.join(tmp, "ansible-home"),
        "HOME": str(tmp),
    })
    return env


def _inventory(tmp, hosts, **group_vars):
    root = hostfs.materialize(H200_ROOT)
    inventory = {"all": {
        "vars": dict({"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                      "discover_host_root": root, "validate_host_root": root, "validate_cluster": False},
                     **group_vars),
        "children": {"gpu_nodes": {"hosts": hosts}}}}
    path = os.path.join(tmp, "inventory.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(inventory, handle)
    return path


def _compare(tmp, host_vars):
    """Discovery's validation and the validate role's own reading of the same node, as the role leaves it."""
    os.makedirs(tmp, exist_ok=True)
    out = os.path.join(tmp, "out.json")
    plays = [
        {"name": "Discover", "hosts": "all", "gather_facts": False, "vars": _discover_play_vars(),
         "roles": [{"role": "gpufleet.nvidia.discover"}]},
        {"name": "Keep discovery's validation", "hosts": "all", "gather_facts": False, "tasks": [
            {"name": "Keep it", "ansible.builtin.set_fact": {
                "discovered": "{{ discover_result.ansible_facts.gpufleet_nvidia_validation | default(none) }}"}}]},
        {"name": "Validate", "hosts": "all", "gather_facts": False, "tasks": [
            {"name": "Read the node", "ansible.builtin.import_role": {"name": "gpufleet.nvidia.validate", "tasks_from": "node"}}]},
        {"name": "Keep what happened", "hosts": "all", "gather_facts": False, "tasks": [
            {"name": "Write it", "delegate_to": "localhost", "ansible.builtin.copy": {
                "dest": out,
                "content": "{{ {'discovered': discovered, 'validation': ansible_facts.gpufleet_nvidia_validation} | to_json }}",
                "mode": "0644"}}]},
    ]
    inventory = _inventory(tmp, {"gpu-a": host_vars}, discover_preflight=False)
    with open(os.path.join(tmp, "playbook.yml"), "w") as handle:
        yaml.safe_dump(plays, handle, sort_keys=False)
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", inventory, os.path.join(tmp, "playbook.yml")], env=_env(tmp),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout
    with open(out) as handle:
        return json.load(handle)


INVENTORIES = {
    "the role defaults, driver declared": {"nvidia_driver_version": "580", "nvidia_driver_method": "preinstalled",
                                           "container_toolkit_runtime": "none"},
    "toolkit, CDI, handler and sharing declared through the layers' variables": {
        "nvidia_driver_version": "580", "container_toolkit_version": "1.17.8", "container_toolkit_enable_cdi": True,
        "container_toolkit_runtime": "none", "container_toolkit_runtime_name": "nvidia-cdi",
        "container_toolkit_isolate_unprivileged": False, "gpufleet_sharing_config": "ts-4",
        "gpufleet_sharing_configs": {"ts-4": {"strategy": "time-slicing", "replicas": 4, "rename_by_default": True}}},
    "the validate role's own variables in the inventory": {
        "nvidia_driver_version": "580", "validate_driver_version": "580.159.04", "validate_gpu_count": 1,
        "validate_container_runtime": "none", "validate_cdi": "disabled", "validate_host_cuda": False,
        "validate_nvcc_path": "/opt/cuda/bin/nvcc", "validate_host_cuda_timeout": 30,
        "validate_cdi_spec_dirs": ["/etc/cdi"], "validate_prepared_without_gpu": True,
        "validate_isolate_unprivileged": True, "validate_node_name": "node-a", "validate_sharing_replicas": 2},
}


@pytest.mark.parametrize("name", sorted(INVENTORIES))
def test_discovery_validates_the_node_as_the_validate_role_does(tmp_path, name):
    got = _compare(str(tmp_path), INVENTORIES[name])
    assert got["discovered"] is not None
    assert got["discovered"] == got["validation"]


def test_the_comparison_sees_an_option_that_differs(tmp_path):
    """The validate role given a driver that discovery was not (here, a play variable) validates otherwise."""
    got = _compare(str(tmp_path), dict(INVENTORIES["the role defaults, driver declared"],
                                       validate_driver_version="{{ '575' if discovered is defined else '580' }}"))
    assert got["discovered"]["declared"]["driver_version"] == "580"
    assert got["validation"]["declared"]["driver_version"] == "575"
    assert got["discovered"] != got["validation"]


def _site(tmp, hosts, *extra):
    os.makedirs(tmp, exist_ok=True)
    inventory = _inventory(tmp, hosts, report_dir=os.path.join(tmp, "report"), report_fail_on="never",
                           discover_preflight=False, container_toolkit_enabled=False)
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", inventory, SITE, "--skip-tags", "driver,toolkit,runtime"] + list(extra),
                          env=_env(tmp), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          check=False, timeout=300)
    with open(os.path.join(tmp, "report", "gpufleet-report.json")) as handle:
        return proc.returncode, proc.stdout, json.load(handle)


def _read_again(output):
    """The hosts the validate role's node task ran on."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(READ_TASK)]
    if not starts:
        return []
    after = lines[starts[0] + 1:]
    return sorted(line.split("[", 1)[1].split("]", 1)[0] for line in after[:after.index("")] if line.startswith("ok: ["))


NODE = {"nvidia_driver_version": "580", "nvidia_driver_method": "preinstalled"}


@pytest.mark.parametrize("layer", ["nvidia_driver_result", "container_toolkit_result"])
def test_site_reads_again_only_the_nodes_a_host_layer_changed(tmp_path, layer):
    hosts = {"gpu-a": dict(NODE, **{layer: {"changed": True}}), "gpu-b": dict(NODE, **{layer: {"changed": False}}), "gpu-c": NODE}
    rc, out, report = _site(str(tmp_path), hosts)
    assert rc == 0, out[-6000:]
    assert _read_again(out) == ["gpu-a"], out[-6000:]
    rows = dict((row["host"], row) for row in report["nodes"])
    # every node validated, the reused ones with discovery's validation: the capture has no nvidia-smi
    assert all(rows[h]["status"] == "failed" and any("nvidia-smi" in m for m in rows[h]["failed"]) for h in hosts), rows
    # each node's verdict said once, in one task run once
    assert out.count("TASK [gpufleet.nvidia.validate : Say what validation found on each node]") == 1
    assert all('"%s: failed"' % h in out for h in hosts)


def test_site_reads_every_node_again_without_discoverys_validation(tmp_path):
    rc, out, report = _site(str(tmp_path), {"gpu-a": NODE, "gpu-b": NODE}, "-e", "gpufleet_reuse_discovery=false")
    assert rc == 0, out[-6000:]
    assert _read_again(out) == ["gpu-a", "gpu-b"], out[-6000:]
    assert [row["status"] for row in report["nodes"]] == ["failed", "failed"]


def test_site_fails_the_nodes_validate_fail_on_fails_in_the_last_play(tmp_path):
    # gpu-a, the play's first host, sets its own; gpu-b takes the role's default (never); gpu-c drift
    hosts = {"gpu-a": dict(NODE, validate_fail_on="failed"), "gpu-b": NODE, "gpu-c": dict(NODE, validate_fail_on="drift")}
    rc, out, report = _site(str(tmp_path), hosts)
    assert rc != 0
    assert _read_again(out) == []
    last = out[out.index("PLAY [Fail each node where the run stopped"):out.index("PLAY RECAP")]
    assert "fatal: [gpu-a]" in last and "fatal: [gpu-c]" in last and "gpu-b" not in last, last
    assert "The run stopped on gpu-a at validation (Say what validation found on the node" in last
    assert "gpu-a: validation failed: " in last
    rows = dict((row["host"], row) for row in report["nodes"])
    assert rows["gpu-a"]["failed"][0].startswith("the run stopped at validation")
    assert not rows["gpu-b"]["failed"][0].startswith("the run stopped")
    # the stopped node keeps the validation that stopped it
    assert any("nvidia-smi" in m for m in rows["gpu-a"]["failed"][1:])


def test_the_fleet_verdict_names_a_node_without_a_validation_instead_of_failing(tmp_path):
    tmp = str(tmp_path)
    plays = [{"name": "Judge", "hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Judge the fleet", "ansible.builtin.import_role": {"name": "gpufleet.nvidia.validate", "tasks_from": "fleet"}}]}]
    inventory = _inventory(tmp, {"gpu-a": NODE})
    with open(os.path.join(tmp, "playbook.yml"), "w") as handle:
        yaml.safe_dump(plays, handle, sort_keys=False)
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", inventory, os.path.join(tmp, "playbook.yml")], env=_env(tmp),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout
    assert '"gpu-a: skipped",' in proc.stdout and '"not validated in this run"' in proc.stdout
