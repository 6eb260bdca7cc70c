"""The validate and report roles end to end, with ansible-playbook, against a fake Kubernetes API.

There is no cluster here. ``FakeKube`` is the tests' fake API server (``tests/unit/plugins/fake_kube.py``),
which answers the requests kubernetes.core makes (API discovery, nodes, pods list / get / create /
delete with label selectors) from objects in memory, and here plays a vector-add pod that completes
and logs ``Test PASSED``. It is not Kubernetes: it checks how the roles drive kubernetes.core (the dynamic
include, the registered results, the wait loop, the clean-up, check mode), not how a real API
server answers.

The node is the H200 capture read through ``validate_host_root`` (its GPU is on the capture's PCI
bus; nvidia-smi is not found under that root, so the host checks fail, which the cluster checks do not
depend on).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.tests.unit import hostfs
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import fake_kube as K
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.plugin_utils.validate.cluster_objects import OPERATOR_PODS, node

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import fleets as F

pytest.importorskip("kubernetes")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
H200_ROOT = os.path.join(F.FIXTURES, "hosts", "ubuntu2404-h200-preinstalled", "root")
LOG = "[Vector addition of 50000 elements]\nCopy input data from the host memory to the CUDA device\nTest PASSED\nDone\n"


class FakeKube(K.FakeKube):
    """The tests' fake API server, whose vector-add pods are Pending when created and Succeeded when
    next read, with ``Test PASSED`` in their log; ``forbid_patch`` refuses node patches as RBAC would."""

    def __init__(self, nodes, pods):
        super().__init__(nodes=nodes, pods=pods)
        self.created = []
        self.forbid_patch = False

    def close(self, silent=True):
        super().close(silent)

    def create_pod(self, namespace, body):
        pod = copy.deepcopy(body)
        pod["metadata"].update({"namespace": namespace, "uid": "uid-%d" % len(self.created)})
        pod["status"] = {"phase": "Pending"}
        self.pods[(namespace, pod["metadata"]["name"])] = pod
        self.created.append(pod["metadata"]["name"])
        return pod

    def _read_pod(self, key):
        """A created vector-add pod: Pending when created, Succeeded when next read."""
        status = self.pods[key].setdefault("status", {}) if key in self.pods and key[1] in self.created else None
        if status is not None and status.get("phase") == "Pending":
            status["phase"] = "Succeeded"
            status["containerStatuses"] = [{"name": "cuda-vectoradd", "ready": False,
                                            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]
        elif status is not None and not status.get("phase"):
            status["phase"] = "Pending"
        return super()._read_pod(key)

    def answer(self, method, path, query, body):
        parts = path.split("/")
        if method == "PATCH" and path.startswith("/api/v1/nodes/") and self.forbid_patch:
            return self.status(403, "Forbidden", 'nodes "%s" is forbidden: User "validator" cannot patch resource "nodes"' % parts[4])
        if parts[-1] == "log" and len(parts) == 8:
            return (200, LOG.encode(), "text/plain") if (parts[4], parts[6]) in self.pods else self.not_found('pods "%s"' % parts[6])
        return super().answer(method, path, query, body)


# A vector-add pod an earlier, interrupted run left behind.
LEFTOVER = dict(
    copy.deepcopy(OPERATOR_PODS[1]),
    metadata={
        "name": "old-gpufleet-vectoradd",
        "namespace": "default",
        "labels": {"app.kubernetes.io/name": "cuda-vectoradd", "app.kubernetes.io/managed-by": "gpufleet.nvidia"},
    },
)


@pytest.fixture
def kube():
    fake = FakeKube(
        [node("gpu-a"), node("cpu-1", allocatable=False, labels={"nvidia.com/gpu.present": None})],
        OPERATOR_PODS + [LEFTOVER],
    )
    yield fake
    fake.close()


def _project(tmp, kube, second_validate=None):
    root = hostfs.materialize(H200_ROOT)
    kube.kubeconfig(os.path.join(tmp, "kubeconfig"))
    inventory = {"all": {"hosts": {"gpu-a": {"validate_host_root": root}, "cpu-1": {"validate_host_root": "/"}},
                         "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                  "validate_kubeconfig": os.path.join(tmp, "kubeconfig"), "nvidia_driver_version": "580",
                                  "validate_container_runtime": "none", "validate_host_cuda": False,
                                  "validate_cuda_pod_timeout": 30}}}
    plays = [
        {"name": "Validate", "hosts": "all", "gather_facts": False, "roles": [{"role": "gpufleet.nvidia.validate"}]},
    ]
    if second_validate is not None:
        plays.append({"name": "Validate again", "hosts": "all", "gather_facts": False,
                      "roles": [{"role": "gpufleet.nvidia.validate", "vars": second_validate}]})
    plays += [
        {"name": "Report", "hosts": "localhost", "gather_facts": False,
         "roles": [{"role": "gpufleet.nvidia.report", "vars": {"report_dir": os.path.join(tmp, "report"), "report_fail_on": "never"}}]},
    ]
    with open(os.path.join(tmp, "inventory.yml"), "w") as handle:
        yaml.safe_dump(inventory, handle)
    with open(os.path.join(tmp, "playbook.yml"), "w") as handle:
        yaml.safe_dump(plays, handle, sort_keys=False)


def _run(tmp, *extra):
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": F.COLLECTIONS,
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_HOME": os.path.join(tmp, "ansible-home"),
        "ANSIBLE_PIPELINING": "1",
        "HOME": tmp,
    })
    env.pop("K8S_AUTH_KUBECONFIG", None)
    env.pop("KUBECONFIG", None)
    proc = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", os.path.join(tmp, "inventory.yml"), os.path.join(tmp, "playbook.yml")] + list(extra),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False, timeout=300,
    )
    return proc.returncode, proc.stdout.decode()


def _report(tmp):
    with open(os.path.join(tmp, "report", "gpufleet-report.json")) as handle:
        return json.load(handle)


def test_roles_against_a_fake_cluster(tmp_path, kube):
    tmp = str(tmp_path)
    _project(tmp, kube)
    rc, out = _run(tmp)
    assert rc == 0, out
    report = _report(tmp)
    cluster = report["cluster"]
    assert cluster["checked"] is True, (cluster, out)
    assert cluster["stack"]["msg"] == "GPU Operator: 4 of 4 pods ready or completed in namespace gpu-operator"
    assert cluster["cuda_pod"]["status"] == "ok", cluster["cuda_pod"]
    assert cluster["cuda_pod"]["pods"][0]["log"] == "Copy input data from the host memory to the CUDA device | Test PASSED | Done" or \
        "Test PASSED" in cluster["cuda_pod"]["pods"][0]["log"]
    gpu = [r for r in report["nodes"] if r["host"] == "gpu-a"][0]
    assert gpu["allocatable"]["text"] == "1 of 1"
    assert gpu["gpus"]["count"] == 1
    assert not [m for m in gpu["failed"] if m.startswith("node ") or "pod" in m], gpu["failed"]
    # the pod as created, and everything cleaned up, the earlier run's leftover included
    assert kube.created == ["gpufleet-vectoradd-gpu-a"]
    posted = [r[:3] for r in kube.requests if r[0] == "POST"]
    assert posted == [("POST", "/api/v1/namespaces/default/pods", "")]
    assert not [key for key in kube.pods if key[0] == "default"]
    deleted = sorted(r[1] for r in kube.requests if r[0] == "DELETE")
    assert deleted == ["/api/v1/namespaces/default/pods/gpufleet-vectoradd-gpu-a", "/api/v1/namespaces/default/pods/old-gpufleet-vectoradd"]


def test_check_mode_reads_the_cluster_but_runs_no_pod(tmp_path, kube):
    tmp = str(tmp_path)
    _project(tmp, kube)
    rc, out = _run(tmp, "--check")
    assert rc == 0, out
    report = _report(tmp)
    assert report["run"]["check_mode"] is True
    assert report["cluster"]["checked"] is True
    assert "CUDA pod: not run in check mode (it would create a pod in the cluster)" in [i["msg"] for i in report["not_checked"]]
    assert [r for r in kube.requests if r[0] in ("POST", "DELETE")] == []


def test_no_answer_from_the_cluster(tmp_path, kube):
    tmp = str(tmp_path)
    _project(tmp, kube)
    kube.close()
    rc, out = _run(tmp, "-e", "validate_cluster_timeout=8")
    assert rc == 0, out
    report = _report(tmp)
    reason = report["cluster"]["reason"]
    assert reason == "no cluster: the cluster in %s does not answer (Task failed: Timed out after 8 second(s).)" % os.path.join(tmp, "kubeconfig")
    # the failed read is rescued for the reading host alone: every host stays in the play
    rows = dict((r["host"], r) for r in report["nodes"])
    assert rows["gpu-a"]["status"] == "failed" and rows["gpu-a"]["allocatable"]["text"] == "no cluster"
    assert rows["gpu-a"]["failed"][0].startswith("nvidia-smi not found")
    assert rows["cpu-1"]["status"] == "no_gpu"


def test_a_second_validation_in_the_same_run_does_not_reuse_the_first_reading(tmp_path, kube):
    tmp = str(tmp_path)
    _project(tmp, kube, second_validate={"validate_cluster": False})
    rc, out = _run(tmp)
    assert rc == 0, out
    assert kube.created == ["gpufleet-vectoradd-gpu-a"]  # the first validation ran its pod
    cluster = _report(tmp)["cluster"]
    assert cluster["checked"] is False and cluster["reason"] == "cluster checks turned off (validate_cluster false)"


# --- the collection's node labels ---------------------------------------------------------------

OURS = ("gpufleet.nvidia/driver-branch", "gpufleet.nvidia/driver-eol", "gpufleet.nvidia/driver-flavor",
        "gpufleet.nvidia/security-floor", "gpufleet.nvidia/validation")
ANNOTATION = "gpufleet.nvidia/validate.labels"


def _labelled_kube():
    """gpu-a and cpu-1 of the inventory, and gpu-old, which an earlier run labelled and which is no longer in it."""
    old = node("gpu-old")
    old["metadata"]["labels"].update({"gpufleet.nvidia/driver-branch": "570", "gpufleet.nvidia/validation": "ok"})
    old["metadata"]["annotations"] = {ANNOTATION: "gpufleet.nvidia/driver-branch,gpufleet.nvidia/validation"}
    return FakeKube([node("gpu-a"), node("cpu-1", allocatable=False, labels={"nvidia.com/gpu.present": None}), old], OPERATOR_PODS)


def _meta(kube, name):
    return kube.nodes[name]["metadata"]


def _patches(kube):
    return [(r[1], r[2]) for r in kube.requests if r[0] == "PATCH"]


def _ours(kube, name):
    """The node's labels of the collection's prefix, and its annotation (None where absent)."""
    meta = _meta(kube, name)
    labels = dict((k, v) for k, v in meta["labels"].items() if k.startswith("gpufleet.nvidia/"))
    return labels, (meta.get("annotations") or {}).get(ANNOTATION)


def test_gpu_nodes_get_the_labels_and_a_node_that_left_the_fleet_loses_them(tmp_path):
    kube = _labelled_kube()
    try:
        tmp = str(tmp_path)
        _project(tmp, kube)
        rc, out = _run(tmp, "--check", "--diff")
        assert rc == 0, out
        # check mode: the server's dry run of both patches, and the diff of each
        assert _patches(kube) == [("/api/v1/nodes/gpu-a", "dryRun=All"), ("/api/v1/nodes/gpu-old", "dryRun=All")], out
        assert _ours(kube, "gpu-a") == ({}, None)  # check mode: nothing kept
        assert '+            "gpufleet.nvidia/driver-eol": "2028-06",' in out
        rc, out = _run(tmp)
        assert rc == 0, out
        # the capture's driver (580.159.04, open modules) on its host root; nvidia-smi is not there, so validation failed;
        # 580.159.04 is below the floor of NVIDIA's September 2026 driver bulletin (5861)
        assert _ours(kube, "gpu-a") == ({"gpufleet.nvidia/driver-branch": "580", "gpufleet.nvidia/driver-eol": "2028-06",
                                         "gpufleet.nvidia/driver-flavor": "open", "gpufleet.nvidia/security-floor": "5861",
                                         "gpufleet.nvidia/validation": "failed"},
                                        ",".join(sorted(OURS))), out
        assert _ours(kube, "cpu-1") == ({}, None)
        assert _ours(kube, "gpu-old") == ({}, None)
        assert "could not label" not in json.dumps(_report(tmp)["cluster"]["failed"])
        # a second run: the labels are there, nothing is patched
        written = len(_patches(kube))
        rc, out = _run(tmp)
        assert rc == 0, out
        assert len(_patches(kube)) == written, _patches(kube)[written:]
    finally:
        kube.close()


def test_labels_turned_off_patch_nothing(tmp_path):
    kube = _labelled_kube()
    try:
        tmp = str(tmp_path)
        _project(tmp, kube)
        rc, out = _run(tmp, "-e", "validate_publish_labels=false")
        assert rc == 0, out
        assert _patches(kube) == []
        assert _meta(kube, "gpu-old")["labels"]["gpufleet.nvidia/validation"] == "ok"
    finally:
        kube.close()


def test_nodes_that_cannot_be_labelled_fail_the_fleet_and_the_run_goes_on(tmp_path):
    kube = _labelled_kube()
    kube.forbid_patch = True
    try:
        tmp = str(tmp_path)
        _project(tmp, kube)
        rc, out = _run(tmp)
        assert rc == 0, out  # report_fail_on: never; the report is written
        failed = _report(tmp)["cluster"]["failed"]
        assert [m for m in failed if m.startswith("could not label the GPU nodes (gpufleet.nvidia/driver-branch")
                and "Forbidden" in m and "cannot patch resource" in m], (failed, out)
    finally:
        kube.close()
