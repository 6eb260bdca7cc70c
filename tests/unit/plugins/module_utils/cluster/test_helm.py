"""cluster.helm against the real helm binaries (Helm 3.18 and 4.1, from scripts/fetch-helm.sh) where they
are needed: the version, a chart repository served on 127.0.0.1 with a chart of this test's own
(not NVIDIA's), a version the repository lacks, and a cluster that does not answer. The decision
(install, upgrade, repair, refuse) is tested on release states as ``helm status`` reports them.
"""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import threading

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.cluster import helm as helm_lib
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))
BINARIES = dict((m, os.path.join(ROOT, ".cache", "helm", str(m), "helm")) for m in (3, 4))


def _run(argv, env=None):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False, env=env, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(params=[3, 4], ids=["helm3", "helm4"])
def helm_binary(request):
    path = BINARIES[request.param]
    if not os.access(path, os.X_OK):
        pytest.skip("%s is missing: scripts/fetch-helm.sh installs it" % path)
    return request.param, path


@pytest.fixture
def repo(tmp_path, helm_binary):
    chart = tmp_path / "gpu-operator"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: gpu-operator\nversion: v25.10.0\n")
    (chart / "values.yaml").write_text("driver:\n  enabled: true\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t\ndata:\n  driver: {{ .Values.driver.enabled | quote }}\n")
    served = tmp_path / "repo"
    served.mkdir()
    env = dict(os.environ, HELM_CACHE_HOME=str(tmp_path / "h"), HELM_CONFIG_HOME=str(tmp_path / "h"), HELM_DATA_HOME=str(tmp_path / "h"))
    assert _run([helm_binary[1], "package", str(chart), "-d", str(served)], env)[0] == 0
    assert _run([helm_binary[1], "repo", "index", str(served)], env)[0] == 0
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d/" % server.server_address[1], functools.partial(_run, env=env)
    server.shutdown()
    server.server_close()


def test_the_real_binaries_are_told_apart(helm_binary):
    helm = helm_lib.Helm(_run, helm_binary[1])
    assert helm.version() == helm_binary[0] and helm.version_text.startswith("v%d." % helm_binary[0])


def test_a_chart_version_is_found_rendered_or_refused_with_helms_words(tmp_path, helm_binary, repo):
    url, run = repo
    helm = helm_lib.Helm(run, helm_binary[1])
    helm.version()
    chart = {"ref": "gpu-operator", "repo_url": url, "version": "v25.10.0"}
    assert helm.show_chart(chart)["version"] == "v25.10.0"
    values = helm_lib.write_values(str(tmp_path), {"driver": {"enabled": False}})
    assert 'driver: "false"' in helm.template("r", "ns", chart, values)
    with pytest.raises(helm_lib.HelmError) as info:
        helm.show_chart(dict(chart, version="v99.0.0"))
    assert 'chart "gpu-operator" version "v99.0.0" not found in %s repository' % url in info.value.msg


def test_a_cluster_that_does_not_answer_is_named(tmp_path, helm_binary):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n")
    helm = helm_lib.Helm(_run, helm_binary[1], str(kubeconfig))
    with pytest.raises(helm_lib.HelmError) as info:
        helm.status("gpu-operator", "gpu-operator")
    assert "cluster unreachable" in info.value.msg.lower() and "127.0.0.1:1" in info.value.msg


def test_a_helm_of_another_major_version_is_refused():
    helm = helm_lib.Helm(lambda argv: (0, "v5.0.0", ""), "helm")
    with pytest.raises(helm_lib.HelmError, match=r"helm is Helm 5 \(v5.0.0\); the collection drives Helm 3 and 4"):
        helm.version()


def _state(status, version="v25.10.0", values=None, revision=2):
    return {"status": status, "revision": revision, "chart": "gpu-operator", "chart_version": version,
            "description": "d", "values": values or {}}


@pytest.mark.parametrize("current,action", [
    (None, "install"),
    (_state("deployed", values={"a": 1}), "none"),
    (_state("deployed", values={"a": 2}), "upgrade"),
    (_state("deployed", version="v26.3.3", values={"a": 1}), "upgrade"),
    (_state("deployed", version="25.10.0", values={"a": 1}), "none"),
    (_state("failed", values={"a": 1}), "repair"),
    (_state("superseded", values={"a": 1}), "repair"),
])
def test_only_a_deployed_release_with_the_planned_chart_and_values_is_left(current, action):
    assert helm_lib.decide(current, "v25.10.0", {"a": 1}, "r")[0] == action


@pytest.mark.parametrize("status", ["pending-install", "pending-upgrade", "pending-rollback"])
def test_a_pending_release_is_refused_with_the_way_out(status):
    with pytest.raises(GpuFleetError, match="helm rollback r REVISION"):
        helm_lib.decide(_state(status), "v25.10.0", {}, "r")


def test_helm_4_waits_with_a_strategy_and_helm_3_with_a_switch():
    calls = []
    for major in (3, 4):
        helm = helm_lib.Helm(lambda argv: (calls.append(argv), (0, "", ""))[1], "helm")
        helm.major = major
        helm.upgrade("r", "ns", {"ref": "c", "repo_url": "https://x", "version": "v1.0.0"}, "/v.json", True, "5m")
    assert "--wait" in calls[0] and "--wait=watcher" in calls[1]


FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "helm")


def _fixture(name):
    import json
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


@pytest.mark.parametrize("major", ["helm3", "helm4"])
def test_the_release_state_is_read_from_what_real_helm_prints(major):
    # helm status -o json has no chart key (tests/unit/fixtures/helm/README.md): reading the chart
    # version from it gave None, every install was reported failed and every run upgraded again.
    status = _fixture("%s-status.json" % major)
    assert "chart" not in status
    state = helm_lib.release_state(status, _fixture("%s-get-metadata.json" % major), {"a": 1})
    assert state == {"status": "deployed", "revision": 1, "chart": "nvidia-device-plugin", "chart_version": "0.20.0",
                     "description": "Install complete", "values": {"a": 1}}
    assert helm_lib.decide(state, "0.20.0", {"a": 1}, "r")[0] == "none"


def test_the_release_is_read_with_status_metadata_and_values():
    answers = {"status": _fixture("helm3-status.json"), "metadata": _fixture("helm3-get-metadata.json"), "values": {"a": 1}}

    def run(argv):
        import json
        verb = argv[2] if argv[1] == "get" else argv[1]
        return 0, json.dumps(answers[verb]), ""

    assert helm_lib.read_release(helm_lib.Helm(run, "helm"), "cap-helm", "cap-helm")["chart_version"] == "0.20.0"


def test_the_cluster_capabilities_are_given_to_helm_template():
    caps = helm_lib.capabilities("v1.36.2", {"resource.k8s.io/v1": {"DeviceClass": {}, "ResourceSlice": {}}, "v1": {"Node": {}}})
    assert caps == {"kube_version": "v1.36.2", "api_versions": [
        "resource.k8s.io/v1", "resource.k8s.io/v1/DeviceClass", "resource.k8s.io/v1/ResourceSlice", "v1", "v1/Node"]}
    calls = []
    helm = helm_lib.Helm(lambda argv: (calls.append(argv), (0, "", ""))[1], "helm")
    helm.template("r", "ns", {"ref": "./c"}, "/v.json", caps)
    assert calls[0][-4:] == ["--kube-version", "v1.36.2", "--api-versions", ",".join(caps["api_versions"])]
