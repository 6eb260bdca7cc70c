"""site.yml when nodes fail: the report says which node stopped where and why, with the fix,
even when every node fails (issue 35: a run whose every node failed left the report of a run in
progress, "INCOMPLETE", 0 nodes, no reason), and a node declared in ``gpu_nodes`` on which no GPU
is found is named, not reported OK.

Local hosts read the H200 capture (``discover_host_root``); no cluster layer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from ansible_collections.gpufleet.nvidia.tests.unit import hostfs
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import fleets as F

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
SITE = os.path.join(F.ROOT, "playbooks", "site.yml")
H200_ROOT = os.path.join(F.FIXTURES, "hosts", "ubuntu2404-h200-preinstalled", "root")


def _run(tmp, hosts):
    inventory = {"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "report_dir": os.path.join(tmp, "report"), "validate_cluster": False},
        "children": {"gpu_nodes": {"hosts": hosts}}}}
    with open(os.path.join(tmp, "inventory.yml"), "w") as f:
        yaml.safe_dump(inventory, f)
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": F.COLLECTIONS, "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_HOME": os.path.join(tmp, "ansible-home"), "HOME": tmp,
    })
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", os.path.join(tmp, "inventory.yml"), SITE], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False, timeout=300)
    with open(os.path.join(tmp, "report", "gpufleet-report.json")) as f:
        return proc.returncode, proc.stdout, json.load(f)


def test_a_run_whose_every_node_fails_reports_each_node_where_and_why_with_the_fix(tmp_path):
    tmp = str(tmp_path)
    root = hostfs.materialize(H200_ROOT)
    node = {"discover_host_root": root, "validate_host_root": root, "container_toolkit_enabled": False}
    hosts = {
        # preflight blocks: the capture's driver is no package's, and package is declared
        "gpu-a": dict(node, nvidia_driver_method="package", nvidia_driver_version="580"),
        # a root login on a node without sudo: the driver layer's become fails
        "gpu-b": dict(node, nvidia_driver_method="preinstalled", discover_preflight=False, gpufleet_become=True,
                      ansible_become_exe="/nonexistent/sudo", ansible_become_user="nobody"),
        # unreachable: nothing answers on its port
        "gpu-c": dict(node, nvidia_driver_method="preinstalled", ansible_connection="ssh", ansible_host="127.0.0.1",
                      ansible_port=1, ansible_user="nobody"),
    }
    rc, out, report = _run(tmp, hosts)
    assert rc != 0
    assert report["run"].get("state") != "running" and report["status"] == "failed", out[-6000:]
    rows = dict((row["host"], row) for row in report["nodes"])
    statuses = str({h: (r["status"], r["failed"]) for h, r in rows.items()})
    assert sorted(rows) == ["gpu-a", "gpu-b", "gpu-c"] and all(r["status"] == "failed" for r in rows.values()), statuses + out[-6000:]
    assert rows["gpu-a"]["failed"][0].startswith("the run stopped at discovery and preflight: ")
    assert "[driver_not_package_owned]" in rows["gpu-a"]["failed"][0] and "(fix: " in rows["gpu-a"]["failed"][0]
    assert "discover_waive" in rows["gpu-a"]["failed"][0]
    # preflight judges the facts in discovery's one task: the node it stops keeps them in the report
    assert rows["gpu-a"]["gpus"]["count"] == 1 and rows["gpu-a"]["os"] and rows["gpu-a"]["kernel"]
    assert rows["gpu-c"]["gpus"]["count"] in (0, None) and not rows["gpu-c"]["kernel"]
    assert rows["gpu-b"]["failed"][0].startswith("the run stopped at the driver layer: ")
    assert "sudo: not found" in rows["gpu-b"]["failed"][0]
    assert "gpufleet_become: false" in rows["gpu-b"]["failed"][0]
    assert rows["gpu-c"]["failed"][0].startswith("the run stopped at discovery and preflight: Connect to the node / ")
    assert "-m ansible.builtin.ping" in rows["gpu-c"]["failed"][0]
    # the run fails after the report, naming the nodes
    assert "The fleet failed: 3 nodes failed, 0 drifted (gpu-a, gpu-b, gpu-c). See " in out


def test_a_report_that_fails_nothing_still_fails_each_node_where_the_run_stopped(tmp_path):
    tmp = str(tmp_path)
    root = hostfs.materialize(H200_ROOT)
    node = {"discover_host_root": root, "validate_host_root": root, "container_toolkit_enabled": False,
            "report_fail_on": "never", "validate_fail_on": "never"}
    nogpu = hostfs.materialize(os.path.join(F.FIXTURES, "hosts", "debian12-nogpu", "root"))
    hosts = {
        "gpu-a": dict(node, nvidia_driver_method="package", nvidia_driver_version="580"),
        "gpu-b": dict(node, nvidia_driver_method="preinstalled", discover_preflight=False, gpufleet_become=True,
                      ansible_become_exe="/nonexistent/sudo", ansible_become_user="nobody"),
        # not stopped: no GPU, so no host layer runs on it (the report fails it, as declared in gpu_nodes)
        "gpu-ok": dict(node, discover_host_root=nogpu, validate_host_root=nogpu),
    }
    rc, out, report = _run(tmp, hosts)
    assert rc != 0 and "The fleet failed" not in out, out[-6000:]
    # a play of the stopped nodes alone fails each of them, after the report
    tail = out[out.index("PLAY [Fail each node where the run stopped"):]
    assert "TASK [Fail the run when the cluster change" not in tail
    assert "The run stopped on gpu-a at discovery and preflight (" in tail, out[-6000:]
    assert "The run stopped on gpu-b at the driver layer (" in tail
    assert "gpu-ok" not in tail.split("PLAY RECAP")[0], tail[-3000:]
    recap = dict((line.split()[0], line) for line in tail.split("PLAY RECAP")[1].strip().splitlines())
    assert "failed=1" in recap["gpu-a"] and "failed=1" in recap["gpu-b"] and "failed=0" in recap["gpu-ok"]


def test_a_declared_gpu_node_found_without_a_gpu_is_failed_and_named(tmp_path):
    tmp = str(tmp_path)
    root = hostfs.materialize(os.path.join(F.FIXTURES, "hosts", "debian12-nogpu", "root"))
    hosts = {"gpu-x": {"discover_host_root": root, "validate_host_root": root, "nvidia_driver_method": "package",
                       "discover_preflight": False}}
    rc, out, report = _run(tmp, hosts)
    assert rc != 0
    assert "Could not match supplied host pattern" not in out
    assert "The inventory declares it a GPU node (gpu_nodes): the report fails it" in out
    (row,) = report["nodes"]
    assert row["status"] == "failed" and row["failed"][0].startswith("declared a GPU node (inventory group gpu_nodes), but no NVIDIA GPU")


def test_a_refused_cluster_change_fails_the_run_in_the_last_play(tmp_path):
    tmp = str(tmp_path)
    root = hostfs.materialize(H200_ROOT)
    node = {"discover_host_root": root, "validate_host_root": root, "container_toolkit_enabled": False,
            "report_fail_on": "never", "gpufleet_cluster_layer": "gpu-operator", "discover_preflight": False,
            "nvidia_driver_method": "preinstalled"}
    rc, out, report = _run(tmp, {"gpu-x": node})
    assert rc != 0 and report["run"]["cluster_change"]["state"] == "refused", out[-6000:]
    # no node stopped: the last play takes the hosts because the change was refused, and says so once
    last = out[out.index("PLAY [Fail each node where the run stopped, and the run when the cluster change"):]
    assert "The run stopped on" not in last, last
    assert "fatal: [gpu-x]: FAILED!" in last
    assert "The cluster change was refused before any layer ran, and nothing was changed: gpufleet_cluster_layer: " \
           "'gpu-operator' is not a cluster layer" in last
