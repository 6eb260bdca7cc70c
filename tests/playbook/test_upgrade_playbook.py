"""playbooks/upgrade.yml end to end, with ansible-playbook, against the fake Kubernetes API.

There is no cluster and no GPU here. The API is ``tests/unit/plugins/fake_kube.py`` (nodes, pods,
evictions refused for a while by a PodDisruptionBudget, a DaemonSet pod to leave alone). The hosts
are local (``connection: local``): discovery and validation read the H200 capture through
``discover_host_root`` / ``validate_host_root``, where nvidia-smi cannot run - so the validation
takes the GPU Operator's view (``validate_driver_method: operator``: the GPUs are checked, the
host's driver is not) and passes. The driver is installed by a stand-in role
(``upgrade_driver_role``) that writes a marker file, or fails where the test says: the real driver
role would install packages on this machine. It checks what the playbook does with the hosts,
the cluster and the report - the plan, the batches, cordon, drain, the wait, uncordon, stop on
failure, check mode - not how a real API server or a real driver behaves
(tests/integration/test_upgrade.py runs the drain against a real cluster).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit import hostfs
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import fake_kube as K

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import fleets as F

pytest.importorskip("kubernetes")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
PLAYBOOK = os.path.join(F.ROOT, "playbooks", "upgrade.yml")
H200_ROOT = os.path.join(F.FIXTURES, "hosts", "ubuntu2404-h200-preinstalled", "root")
ANNOTATION = "gpufleet.nvidia/cordoned"
FAKE_DRIVER = """---
- name: Fail the driver where the test asks
  ansible.builtin.fail:
    msg: "fake driver: {{ inventory_hostname }} cannot install {{ nvidia_driver_version }}"
  when: inventory_hostname in (fake_driver_fail | default([]))

- name: Install the fake driver
  ansible.builtin.copy:
    dest: "{{ fake_driver_dir }}/{{ inventory_hostname }}"
    content: "{{ nvidia_driver_version }} reboot={{ nvidia_driver_reboot }}\\n"
    mode: "0644"
