"""Verify the default scenario: what site.yml left on the two lab nodes, read only.

testinfra reads files and runs read-only commands on each node; the fleet report is read on the
control host (this process) from the scenario's ephemeral directory.
"""

import json
import os

import pytest

# The branch Debian's non-free archive carries for each release (inventory/lab/group_vars).
BRANCH = {"12": "535", "13": "550"}
TOOLKIT = "1.20.0-1"
TOOLKIT_PACKAGES = ["libnvidia-container1", "libnvidia-container-tools", "nvidia-container-toolkit-base",
                    "nvidia-container-toolkit"]


def _os_release(host):
    data = {}
    for line in host.file("/etc/os-release").content_string.splitlines():
        key, _sep, value = line.partition("=")
        data[key] = value.strip('"')
    return data


def _branch(host):
    return BRANCH[_os_release(host)["VERSION_ID"]]


def _report():
    path = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "gpufleet-report", "gpufleet-report.json")
    with open(path) as handle:
        return json.load(handle)


def test_driver_from_debian_is_installed_pinned_and_held(host):
    version = host.check_output("dpkg-query -W -f '${Version}' libcuda1")
    assert version.startswith(_branch(host) + "."), version
    holds = host.check_output("apt-mark showhold").split()
    assert "libcuda1" in holds
    pin = host.file("/etc/apt/preferences.d/gpufleet-nvidia-driver.pref")
    assert pin.is_file and ("Pin: version " + version) in pin.content_string


def test_toolkit_is_the_pinned_version_and_held(host):
    holds = host.check_output("apt-mark showhold").split()
    for name in TOOLKIT_PACKAGES:
        assert host.package(name).version == TOOLKIT, name
        assert name in holds, name
    # the stand-in repository is trusted only through its own key
    sources = host.run("grep -rh 'signed-by' /etc/apt/sources.list.d/").stdout
    assert "127.0.0.1:8088" in sources


def test_containerd_runs_the_nvidia_handler(host):
    assert host.service("containerd").is_running
    dump = host.check_output("containerd config dump")
    assert '.containerd.runtimes.nvidia]' in dump
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in dump
    # the site's runc handler is still there, and still the default
    assert '.containerd.runtimes.runc]' in dump
    assert 'default_runtime_name = "runc"' in dump


def test_local_fact_holds_the_hardware_only(host):
    fact = host.file("/etc/ansible/facts.d/gpufleet_nvidia.fact")
    assert fact.is_file and fact.user == "root" and fact.mode == 0o644
    summary = json.loads(fact.content_string)
    assert sorted(summary) == ["gpu_count", "gpus", "kernel", "os"]
    assert summary["os"] == "debian %s" % _os_release(host)["VERSION_ID"]
    # a container sees the host's kernel; the fact must say the running one
    assert summary["kernel"] == host.check_output("uname -r")
    assert summary["gpu_count"] == 0 and summary["gpus"] == []


def test_gpu_facts_module_runs_from_the_collection(host):
    result = host.ansible("gpufleet.nvidia.gpu_facts", check=True)
    facts = result["ansible_facts"]["gpufleet_nvidia"]
    assert facts["gpu_count"] == 0 and facts["gpus"] == []
    assert facts["driver"]["package"]["version"].startswith(_branch(host) + ".")
    assert facts["container"]["toolkit"]["version"] == TOOLKIT
    assert result.get("changed") is False


def test_fleet_report_row_of_the_node(host):
    report = _report()
    name = host.backend.get_hostname()
    rows = [r for r in report["nodes"] if r["host"] == name]
    assert len(rows) == 1
    row = rows[0]
    # The kernel guard, as it is: Debian's DKMS cannot build the module for the lab's kernel (the
    # machine's own, whose headers no Debian archive has); nothing else drifted.
    assert row["status"] == "drift", row
    guard, = [c for c in row["day2"] if c["name"] == "kernel_next_boot"]
    assert guard["status"] == "drift" and "could not build it for this kernel" in guard["msg"], guard
    assert [c["name"] for c in row["day2"] if c["status"] != "ok"] == ["kernel_next_boot"], row["day2"]
    assert row["gpus"]["count"] == 0
    assert row["driver"]["declared"] == _branch(host)
    assert row["driver"]["installed"].startswith(_branch(host) + ".")
    assert row["driver"]["loaded"] is None
    assert row["toolkit"] == {"declared": TOOLKIT, "installed": TOOLKIT}
    assert row["runtime"]["present"] is True
    assert row["failed"] == [] and len(row["drifted"]) == 1 and row["drifted"][0].startswith("the running kernel ")
    assert any(m.startswith("no GPU: the node was prepared without one") for m in row["not_checked"])


@pytest.mark.parametrize("word", ["no NVIDIA GPU", "stand-in", "no Kubernetes cluster"])
def test_fleet_report_says_what_the_lab_lacks(word):
    report = _report()
    assert report["status"] == "drift"  # the kernel guard (test_fleet_report_row_of_the_node)
    assert report["summary"]["nodes"] == 2
    assert any(word in note for note in report["run"]["notes"]), report["run"]["notes"]
