"""Tests of the gpufleet.nvidia.gpu_facts module, replaying host captures."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.modules import gpu_facts
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.discovery.captures import CaptureHost, _node
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.modules.utils import AnsibleFailJson, run_module


@pytest.fixture
def replay(monkeypatch):
    """Make the module read the named capture instead of this machine."""
    seen = {}

    def use(name):
        def for_module(cls, module, root="/", timeout=None):
            seen["args"] = (root, timeout)
            seen["host"] = CaptureHost(name)
            return seen["host"]

        monkeypatch.setattr(common_host.Host, "for_module", classmethod(for_module))
        return seen

    return use


@pytest.mark.parametrize("check_mode", [False, True])
def test_h200_capture(replay, check_mode):
    seen = replay("ubuntu2404-h200-preinstalled")
    result = run_module(gpu_facts, {}, check_mode=check_mode)
    assert result["changed"] is False
    facts = result["ansible_facts"]["gpufleet_nvidia"]
    assert sorted(result) == ["ansible_facts", "changed"]  # the facts once, as the host fact
    assert seen["args"] == ("/", 60)
    assert facts["gpu_count"] == 1
    assert facts["gpus"][0]["name"] == "GH100 [H200 SXM 141GB]"
    assert facts["driver"]["version"] == "580.159.04"
    assert facts["driver"]["flavor"] == "open"
    assert facts["driver"]["source"] == "preinstalled"
    assert facts["driver"]["nvidia_smi"]["cuda_version"] == "13.0"
    assert facts["probes"]["nvidia_smi"]["state"] == "ok"


def test_nvidia_smi_failure_does_not_fail_the_module(replay):
    replay("ubuntu2404-h200-smi-failing")
    result = run_module(gpu_facts, {"host_root": "/", "command_timeout": 10})
    assert "failed" not in result
    assert result["ansible_facts"]["gpufleet_nvidia"]["probes"]["nvidia_smi"]["state"] == "error"


def test_host_root_and_timeout_are_passed_on(replay):
    seen = replay("debian12-nogpu")
    run_module(gpu_facts, {"host_root": "/host", "command_timeout": 5})
    assert seen["args"] == ("/host", 5)


def test_bad_host_root_fails_cleanly(tmp_path):
    with pytest.raises(AnsibleFailJson) as exc:
        run_module(gpu_facts, {"host_root": str(tmp_path / "nope")})
    assert exc.value.result["msg"] == "host_root: '%s' is not a directory" % (tmp_path / "nope")
    assert exc.value.result["host_root"] == str(tmp_path / "nope")


def test_no_host_file_fails_the_module_or_hangs_it(tmp_path):
    """A FIFO, a corrupt pci.ids.gz, a damaged dpkg database, JSON nested too deep, a link to /dev/zero: probes, not a failure."""
    root = _node(tmp_path, {
        "/usr/share/misc/pci.ids.gz": b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 40,
        "/var/lib/dpkg/status": "Package: nvidia-fabricmanager-550\nStatus: install ok installed\n",
        "/etc/docker/daemon.json": "[" * 100000,
    })
    os.unlink(str(root / "etc" / "os-release"))
    os.mkfifo(str(root / "etc" / "os-release"))
    os.makedirs(str(root / "proc" / "driver" / "nvidia"))
    os.symlink("/dev/zero", str(root / "proc" / "driver" / "nvidia" / "version"))
    result = run_module(gpu_facts, {"host_root": str(root), "command_timeout": 5})
    assert "failed" not in result and result["changed"] is False
    facts = result["ansible_facts"]["gpufleet_nvidia"]
    states = dict((name, probe["state"]) for name, probe in facts["probes"].items())
    assert (states["os_release"], states["pci_ids"], states["dpkg_status"], states["docker_config"]) == ("error",) * 4
    assert facts["probes"]["os_release"]["detail"] == "/etc/os-release: [Errno 22] not a regular file but a FIFO"
    assert states["driver_version_file"] == "missing"  # resolved inside the host: there is no /dev/zero there
    assert facts["gpu_count"] == 1 and facts["host_root"] == str(root)


def test_this_machine():
    """No mock at all: gathering on whatever runs the tests ends in facts."""
    result = run_module(gpu_facts, {})
    assert result["changed"] is False
    assert "probes" in result["ansible_facts"]["gpufleet_nvidia"]


# --- validate: the validation in the same pass ---------------------------------------------------

VALIDATE = {"driver_version": "580", "driver_method": "preinstalled", "container_runtime": "none"}


@pytest.mark.parametrize("check_mode", [False, True])
def test_validate_in_the_same_pass_is_host_validates_verdict(replay, check_mode):
    from ansible_collections.gpufleet.nvidia.plugins.modules import host_validate

    seen = replay("ubuntu2404-h200-preinstalled")
    result = run_module(gpu_facts, {"validate": VALIDATE, "command_timeout": 7}, check_mode=check_mode)
    assert seen["args"] == ("/", 7)
    # one pass: the facts and the validation from the same reads, nvidia-smi asked once
    assert [c[0].rsplit("/", 1)[-1] for c in seen["host"].calls] == ["nvidia-smi"]
    # the validation set as the fact host_validate sets, nothing returned twice
    assert sorted(result) == ["ansible_facts", "changed"]
    assert sorted(result["ansible_facts"]) == ["gpufleet_nvidia", "gpufleet_nvidia_validation"]
    replay("ubuntu2404-h200-preinstalled")
    alone = run_module(host_validate, dict(VALIDATE, command_timeout=7), check_mode=check_mode)
    assert result["ansible_facts"] == alone["ansible_facts"]
    assert result["ansible_facts"]["gpufleet_nvidia_validation"]["status"] == "ok"


@pytest.mark.parametrize("options", [
    {"isolate_unprivileged": True},
    {"cluster_expect": {"node": "node-a", "replicas": 2, "resource": "nvidia.com/gpu.shared", "sharing_config": "ts-2", "labels": {}}},
])
def test_validate_takes_every_option_of_host_validate_but_its_own(replay, options):
    from ansible_collections.gpufleet.nvidia.plugins.modules import host_validate

    replay("ubuntu2404-h200-preinstalled")
    result = run_module(gpu_facts, {"validate": dict(VALIDATE, **options)})
    replay("ubuntu2404-h200-preinstalled")
    alone = run_module(host_validate, dict(VALIDATE, **options))
    assert result["ansible_facts"]["gpufleet_nvidia_validation"] == alone["validation"]
    if "cluster_expect" in options:  # echoed: the validation without it differs (isolation: no toolkit on this capture)
        replay("ubuntu2404-h200-preinstalled")
        assert run_module(gpu_facts, {"validate": VALIDATE})["ansible_facts"]["gpufleet_nvidia_validation"] != alone["validation"]


def test_without_validate_nothing_is_validated(replay):
    replay("ubuntu2404-h200-preinstalled")
    result = run_module(gpu_facts, {})
    assert sorted(result["ansible_facts"]) == ["gpufleet_nvidia"]


def test_validate_with_bad_options_fails_cleanly(replay):
    replay("ubuntu2404-h200-preinstalled")
    with pytest.raises(AnsibleFailJson) as err:
        run_module(gpu_facts, {"validate": {"driver_version": "five-eighty"}})
    # named as gpu_facts' option: the discover role's pass fails before anything is read
    assert err.value.result["msg"] == "validate.driver_version: version 'five-eighty' is not a driver version (expected e.g. 580 or 580.95.05)"
    with pytest.raises(AnsibleFailJson) as err:
        run_module(gpu_facts, {"validate": {"cuda_test_timeout": 0}})
    assert err.value.result["msg"] == "validate.cuda_test_timeout: 0 is not a number of seconds (expected 1 or more)"


def _old_tasks_text(facts):
    """What the discover role's copy task wrote: its summary through Ansible's own to_nice_json filter."""
    from ansible.plugins.filter.core import to_nice_json

    summary = dict(
        gpu_count=facts["gpu_count"], gpus=[gpu["name"] for gpu in facts["gpus"]],
        os="%s %s" % (facts["os"]["id"], facts["os"]["version_id"]), kernel=facts["kernel"]["release"],
    )
    return to_nice_json(summary, sort_keys=True) + "\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="the fact file is made root's, as the role's copy task made it")
def test_local_fact_is_the_file_the_roles_tasks_wrote_and_written_once(replay, tmp_path):
    replay("ubuntu2404-h200-preinstalled")
    folder = tmp_path / "facts.d"
    checked = run_module(gpu_facts, {"local_facts_dir": str(folder)}, check_mode=True)
    assert checked["changed"] is True and not folder.exists()
    assert checked["diff"]["before"] == "" and checked["diff"]["after"]

    first = run_module(gpu_facts, {"local_facts_dir": str(folder)})
    fact = folder / "gpufleet_nvidia.fact"
    assert first["changed"] is True
    assert fact.read_text() == _old_tasks_text(first["ansible_facts"]["gpufleet_nvidia"]) == first["diff"]["after"]
    assert '"gpus": [\n        "GH100 [H200 SXM 141GB]"\n    ]' in fact.read_text()
    assert oct(fact.stat().st_mode & 0o7777) == "0o644" and oct(folder.stat().st_mode & 0o7777) == "0o755"

    again = run_module(gpu_facts, {"local_facts_dir": str(folder)})
    assert again["changed"] is False

    os.chmod(str(fact), 0o600)  # someone changed its mode: put back, as the copy task's mode did
    fixed = run_module(gpu_facts, {"local_facts_dir": str(folder)})
    assert fixed["changed"] is True and oct(fact.stat().st_mode & 0o7777) == "0o644"


def test_without_local_facts_dir_nothing_is_written(replay, tmp_path):
    replay("debian12-nogpu")
    result = run_module(gpu_facts, {})
    assert result["changed"] is False and "diff" not in result


def test_local_fact_of_an_os_without_version_id_is_as_the_template_wrote_it():
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import local_fact

    # "{{ os.id }} {{ os.version_id }}" with no VERSION_ID (Debian sid) rendered "debian " on ansible-core 2.19 and 2.21
    facts = dict(gpu_count=0, gpus=[], os=dict(id="debian", version_id=None), kernel=dict(release="6.12.0"))
    assert '"os": "debian "' in local_fact.summary(facts)


def test_a_local_facts_dir_that_cannot_be_made_fails_naming_it(replay, tmp_path):
    replay("debian12-nogpu")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the folder should be\n")
    with pytest.raises(AnsibleFailJson) as failed:
        run_module(gpu_facts, {"local_facts_dir": str(blocker / "facts.d")})
    assert failed.value.result["msg"].startswith("local_facts_dir: could not read %s" % (blocker / "facts.d" / "gpufleet_nvidia.fact"))
    assert blocker.read_text() == "a file where the folder should be\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="the fact file is made root's, as the role's copy task made it")
def test_a_local_facts_dir_under_a_file_fails_naming_the_file(replay, tmp_path, monkeypatch):
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import io

    replay("debian12-nogpu")
    monkeypatch.setattr(io, "read_file", lambda path: None)  # nothing there yet, as on a new node
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x\n")
    with pytest.raises(AnsibleFailJson) as failed:
        run_module(gpu_facts, {"local_facts_dir": str(blocker / "facts.d")})
    assert failed.value.result["msg"].startswith("local_facts_dir: could not write %s: " % (blocker / "facts.d" / "gpufleet_nvidia.fact"))