"""


@pytest.fixture
def kube():
    fake = K.FakeKube(
        nodes=[K.node("gpu-a"), K.node("gpu-b"), K.node("gpu-p")],
        pods=[
            K.pod("train-a", "gpu-a", labels={"app": "train"}, owner=("ReplicaSet", "train-1")),
            K.pod("dcgm-a", "gpu-a", namespace="gpu-operator", owner=("DaemonSet", "dcgm")),
            K.pod("train-b", "gpu-b", labels={"app": "serve"}, owner=("ReplicaSet", "serve-1")),
            K.pod("train-p", "gpu-p", labels={"app": "serve"}, owner=("ReplicaSet", "serve-1")),
        ],
        pdbs=[K.pdb("train", match_labels={"app": "train"})],
        pdb_refusals={"train": 2},
    )
    yield fake
    fake.close()


def _project(tmp, kube, hosts=("gpu-a", "gpu-b"), extra_vars=None, host_vars=None):
    root = hostfs.materialize(H200_ROOT)
    os.makedirs(os.path.join(tmp, "roles", "fake_driver", "tasks"))
    with open(os.path.join(tmp, "roles", "fake_driver", "tasks", "main.yml"), "w") as handle:
        handle.write(FAKE_DRIVER)
    os.makedirs(os.path.join(tmp, "markers"))
    variables = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "gpufleet_become": False,
        "gpufleet_kubeconfig": kube.kubeconfig(os.path.join(tmp, "kubeconfig")) if kube else os.path.join(tmp, "no-kubeconfig"),
        "nvidia_driver_method": "package",
        "nvidia_driver_version": "580.95.05",
        "discover_host_root": root,
        "discover_preflight": False,
        "validate_host_root": root,
        "validate_driver_method": "operator",
        "validate_container_runtime": "none",
        "validate_k8s_stack": "none",
        "validate_cuda_pod": "none",
        "validate_node_labels": {"nvidia.com/gpu.present": "true"},
        # The node labels the validate role publishes (driver branch, validation, ...) are another
        # test's (test_validate_role_cluster.py): here every write to a node is the upgrade's own.
        "validate_publish_labels": False,
        "upgrade_driver_role": "fake_driver",
        "upgrade_poll_interval": 0.2,
        "upgrade_drain_timeout": 30,
        "upgrade_ready_timeout": 10,
        "fake_driver_dir": os.path.join(tmp, "markers"),
        "report_dir": os.path.join(tmp, "report"),
    }
    variables.update(extra_vars or {})
    inventory = {"all": {"hosts": dict((h, dict((host_vars or {}).get(h) or {})) for h in hosts), "vars": variables}}
    with open(os.path.join(tmp, "inventory.yml"), "w") as handle:
        yaml.safe_dump(inventory, handle)


def _run(tmp, *extra):
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": F.COLLECTIONS,
        "ANSIBLE_ROLES_PATH": os.path.join(tmp, "roles"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_HOME": os.path.join(tmp, "ansible-home"),
        "ANSIBLE_PIPELINING": "1",
        "HOME": tmp,
    })
    for name in ("K8S_AUTH_KUBECONFIG", "KUBECONFIG", "K8S_AUTH_CONTEXT", "KUBERNETES_SERVICE_HOST"):
        env.pop(name, None)
    proc = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", os.path.join(tmp, "inventory.yml"), PLAYBOOK] + list(extra),
        env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False, timeout=600,
    )
    return proc.returncode, proc.stdout.decode()


def _report(tmp):
    with open(os.path.join(tmp, "report", "gpufleet-report.json")) as handle:
        return json.load(handle)


def _rows(report):
    return dict((r["host"], r) for r in report["nodes"])


def test_check_mode_plans_the_batches_and_changes_nothing(tmp_path, kube):
    tmp = str(tmp_path)
    _project(tmp, kube, hosts=("gpu-a", "gpu-b", "gpu-p"), extra_vars={"upgrade_batch": [1, "100%"]},
             host_vars={"gpu-p": {"nvidia_driver_method": "preinstalled"}})
    rc, out = _run(tmp, "--check")
    assert rc == 0, out
    assert kube.writes() == [], kube.writes()
    assert os.listdir(os.path.join(tmp, "markers")) == []
    why = ("driver: not checked on the host: the GPU Operator runs it in a container (driver_method operator); the cluster checks cover it; "
           "driver version: not checked on the host (driver_method operator); driver_installed: not checked")
    plan = (
        "batch 1 of 2: gpu-a: to upgrade (%s): cordon, "
        "evict 1 GPU pod (ml/train-a) - blocked now: ml/train-a by PodDisruptionBudget ml/train, "
        "install driver 580.95.05 and reboot if the driver needs it, wait until it is Ready and advertises 1 nvidia.com/gpu, "
        "validate, uncordon" % why
    )
    assert '"%s",' % plan in out, out
    assert '"batch 2 of 2: gpu-p: not upgraded: nvidia_driver_method is preinstalled' in out
    assert "gpu-a: would be upgraded: check mode: node gpu-a would be cordoned; 1 GPU pod would be evicted: ml/train-a; " \
           "blocked now: ml/train-a by ml/train; left alone: gpu-operator/dcgm-a (DaemonSet pod); " \
           "the driver role ran in check mode; the node was not waited for, validated or uncordoned" in out, out
    assert "Driver upgrade to 580.95.05: 3 GPU nodes in 2 batches (1, then 100%): 2 to upgrade, 1 not applicable" in out, out
    notes = _report(tmp)["run"]["notes"]
    assert notes[0] == "Driver upgrade to 580.95.05: 3 GPU nodes in 2 batches (1, then 100%): 2 would be upgraded, 1 not applicable", notes
    assert notes[1].startswith("batch 1 of 2: gpu-a: would be upgraded (check mode): cordon, evict 1 GPU pod (ml/train-a)")
    assert notes[2].startswith("batch 2 of 2: gpu-b: would be upgraded (check mode): cordon, evict 1 GPU pod (ml/train-b)")
    assert notes[3].startswith("batch 2 of 2: gpu-p: not upgraded: nvidia_driver_method is preinstalled")
    assert _report(tmp)["run"]["check_mode"] is True


FAILURES = [
    # (stage, what makes gpu-a fail, the failed task, the start of its message)
    ("driver upgrade", {"extra_vars": {"fake_driver_fail": ["gpu-a"]}}, "Fail the driver where the test asks",
     "fake driver: gpu-a cannot install 580.95.05"),
    # the host's own driver checks: nvidia-smi cannot run in the capture
    ("validation", {"host_vars": {"gpu-a": {"validate_driver_method": "package"}}},
     "Say what validation found on the node, and fail it as validate_fail_on asks",
     "gpu-a: validation failed: nvidia-smi not found"),
]


@pytest.mark.parametrize("stage, setup, task, msg", FAILURES, ids=[f[0] for f in FAILURES])
def test_a_failure_in_batch_1_of_2_stops_the_upgrade_and_leaves_the_node_cordoned(tmp_path, kube, stage, setup, task, msg):
    tmp = str(tmp_path)
    _project(tmp, kube, **setup)
    rc, out = _run(tmp)
    assert rc == 2, out  # the report fails the run: a node failed
    # gpu-a: cordoned, its GPU pod evicted through the budget, the DaemonSet pod left, then it failed
    assert kube.evictions == [("ml/train-a", 429), ("ml/train-a", 429), ("ml/train-a", 201)]
    node_a = kube.nodes["gpu-a"]
    assert node_a["spec"].get("unschedulable") is True
    assert node_a["metadata"]["annotations"] == {ANNOTATION: "gpufleet.nvidia driver upgrade to 580.95.05"}
    assert ("gpu-operator", "dcgm-a") in kube.pods
    assert os.listdir(os.path.join(tmp, "markers")) == ([] if stage == "driver upgrade" else ["gpu-a"])
    # gpu-b: not touched, not even cordoned
    assert kube.writes("gpu-b") == []
    assert ("ml", "train-b") in kube.pods and kube.nodes["gpu-b"]["spec"] == {}
    assert "gpu-b: not started: the upgrade stopped at gpu-a: %s" % stage in out, out
    report = _report(tmp)
    rows = _rows(report)
    assert rows["gpu-a"]["status"] == "failed"
    assert rows["gpu-a"]["failed"][0].startswith("the run stopped at %s: %s / %s" % (stage, task, msg)), rows["gpu-a"]["failed"]
    notes = report["run"]["notes"]
    assert notes[0] == "Driver upgrade to 580.95.05: 2 GPU nodes in 2 batches (1 at a time): 1 failed, 1 not started"
    assert notes[1].startswith("The upgrade stopped at gpu-a (batch 1 of 2), stage %s (%s): %s" % (stage, task, msg)), notes
    assert notes[1].endswith("; not started: gpu-b")
    assert notes[3] == "batch 2 of 2: gpu-b: not started: the upgrade stopped at gpu-a: %s" % stage


def test_the_upgrade_goes_through_every_batch(tmp_path, kube):
    tmp = str(tmp_path)
    _project(tmp, kube, hosts=("gpu-a", "gpu-b", "gpu-p"), extra_vars={"upgrade_batch": [1, "100%"]},
             host_vars={"gpu-p": {"nvidia_driver_method": "preinstalled"}})
    rc, out = _run(tmp)
    assert rc == 0, out
    for host in ("gpu-a", "gpu-b"):
        with open(os.path.join(tmp, "markers", host)) as handle:
            assert handle.read() == "580.95.05 reboot=True\n"
        assert kube.nodes[host]["spec"] == {} and kube.nodes[host]["metadata"]["annotations"] == {}
    assert sorted(kube.evicted()) == ["ml/train-a", "ml/train-b"]
    assert ("gpu-operator", "dcgm-a") in kube.pods
    # each node was cordoned before its pods went, and uncordoned after; gpu-a's batch before gpu-b's
    patches = [(w[1].rsplit("/", 1)[1], (w[3].get("spec") or {}).get("unschedulable", "-")) for w in kube.writes() if w[0] == "PATCH"]
    assert patches == [("gpu-a", True), ("gpu-a", None), ("gpu-b", True), ("gpu-b", None)]
    # the preinstalled node was left alone
    assert kube.writes("gpu-p") == [] and ("ml", "train-p") in kube.pods
    assert not os.path.exists(os.path.join(tmp, "markers", "gpu-p"))
    report = _report(tmp)
    assert report["run"]["notes"][0] == "Driver upgrade to 580.95.05: 3 GPU nodes in 2 batches (1, then 100%): 2 upgraded, 1 not applicable"
    # "loaded" is what the capture's facts say: the stand-in driver role installs nothing
    assert report["run"]["notes"][1] == (
        "batch 1 of 2: gpu-a: upgraded: driver 580.159.04 loaded; evicted ml/train-a; back after 0 s; node gpu-a uncordoned")
    rows = _rows(report)
    assert rows["gpu-a"]["status"] == "ok" and rows["gpu-a"]["allocatable"]["text"] == "1 of 1"
    assert report["cluster"]["checked"] is True


def test_without_a_cluster_the_upgrade_is_refused_unless_the_hosts_are_not_kubernetes_nodes(tmp_path):
    tmp = str(tmp_path)
    _project(tmp, None)
    rc, out = _run(tmp)
    assert rc == 2, out
    assert (
        "The upgrade cannot cordon and drain gpu-a in the cluster: gpu_drain: no kubeconfig: %s (kubeconfig) does not exist"
        % os.path.join(tmp, "no-kubeconfig")
    ) in out, out
    assert "or set upgrade_cluster to false if these hosts are not Kubernetes nodes" in out
    assert os.listdir(os.path.join(tmp, "markers")) == []
    assert not os.path.exists(os.path.join(tmp, "report"))

    rc, out = _run(tmp, "-e", "upgrade_cluster=false")
    assert rc == 0, out
    assert "gpu-a: not cordoned or drained (upgrade_cluster is false: not a Kubernetes node)" in out
    assert sorted(os.listdir(os.path.join(tmp, "markers"))) == ["gpu-a", "gpu-b"]
    assert _report(tmp)["run"]["notes"][0] == "Driver upgrade to 580.95.05: 2 GPU nodes in 2 batches (1 at a time): 2 upgraded"
