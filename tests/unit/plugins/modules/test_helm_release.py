"""The helm_release module through main(): the four steps (check mode, run, check mode again, run
again), a refused chart version, state checked, and a repaired release, against the fake helm of
tests/unit/plugins/cluster_fake.py (the helm CLI's answers; the real binaries' in test_helm.py)."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.modules import helm_release
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.cluster_fake import FakeCluster
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.utils import AnsibleFailJson, run_module

KEY = ("gpu-operator", "gpu-operator")


@pytest.fixture
def fake(tmp_path):
    cluster = FakeCluster([])
    cluster.binary = cluster.helm_binary(str(tmp_path))
    yield cluster
    cluster.close()


def _args(fake, **extra):
    args = {"name": "gpu-operator", "namespace": "gpu-operator", "chart_ref": "gpu-operator",
            "chart_repo_url": "http://127.0.0.1:1/charts", "chart_version": "v25.10.0",
            "values": {"driver": {"enabled": False}}, "binary_path": fake.binary, "wait_timeout": "1m"}
    args.update(extra)
    return args


def test_the_four_steps(fake):
    first = run_module(helm_release, _args(fake), check_mode=True, diff=True)
    assert first["changed"] and first["action"] == "install" and fake.releases == {}
    assert first["diff"]["before"] == "" and "enabled: false" in first["diff"]["after"]
    second = run_module(helm_release, _args(fake))
    assert second["changed"] and fake.releases[KEY]["status"] == "deployed"
    assert second["release"]["status"] == "deployed" and second["helm_version"] == "v3.18.0"
    third = run_module(helm_release, _args(fake), check_mode=True)
    assert not third["changed"] and third["action"] == "none"
    fourth = run_module(helm_release, _args(fake))
    assert not fourth["changed"] and fake.releases[KEY]["revision"] == 1


def test_state_checked_changes_nothing_and_says_what_present_would_do(fake):
    result = run_module(helm_release, _args(fake, state="checked"))
    assert not result["changed"] and result["action"] == "install" and fake.releases == {}


def test_a_missing_chart_version_fails_before_any_change(fake):
    with pytest.raises(AnsibleFailJson) as info:
        run_module(helm_release, _args(fake, chart_version="v99.0.0"))
    assert 'chart "gpu-operator" version "v99.0.0" not found' in info.value.result["msg"]
    assert [e[1] for e in fake.timeline if e[0] == "helm"] == ["version", "show"]


def test_a_failed_upgrade_fails_and_the_next_run_repairs(fake):
    run_module(helm_release, _args(fake))
    fake.fail_next_upgrade = True
    with pytest.raises(AnsibleFailJson) as info:
        run_module(helm_release, _args(fake, values={"driver": {"enabled": True}}))
    assert "The release is now failed at revision 2" in info.value.result["msg"]
    assert info.value.result["release"]["status"] == "failed"
    again = run_module(helm_release, _args(fake, values={"driver": {"enabled": True}}))
    assert again["changed"] and again["action"] == "repair" and fake.releases[KEY]["status"] == "deployed"


def test_a_repository_url_without_a_version_is_refused():
    with pytest.raises(AnsibleFailJson, match=None) as info:
        run_module(helm_release, {"name": "r", "namespace": "n", "chart_ref": "c", "chart_repo_url": "https://x"})
    assert "chart_version is required with chart_repo_url" in info.value.result["msg"]


@pytest.mark.parametrize("option, value", [
    ("name", "--post-renderer=/tmp/x"),  # helm template runs that program on the control host
    ("name", "gpu-operator\n"),
    ("chart_ref", "--post-renderer=/tmp/x"),
    ("chart_ref", "gpu-operator\n--x"),
])
def test_a_value_helm_would_read_as_an_option_is_refused_before_helm_runs(fake, option, value):
    with pytest.raises(AnsibleFailJson) as info:
        run_module(helm_release, _args(fake, **{option: value}))
    assert "helm_release: %s %r is not" % (option, value) in info.value.result["msg"]
    assert [e for e in fake.timeline if e[0] == "helm"] == []
