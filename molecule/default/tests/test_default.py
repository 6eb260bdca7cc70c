"""Verify the harness scenario: what the discover role left on each Debian node.

Read only: testinfra reads files and runs the collection's read-only module.
"""

import json


def _os_release(host):
    data = {}
    for line in host.file("/etc/os-release").content_string.splitlines():
        key, _sep, value = line.partition("=")
        data[key] = value.strip('"')
    return data


def test_local_fact_matches_the_node(host):
    fact = host.file("/etc/ansible/facts.d/gpufleet_nvidia.fact")
    assert fact.is_file
    assert fact.user == "root"
    assert fact.mode == 0o644
    summary = json.loads(fact.content_string)
    release = _os_release(host)
    assert summary["os"] == "debian %s" % release["VERSION_ID"]
    # A container sees the host's kernel; the fact must say the running one.
    assert summary["kernel"] == host.check_output("uname -r")
    # The lab nodes have no NVIDIA GPU and no driver.
    assert summary["gpu_count"] == 0
    assert summary["gpus"] == []
    assert summary["driver_version"] is None


def test_gpu_facts_module_runs_from_the_collection(host):
    result = host.ansible("gpufleet.nvidia.gpu_facts", check=True)
    facts = result["ansible_facts"]["gpufleet_nvidia"]
    assert facts["gpu_count"] == 0 and facts["gpus"] == []
    assert facts["os"]["id"] == "debian"
    assert facts["os"]["version_id"] == _os_release(host)["VERSION_ID"]
    assert result.get("changed") is False
