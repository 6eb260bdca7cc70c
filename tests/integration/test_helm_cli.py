"""cluster.helm with the real Helm 3 and Helm 4 binaries against the cluster in KUBECONFIG.

Every helm command whose output cluster/helm.py parses runs here for real: version, show chart,
show values, show crds, template (with the cluster's version and APIs), status, get metadata and
get values, through check() and apply() on a release of NVIDIA's device plugin chart
(GPUFLEET_IT_DEVICE_PLUGIN_CHART, a packaged nvidia-device-plugin .tgz). Skipped, with the reason,
without a cluster, a chart or the binaries (scripts/fetch-helm.sh fetches them).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.cluster import helm as helm_lib

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARIES = dict((m, os.path.join(ROOT, ".cache", "helm", str(m), "helm")) for m in (3, 4))


def _run(argv):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def _cluster_info():
    if not os.environ.get("KUBECONFIG"):
        pytest.skip("KUBECONFIG is not set: no cluster to run helm against")
    try:
        from kubernetes import client, config
        config.load_kube_config()
        version = client.VersionApi().get_code(_request_timeout=10).git_version
        groups = client.ApisApi().get_api_versions(_request_timeout=10).groups
    except Exception as exc:  # any failure to reach the API server
        pytest.skip("the cluster in KUBECONFIG does not answer: %s" % str(exc).splitlines()[0][:200])
    apis = {"v1": {}}
    for group in groups:
        for gv in group.versions:
            apis[gv.group_version] = {}
    return version, apis


@pytest.fixture(params=[3, 4], ids=["helm3", "helm4"])
def helm(request):
    path = BINARIES[request.param]
    if not os.access(path, os.X_OK):
        pytest.skip("%s is missing: scripts/fetch-helm.sh installs it" % path)
    chart = os.environ.get("GPUFLEET_IT_DEVICE_PLUGIN_CHART")
    if not chart:
        pytest.skip("GPUFLEET_IT_DEVICE_PLUGIN_CHART is not set: no nvidia-device-plugin chart to install")
    version, apis = _cluster_info()
    binary = helm_lib.Helm(_run, path, os.environ["KUBECONFIG"])
    release = "gpufleet-it-helm%d" % request.param
    subprocess.run(["kubectl", "create", "namespace", release], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    yield request.param, binary, chart, release, helm_lib.capabilities(version, apis)
    _run([path, "uninstall", release, "--namespace", release, "--kubeconfig", os.environ["KUBECONFIG"]])
    subprocess.run(["kubectl", "delete", "namespace", release, "--wait=false"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)


def test_check_and_apply_read_what_the_real_helm_prints(helm, tmp_path):
    major, binary, chart, release, caps = helm
    values = {"runtimeClassName": "", "gfd": {"enabled": False}}
    params = {"name": release, "namespace": release, "chart": {"ref": chart}, "values": values, "wait": False,
              "wait_timeout": "2m", "check_values": True, "values_crd": "", "release_lines": [], "capabilities": caps}
    values_file = helm_lib.write_values(str(tmp_path), values)
    checked = helm_lib.check(binary, params, values_file)
    assert binary.major == major and checked["chart"]["name"] == "nvidia-device-plugin"
    assert checked["action"] == "install" and checked["release"] is None and checked["rendered_objects"] > 0
    done = helm_lib.apply(binary, params, values_file, checked)
    assert done["release"]["status"] == "deployed" and done["release"]["revision"] == 1
    assert done["release"]["chart_version"] == checked["chart"]["version"]
    again = helm_lib.check(binary, params, values_file)
    assert again["action"] == "none", again["reason"]
    assert helm_lib.apply(binary, params, values_file, again)["msg"] == again["reason"]
    assert helm_lib.read_release(binary, release, release)["revision"] == 1
    changed = helm_lib.check(binary, dict(params, values=dict(values, gfd={"enabled": True})), values_file)
    assert changed["action"] == "upgrade" and changed["reason"].endswith("values differ")


def test_a_missing_release_reads_as_none(helm):
    dummy, binary, dummy_chart, release, dummy_caps = helm
    assert binary.status("gpufleet-it-missing", release) is None
    assert helm_lib.read_release(binary, "gpufleet-it-missing", release) is None
