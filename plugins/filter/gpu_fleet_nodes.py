# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_fleet_nodes
short_description: Read the GPU nodes of the inventory the way the cluster layer sees them
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Reads, for each host of a group, the per-host variables that decide what the GPU Operator or
    the standalone device plugin does on that node, checks them, and returns one record per node.
  - "The hosts are the inventory group that declares the cluster's GPU nodes, all of it: the plan
    is a function of that declaration, never of which hosts an earlier play left."
  - "Per-host variables (default in brackets): C(gpufleet_node_name) [the inventory name], the
    Kubernetes node name; C(nvidia_driver_method) (required: a node that does not declare it is a
    problem), V(package), V(preinstalled) or V(operator); C(container_toolkit_enabled) [true unless the driver method is V(operator)];
    C(container_toolkit_runtime) [containerd]; C(gpufleet_sharing_config) [none], the device
    plugin config of the node; C(gpufleet_mig_config) [none], the MIG manager config of the node."
  - A host is prepared for the driver when its method is V(package) or V(preinstalled), and for
    the toolkit when C(container_toolkit_enabled) is true.
positional: hostvars, role, run
options:
  _input:
    description: The inventory names of the GPU nodes, for example C(groups['gpufleet_gpu_nodes']).
    type: list
    elements: str
    required: true
  hostvars:
    description: The variables of every host, normally C(hostvars).
    type: dict
    required: true
  role:
    description: The name that starts every problem message.
    type: str
    default: gpufleet
  run:
    description:
      - site.yml's record of its discovery, C({discovered, hosts, reached}) (the fact C(gpufleet_run) of
        localhost). A host the run set out to discover and did not reach (failed or unreachable) is a
        problem, so the change is refused rather than planned without it.
      - V(null) (the role used on its own) checks nothing of the kind.
    type: dict
"""

EXAMPLES = r"""
- name: Read the GPU nodes
  ansible.builtin.set_fact:
    fleet: "{{ groups['gpufleet_gpu_nodes'] | gpufleet.nvidia.gpu_fleet_nodes(hostvars, 'gpu_operator') }}"
"""

RETURN = r"""
_value:
  description: The nodes, sorted by node name, and the problems found in their variables.
  type: dict
  contains:
    nodes:
      description: One record per host.
      type: list
      elements: dict
      sample:
        - host: gpu-a
          name: gpu-a
          driver_method: package
          host_driver: true
          host_toolkit: true
          runtime: containerd
          sharing_config: ts-4
          mig_config: ""
          gpus: {count: 1, smi: [{name: NVIDIA H200, mig_capable: true, memory_total_mib: 143771}],
                 pci: [{name: "GH100 [H200 SXM 141GB]", device_id: "0x2335", mig_capable: true}]}
    problems:
      description: One message per bad variable, naming the host, the variable, the value and what is accepted.
      type: list
      elements: str
      sample:
        - "gpu_operator: host 'gpu-b': nvidia_driver_method 'rpm' is not a driver method (expected one of: package, preinstalled, operator)"
"""

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.fleet import fleet_nodes


def gpu_fleet_nodes(hosts, hostvars, role="gpufleet", run=None):
    return fleet_nodes(hosts, hostvars, role, run)


class FilterModule(object):
    def filters(self):
        return {"gpu_fleet_nodes": gpu_fleet_nodes}
