"""site.yml run by ansible-playbook against a fake cluster: the project a test writes, the run, its
report, and where things fell on the fake's timeline (shared by the cluster layer's playbook tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import fleets as F

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
SITE = os.path.join(F.ROOT, "playbooks", "site.yml")


def project(tmp, fake, hosts, extra=None):
    os.makedirs(tmp, exist_ok=True)
    bindir = os.path.join(tmp, "bin")
    os.makedirs(bindir, exist_ok=True)
    cluster_vars = {
        "gpufleet_cluster_layer": "gpu_operator",
        "gpu_operator_kubeconfig": fake.kubeconfig(os.path.join(tmp, "kubeconfig")),
        "gpu_operator_helm_binary": fake.helm_binary(bindir),
        "gpu_operator_chart_repo_url": "http://127.0.0.1:1/charts",
        "gpu_operator_wait_timeout": "1m",
        "report_dir": os.path.join(tmp, "report"),
        "ansible_python_interpreter": sys.executable,
    }
    cluster_vars.update(extra or {})
    inventory = {"all": {"vars": cluster_vars, "children": {"gpu_nodes": {"hosts": hosts}}}}
    with open(os.path.join(tmp, "inventory.yml"), "w") as f:
        yaml.safe_dump(inventory, f)


def run(tmp, *args):
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": F.COLLECTIONS, "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_HOME": os.path.join(tmp, "ansible-home"),
        "HOME": tmp, "ANSIBLE_HOST_KEY_CHECKING": "0",
    })
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", os.path.join(tmp, "inventory.yml"), SITE] + list(args), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False, timeout=300)
    return proc.returncode, proc.stdout


def report(tmp):
    with open(os.path.join(tmp, "report", "gpufleet-report.json")) as f:
        return json.load(f)


def helm_calls(fake, start=0):
    return [e[1] for e in fake.timeline[start:] if e[0] == "helm"]


def index(fake, kind, verb_or_method, start=0, last=False):
    found = [i for i, e in enumerate(fake.timeline) if i >= start and e[0] == kind and e[1] == verb_or_method]
    assert found, fake.timeline[start:]
    return found[-1] if last else found[0]
