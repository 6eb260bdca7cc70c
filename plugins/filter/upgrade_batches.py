# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: upgrade_batches
short_description: Cut hosts into batches exactly as a play's serial keyword cuts them
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Used by the C(gpufleet.nvidia.upgrade) role to show, before the upgrade starts, which GPU
    nodes go together. Returns the batches Ansible runs for a play over the same hosts with
    C(serial) set to O(serial) - a number, a percentage of the hosts, or a list of them whose last
    entry repeats; a size of 0 or less takes every remaining host.
  - Fails, naming the value, when O(serial) is not a batch size (a boolean, a word, V(2.5%)).
positional: serial
options:
  _input:
    description: The hosts in play order (C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
  serial:
    description: The batch size, as C(serial) takes it (V(1), V(25%), V([1, 25%])).
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Show the batches
  ansible.builtin.debug:
    msg: "{{ ansible_play_hosts_all | gpufleet.nvidia.upgrade_batches([1, '50%']) }}"
"""

RETURN = r"""
_value:
  description: The batches, in order, each a list of hosts.
  type: list
  elements: list
  sample: [[gpu-a], [gpu-b, gpu-c], [gpu-d]]
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import plain
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.upgrade import batches as upgrade
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


def upgrade_batches(hosts, serial):
    try:
        return upgrade.batches([str(h) for h in hosts or []], plain(serial, unknown=str))
    except GpuFleetError as exc:
        raise AnsibleFilterError(exc.msg) from exc


class FilterModule(object):
    def filters(self):
        return {"upgrade_batches": upgrade_batches}
