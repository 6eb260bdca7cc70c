"""The README's own cluster example, planned as written by the gpu_operator role (issue 35: the
defaults refused it, the toolkit role's CDI off against the operator's cdi.enabled on)."""

from __future__ import annotations

import os
import re

import yaml

from . import fleets as F

# Each node's containerd as discovery reads it: Debian 13's for the node prepared here (its
# driver 550 is Debian 13's), a vendor image's 1.7 for the pre-installed one.
DEBIAN13_CONTAINERD = "1.7.24~ds1"
DEBIAN12_CONTAINERD = "1.6.20~ds1"


def readme_inventory():
    """The first YAML block of the README's section on the cluster layer."""
    with open(os.path.join(F.ROOT, "README.md")) as f:
        text = f.read()
    section = text[text.index("## The cluster layer"):]
    return yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))


def _hosts(group, inherited):
    """``{host: vars}`` of an inventory group, its children's and its own vars merged in."""
    found = {}
    merged = dict(inherited, **(group.get("vars") or {}))
    for host, hv in (group.get("hosts") or {}).items():
        found[host] = dict(merged, **(hv or {}))
    for child in (group.get("children") or {}).values():
        found.update(_hosts(child or {}, merged))
    return found


def readme_fleet(containerd):
    inventory = readme_inventory()["all"]
    hosts = _hosts(inventory["children"]["gpu_nodes"], {})
    for host, hv in hosts.items():
        if hv["nvidia_driver_method"] != "operator":
            hv["ansible_facts"] = {"gpufleet_nvidia": {"gpu_count": 1, "container": {"containerd": {"version": containerd[host]}}}}
    return {"vars": inventory["vars"], "hosts": hosts}


def test_the_readme_example_plans_with_the_defaults_as_written():
    fleet = readme_fleet({"gpu-d1": DEBIAN13_CONTAINERD, "gpu-p1": "1.7.27"})
    assert fleet["vars"]["gpufleet_cluster_layer"] == "gpu_operator"
    planned = F.plan(fleet, "gpu_operator")
    assert planned["problems"] == []
    assert planned["chart_values"]["cdi"]["enabled"] is True


def test_on_debian_12s_containerd_the_plan_names_the_fix_the_readme_gives():
    fleet = readme_fleet({"gpu-d1": DEBIAN12_CONTAINERD, "gpu-p1": "1.7.27"})
    problems = F.plan(fleet, "gpu_operator")["problems"]
    assert len(problems) == 1 and "host 'gpu-d1': containerd 1.6.20~ds1 has no CDI" in problems[0]
    assert "container_toolkit_set_as_default: true" in problems[0]
    fleet["hosts"]["gpu-d1"]["container_toolkit_set_as_default"] = True
    assert F.plan(fleet, "gpu_operator")["problems"] == []


def test_the_roles_and_the_cluster_layer_share_the_cdi_default():
    from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster import fleet

    toolkit = F.role_defaults("container_toolkit")["container_toolkit_enable_cdi"]
    assert toolkit is fleet.TOOLKIT_ENABLE_CDI_DEFAULT is F.role_defaults("gpu_operator")["gpu_operator_cdi_enabled"] is True
