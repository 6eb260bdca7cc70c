# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: upgrade_progress
short_description: Where a rolling upgrade stands - each node's state, and where it stopped
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Used by the C(gpufleet.nvidia.upgrade) role to show the plan, to decide at the start of each
    batch whether the batch starts, and to sum the run up.
  - Reads each host's C(upgrade_result) from O(hostvars), cuts the hosts into the batches that
    O(serial) makes (as the play's C(serial) keyword does), and returns each node's state. A batch
    starts only when no node of an earlier batch failed or was left unfinished; the nodes of the
    later batches are C(not_started), with a message saying where the upgrade stopped.
positional: hostvars, serial, reached
options:
  _input:
    description: The GPU nodes in play order.
    type: list
    elements: str
    required: true
  hostvars:
    description: The variables of every host, normally C(hostvars).
    type: dict
    required: true
  serial:
    description: The batch size, as C(serial) takes it.
    type: raw
    required: true
  reached:
    description:
      - The batch the run is starting, as its number or one of its hosts; the batches before it
        ran. V(1) for the plan; unset at the end of the run.
    type: raw
"""

EXAMPLES = r"""
- name: Read how the upgrade went so far
  ansible.builtin.set_fact:
    progress: "{{ gpu_nodes | gpufleet.nvidia.upgrade_progress(hostvars, 1, inventory_hostname) }}"

- name: Say how it went
  ansible.builtin.debug:
    msg: "{{ (gpu_nodes | gpufleet.nvidia.upgrade_progress(hostvars, 1)).lines }}"
"""

RETURN = r"""
_value:
  description: The upgrade's state.
  type: dict
  contains:
    batches:
      description: The batches.
      type: list
      elements: list
      sample: [[gpu-a], [gpu-b]]
    stopped:
      description: Where the upgrade stopped - C(host), C(batch), C(stage), C(task), C(msg) - or null.
      type: dict
      sample: {host: gpu-a, batch: 1, stage: drain, task: Evict the node's GPU pods, msg: "1 GPU pod still on the node after 900 s"}
    unfinished:
      description: The nodes that failed or did not finish.
      type: list
      elements: str
      sample: [gpu-a]
    nodes:
      description: Per node, C(batch), C(state), C(stage), C(msg).
      type: dict
      sample: {gpu-b: {batch: 2, state: not_started, stage: null, msg: "not started: the upgrade stopped at gpu-a: drain"}}
    counts:
      description: How many nodes are in each state.
      type: dict
      sample: {upgraded: 3, failed: 1, not_started: 4}
    lines:
      description: The summary, then one line per node, for a person.
      type: list
      elements: str
      sample: ["Driver upgrade to 580: 2 GPU nodes in 2 batches (1 at a time): 1 failed, 1 not started"]
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import plain
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.common import hostvars as hostvars_reader
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.upgrade import batches as upgrade
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

_KEYS = ("upgrade_result",)


def upgrade_progress(hosts, hostvars, serial, reached=None):
    hosts = [str(h) for h in hosts or []]
    data = hostvars_reader.host_data(hosts, hostvars, _KEYS)
    results = dict((h, data.get(h, {}).get("upgrade_result")) for h in hosts)
    if isinstance(reached, str):
        reached = str(reached) or None
    elif reached is not None:
        reached = int(reached)
    try:
        return upgrade.progress(hosts, plain(serial, unknown=str), results, reached=reached)
    except GpuFleetError as exc:
        raise AnsibleFilterError(exc.msg) from exc


class FilterModule(object):
    def filters(self):
        return {"upgrade_progress": upgrade_progress}
