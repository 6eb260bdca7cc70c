"""The discover role on several local hosts at once, each reading its own captured host tree:
each node's facts are its own (a variable read once for the play and templated from the first
host's variables once gave every node the first node's GPUs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import yaml

from ansible_collections.gpufleet.nvidia.tests.unit import hostfs
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import fleets as F

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
NODES = {  # host -> (capture, its driver version, its GPU count)
    "node-h200": ("ubuntu2404-h200-preinstalled", "580.159.04", 1),
    "node-h200x2": ("ubuntu2404-h200x2-preinstalled", "580.159.04", 2),
    "node-l40s": ("debian12-l40s-x2-package", "550.163.01", 2),
    "node-nogpu": ("debian12-nogpu", None, 0),
}


def test_every_node_gets_its_own_facts(tmp_path):
    hosts = {}
    for name, (capture, dummy_version, dummy_count) in NODES.items():
        root = str(tmp_path / name)
        shutil.copytree(hostfs.materialize(os.path.join(F.FIXTURES, "hosts", capture, "root")), root, symlinks=True)
        hosts[name] = {"discover_host_root": root, "validate_host_root": root, "nvidia_driver_method": "preinstalled"}
    inventory = {"all": {"hosts": hosts, "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                                  "gpufleet_become": False, "discover_preflight": False}}}
    out = str(tmp_path / "facts.json")
    play = [{"name": "Discover", "hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Discover", "ansible.builtin.include_role": {"name": "gpufleet.nvidia.discover"}},
        {"name": "Keep the facts", "run_once": True, "delegate_to": "localhost", "ansible.builtin.copy": {
            "dest": out, "mode": "0644",
            "content": "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all"
                       " | map('extract', hostvars, ['ansible_facts', 'gpufleet_nvidia']))) | to_json }}"}},
    ]}]
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=F.COLLECTIONS, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_HOME=str(tmp_path / "ansible-home"), ANSIBLE_LOCALHOST_WARNING="0")
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout.decode()
    with open(out) as handle:
        facts = json.load(handle)
    got = dict((name, (facts[name]["driver"].get("version"), facts[name]["gpu_count"])) for name in NODES)
    assert got == dict((name, (version, count)) for name, (dummy, version, count) in NODES.items())
