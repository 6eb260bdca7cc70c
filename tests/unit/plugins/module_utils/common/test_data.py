"""Tests of module_utils/common/data.py: deep_merge, the one merge of configuration trees, and
host_fact, the one reader of the collection's facts in a host's variables."""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import deep_merge, host_fact


def test_tables_merge_by_key_and_everything_else_is_replaced():
    base = {"plugins": {"cri": {"sandbox_image": "pause:3.8", "cni": {"bin_dir": "/opt/cni/bin"}}}, "version": 2}
    extra = {"plugins": {"cri": {"cni": {"conf_dir": "/etc/cni"}, "sandbox_image": "pause:3.10"}}, "version": 3,
             "imports": ["/etc/containerd/conf.d/*.toml"]}
    assert deep_merge(base, extra) == {
        "plugins": {"cri": {"sandbox_image": "pause:3.10", "cni": {"bin_dir": "/opt/cni/bin", "conf_dir": "/etc/cni"}}},
        "version": 3, "imports": ["/etc/containerd/conf.d/*.toml"]}
    # a table replaces a scalar, and a scalar a table
    assert deep_merge({"a": 1, "b": {"x": 1}}, {"a": {"y": 2}, "b": 0}) == {"a": {"y": 2}, "b": 0}


def test_nothing_of_either_side_is_shared_with_the_result():
    base = {"driver": {"enabled": False}, "args": ["--a"]}
    extra = {"toolkit": {"env": [{"name": "X"}]}}
    merged = deep_merge(base, extra)
    merged["driver"]["enabled"] = True
    merged["args"].append("--b")
    merged["toolkit"]["env"][0]["name"] = "Y"
    assert base == {"driver": {"enabled": False}, "args": ["--a"]} and extra == {"toolkit": {"env": [{"name": "X"}]}}


def test_a_dict_subclass_comes_back_as_a_plain_dict():
    class Table(dict):
        pass

    merged = deep_merge({"t": Table(a=1)}, {"u": Table(b=2)})
    assert not isinstance(merged["t"], Table) and not isinstance(merged["u"], Table)
    assert merged == {"t": {"a": 1}, "u": {"b": 2}}


def test_host_fact_reads_ansible_facts_first_and_falls_back_to_a_variable():
    # As Ansible keeps a module's facts: under ansible_facts, and (injection on) also top-level.
    assert host_fact({"ansible_facts": {"gpufleet_nvidia": {"gpu_count": 2}}, "gpufleet_nvidia": {"gpu_count": 9}},
                     "gpufleet_nvidia") == {"gpu_count": 2}
    # Injection off: only under ansible_facts.
    assert host_fact({"ansible_facts": {"gpufleet_nvidia": {"gpu_count": 1}}}, "gpufleet_nvidia") == {"gpu_count": 1}
    # A variable set by hand (no fact).
    assert host_fact({"gpufleet_nvidia_validation": {"status": "ok"}}, "gpufleet_nvidia_validation") == {"status": "ok"}
    assert host_fact({"ansible_facts": {}}, "gpufleet_nvidia") is None
    assert host_fact({}, "gpufleet_nvidia") is None
