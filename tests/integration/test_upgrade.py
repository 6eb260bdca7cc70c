"""gpu_drain against the cluster in KUBECONFIG (see README.md beside this file).

The upgrade's cluster side on a real node and a real API server: cordon, the drain of the node's GPU
pods through the Eviction API with a PodDisruptionBudget that refuses, and uncordon - each in check
mode (nothing moves) and for real, then again (nothing to do). The module runs the way the upgrade
role runs it, through Ansible on the control host (``ansible localhost -m gpufleet.nvidia.gpu_drain``).

So that any node of any cluster can take part, the test pods ask for a resource of their own,
``gpufleet.test/gpu``, which the test advertises on the node's status (capacity and allocatable)
and takes back afterwards; the module is told that this resource makes a GPU pod. The pods are
bound to the node (``nodeName``), tolerate every taint, and run ``GPUFLEET_IT_IMAGE`` (default
``registry.k8s.io/pause:3.9``, pulled if not present; a pod that cannot pull is still evicted the
same way). Everything is removed afterwards - the namespace, the resource, and the cordon if the
test left one - unless ``GPUFLEET_IT_KEEP=1``.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "gpufleet", "nvidia")
ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")
NAMESPACE = "gpufleet-it-upgrade"
RESOURCE = "gpufleet.test/gpu"
ANNOTATION = "gpufleet.nvidia/cordoned"
REASON = "gpufleet.nvidia integration test"
IMAGE = os.environ.get("GPUFLEET_IT_IMAGE") or "registry.k8s.io/pause:3.9"
MERGE = "application/merge-patch+json"


def _skip_unless_cluster():
    if not os.environ.get("KUBECONFIG"):
        pytest.skip("KUBECONFIG is not set: no cluster to cordon and drain a node in")
    if not os.path.exists(ANSIBLE) and shutil.which("ansible") is None:
        pytest.skip("ansible is not installed beside this Python")
    try:
        from kubernetes import client, config
    except ImportError:
        pytest.skip("the Python kubernetes client is not installed")
    try:
        config.load_kube_config()
        nodes = client.CoreV1Api().list_node(_request_timeout=10).items
    except Exception as exc:  # any failure to reach the API server
        pytest.skip("the cluster in KUBECONFIG does not answer: %s" % str(exc).splitlines()[0][:200])
    return client, nodes


def _ready(node):
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


@pytest.fixture(scope="module")
def cluster():
    client, nodes = _skip_unless_cluster()
    wanted = [n for n in os.environ.get("GPUFLEET_IT_NODES", "").split(",") if n]
    candidates = [n for n in nodes if not wanted or n.metadata.name in wanted]
    usable = [n for n in candidates if _ready(n) and not n.spec.unschedulable]
    if not usable:
        pytest.skip("no Ready, schedulable node among %s: the test cordons one and must leave it as it found it"
                    % (",".join(n.metadata.name for n in candidates) or "the cluster's nodes"))
    if not os.path.islink(LINK):
        os.makedirs(os.path.dirname(LINK), exist_ok=True)
        os.symlink(ROOT, LINK)
    return client, usable[0].metadata.name


def _patch_kwargs(method):
    # The pydantic generation of the client sends a JSON patch unless told; the classic one picks by the body.
    return {"_content_type": MERGE} if "_content_type" in inspect.signature(method).parameters else {}


def _advertise(core, node, count):
    value = str(count) if count is not None else None
    body = {"status": {"capacity": {RESOURCE: value}, "allocatable": {RESOURCE: value}}}
    core.patch_node_status(node, body, **_patch_kwargs(core.patch_node_status))


def _until(what, check, timeout=90, delay=2):
    deadline = time.time() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError("%s: not within %d s" % (what, timeout))
        time.sleep(delay)


def _pod(name, node):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "gpufleet-it-" + name}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
                            "resources": {"requests": {RESOURCE: "1"}, "limits": {RESOURCE: "1"}}}],
        },
    }


def _pdb():
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "protected", "namespace": NAMESPACE},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "gpufleet-it-protected"}}},
    }


def _phases(core):
    return [core.read_namespaced_pod(n, NAMESPACE).status.phase for n in ("protected", "free")]


def _budget_counted(policy):
    status = policy.read_namespaced_pod_disruption_budget("protected", NAMESPACE).status
    return status is not None and (status.observed_generation or 0) >= 1 and status.current_healthy == 1


def _exists(core, name):
    try:
        core.read_namespaced_pod(name, NAMESPACE)
        return True
    except Exception as exc:  # pylint: disable=broad-except
        if getattr(exc, "status", None) == 404:
            return False
        raise


def _drain(tmp, node, check=False, **args):
    """Run the module through Ansible on the control host; (rc, result)."""
    params = {"node": node, "resources": ["gpufleet.test/"], "reason": REASON, "poll_interval": 2, "grace_period": 1}
    params.update(args)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_HOME=os.path.join(str(tmp), "ansible-home"))
    cmd = [ANSIBLE, "localhost", "-m", "gpufleet.nvidia.gpu_drain", "-a", json.dumps(params),
           "-e", "ansible_python_interpreter=%s" % sys.executable] + (["--check"] if check else [])
    proc = subprocess.run(cmd, env=env, cwd=str(tmp), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=600, check=False)
    out = proc.stdout
    start = out.find("=> {")
    assert start >= 0, out
    return proc.returncode, json.loads(out[start + 3:out.rindex("}") + 1])


def _node(core, name):
    node = core.read_node(name)
    return bool(node.spec.unschedulable), (node.metadata.annotations or {}).get(ANNOTATION)


def _cleanup(client, node):
    if os.environ.get("GPUFLEET_IT_KEEP") == "1":
        return
    core = client.CoreV1Api()
    unschedulable, ours = _node(core, node)
    if unschedulable and ours == REASON:
        core.patch_node(node, {"spec": {"unschedulable": None}, "metadata": {"annotations": {ANNOTATION: None}}},
                        **_patch_kwargs(core.patch_node))
    try:
        core.delete_namespace(NAMESPACE)
    except Exception:  # pylint: disable=broad-except
        pass
    _advertise(core, node, None)


def test_cordon_drain_through_a_pdb_and_uncordon(cluster, tmp_path):  # pylint: disable=too-many-statements
    client, node = cluster
    core = client.CoreV1Api()
    policy = client.PolicyV1Api()
    evicted = ["%s/free" % NAMESPACE, "%s/protected" % NAMESPACE]
    try:
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        _advertise(core, node, 4)
        _until("%s advertises %s" % (node, RESOURCE), lambda: (core.read_node(node).status.allocatable or {}).get(RESOURCE) == "4")
        policy.create_namespaced_pod_disruption_budget(NAMESPACE, _pdb())
        for name in ("protected", "free"):
            core.create_namespaced_pod(NAMESPACE, _pod(name, node))
        try:
            _until("the test pods run", lambda: _phases(core) == ["Running", "Running"], timeout=120)
        except AssertionError:
            # A pending pod is evicted whatever its budget says: nothing could be checked.
            pytest.skip("the test pods do not run on %s (%s): set GPUFLEET_IT_IMAGE to an image the node has" % (node, _phases(core)))
        _until("the budget counts the protected pod", lambda: _budget_counted(policy))

        # check mode: the plan, nothing moves
        rc, plan = _drain(tmp_path, node, check=True, timeout=10)
        assert rc == 0, plan
        assert plan["changed"] is True
        assert plan["evicted"] == evicted
        assert [(b["pod"], b["pdb"]) for b in plan["blocked"]] == [("%s/protected" % NAMESPACE, "%s/protected" % NAMESPACE)]
        assert _node(core, node) == (False, None)
        assert _exists(core, "free") and _exists(core, "protected")

        # for real: the free pod goes, the budget keeps the other, the drain fails, the node stays cordoned
        rc, failed = _drain(tmp_path, node, timeout=20)
        assert rc != 0, failed
        assert "%s/protected (eviction refused" % NAMESPACE in failed["msg"], failed
        assert "PodDisruptionBudget %s/protected" % NAMESPACE in failed["msg"], failed
        assert failed["evicted"] == ["%s/free" % NAMESPACE]
        assert _node(core, node) == (True, REASON)
        assert not _exists(core, "free") and _exists(core, "protected")

        # the budget gone, the drain finishes; a second one has nothing to do
        policy.delete_namespaced_pod_disruption_budget("protected", NAMESPACE)
        rc, done = _drain(tmp_path, node, timeout=120)
        assert rc == 0, done
        assert done["changed"] is True and done["evicted"] == ["%s/protected" % NAMESPACE]
        assert not _exists(core, "protected")
        rc, again = _drain(tmp_path, node, timeout=60)
        assert rc == 0 and again["changed"] is False and again["evicted"] == [], again
        rc, again = _drain(tmp_path, node, check=True, timeout=60)
        assert rc == 0 and again["changed"] is False, again

        # uncordon: check mode says so and leaves it, then for real, then nothing to do
        rc, check = _drain(tmp_path, node, check=True, state="uncordon")
        assert rc == 0 and check["changed"] is True and check["msg"] == "node %s would be uncordoned" % node, check
        assert _node(core, node) == (True, REASON)
        rc, back = _drain(tmp_path, node, state="uncordon")
        assert rc == 0 and back["changed"] is True, back
        assert _node(core, node) == (False, None)
        rc, again = _drain(tmp_path, node, state="uncordon")
        assert rc == 0 and again["changed"] is False, again
        rc, again = _drain(tmp_path, node, check=True, state="uncordon")
        assert rc == 0 and again["changed"] is False, again
    finally:
        _cleanup(client, node)
