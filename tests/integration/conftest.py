"""What the integration tests share: the cluster in KUBECONFIG, a chart repository served on
127.0.0.1 from the packaged charts of GPUFLEET_IT_CHARTS, the API server's audit log
(GPUFLEET_IT_AUDIT_LOG) read for the writes a step made, and site.yml runs.

Nothing here knows how the cluster was made: each test skips, saying why, when a variable or a
chart it needs is missing or the cluster does not answer.
"""

from __future__ import annotations

import functools
import glob
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
SITE = os.path.join(ROOT, "playbooks", "site.yml")
HELM = dict((m, os.path.join(ROOT, ".cache", "helm", str(m), "helm")) for m in (3, 4))
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


def cluster_client():
    """The kubernetes client on KUBECONFIG's cluster, or a visible skip."""
    if not os.environ.get("KUBECONFIG"):
        pytest.skip("KUBECONFIG is not set: no cluster to run against")
    try:
        from kubernetes import client, config
        config.load_kube_config()
        client.CoreV1Api().list_node(_request_timeout=10)
    except Exception as exc:  # any failure to reach the API server
        pytest.skip("the cluster in KUBECONFIG does not answer: %s" % str(exc).splitlines()[0][:200])
    return client


class Audit(object):
    """The API server's audit log: the write requests of one user after a mark."""

    def __init__(self, path, user):
        self.path, self.user = path, user

    def mark(self):
        return os.path.getsize(self.path)

    def events(self, since):
        with open(self.path, "rb") as f:
            f.seek(since)
            lines = f.read().decode("utf-8", "replace").splitlines()
        found = []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("stage") == "ResponseComplete" and event.get("verb") in WRITE_VERBS \
                    and (event.get("user") or {}).get("username") == self.user:
                found.append(event)
        return found

    def writes(self, since):
        """``[(verb, resource, namespace/name, labels set)]`` of real writes (not dry runs), in order."""
        return [_describe(e) for e in self.events(since) if "dryRun=All" not in e.get("requestURI", "")]

    def dry_runs(self, since):
        return [_describe(e) for e in self.events(since) if "dryRun=All" in e.get("requestURI", "")]


def _describe(event):
    ref = event.get("objectRef") or {}
    body = (event.get("requestObject") or {}).get("metadata") or {}
    name = "/".join(x for x in (ref.get("namespace"), ref.get("name")) if x)
    return (event["verb"], ref.get("resource"), name, body.get("labels") or {})


@pytest.fixture(scope="session")
def audit():
    path = os.environ.get("GPUFLEET_IT_AUDIT_LOG")
    if not path or not os.path.isfile(path):
        pytest.skip("GPUFLEET_IT_AUDIT_LOG does not name the API server's audit log: the writes cannot be counted")
    client = cluster_client()
    review = client.AuthenticationV1Api().create_self_subject_review({"apiVersion": "authentication.k8s.io/v1",
                                                                      "kind": "SelfSubjectReview"})
    return Audit(path, review.status.user_info.username)


@pytest.fixture(scope="session")
def chart_repo(tmp_path_factory):
    """``http://127.0.0.1:PORT/``: a chart repository of the packaged charts in GPUFLEET_IT_CHARTS."""
    source = os.environ.get("GPUFLEET_IT_CHARTS")
    if not source or not glob.glob(os.path.join(source, "*.tgz")):
        pytest.skip("GPUFLEET_IT_CHARTS does not name a folder of packaged charts (gpu-operator-v*.tgz, nvidia-device-plugin-*.tgz)")
    if not os.access(HELM[3], os.X_OK):
        pytest.skip("%s is missing: scripts/fetch-helm.sh installs it" % HELM[3])
    served = str(tmp_path_factory.mktemp("charts"))
    for chart in glob.glob(os.path.join(source, "*.tgz")):
        shutil.copy(chart, served)
    subprocess.run([HELM[3], "repo", "index", served], check=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=served)
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d/" % server.server_address[1]
    server.shutdown()
    server.server_close()


def need_chart(name):
    source = os.environ.get("GPUFLEET_IT_CHARTS") or ""
    if not glob.glob(os.path.join(source, name)):
        pytest.skip("GPUFLEET_IT_CHARTS has no %s" % name)


def write_inventory(tmp, cluster_vars, gpu_hosts, other_hosts=None, groups=None):
    inventory = {"all": {"vars": dict({"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                       "report_dir": os.path.join(str(tmp), "report")}, **cluster_vars),
                         "hosts": dict(other_hosts or {}),
                         "children": dict({"gpu_nodes": {"hosts": gpu_hosts}}, **(groups or {}))}}
    with open(os.path.join(str(tmp), "inventory.yml"), "w") as f:
        yaml.safe_dump(inventory, f)


def site(tmp, *args, helm=3):
    """Run site.yml on the inventory in ``tmp`` with Helm ``helm`` first on PATH: ``(rc, output)``."""
    bindir = os.path.join(str(tmp), "bin%d" % helm)
    os.makedirs(bindir, exist_ok=True)
    link = os.path.join(bindir, "helm")
    if not os.path.islink(link):
        os.symlink(HELM[helm], link)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_HOME=os.path.join(str(tmp), "ansible-home"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "inventory.yml", SITE] + list(args), cwd=str(tmp), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=1800, check=False)
    return proc.returncode, proc.stdout


def changed(out):
    return dict((m.group(1), int(m.group(2))) for m in re.finditer(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)", out, re.M))


def helm_json(*args):
    out = subprocess.run([HELM[3]] + list(args) + ["-o", "json"], stdout=subprocess.PIPE, universal_newlines=True, check=True)
    return json.loads(out.stdout)
