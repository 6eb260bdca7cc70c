# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: validate_verdicts
short_description: Each node's validation verdict, and whether validate_fail_on fails it
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Used by the C(gpufleet.nvidia.validate) role, on one node (its assert) and once for every node
    (its C(fleet) entry point), in one pass over the hosts' variables.
  - "A node's status is the worst of its host checks (C(gpufleet_nvidia_validation)) and its node's
    cluster checks (O(cluster)'s C(nodes)) - C(failed), C(drift), C(ok), else C(skipped) - and its
    lines are C(<host>: <status>), then the failed, drifted and not checked messages."
  - C(validate_fail_on) V(failed) fails a node whose status is C(failed); V(drift) also one that drifted.
positional: hostvars, cluster, fail_on, read_fail_on
options:
  _input:
    description: The inventory names of the nodes.
    type: list
    elements: str
    required: true
  hostvars:
    description: The variables of every host, normally C(hostvars).
    type: dict
    required: true
  cluster:
    description: The validate role's cluster verdict (C(validate_cluster_verdict)); V({}) without one.
    type: dict
    required: true
  fail_on:
    description: C(validate_fail_on) - of every node, or with O(read_fail_on) of a node that sets none.
    type: str
    choices: [never, failed, drift]
    default: never
  read_fail_on:
    description: Take each node's own C(validate_fail_on) from O(hostvars) where it sets one.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Say what validation found on each node
  ansible.builtin.debug:
    msg: "{{ (ansible_play_hosts | gpufleet.nvidia.validate_verdicts(hostvars, validate_cluster_verdict)).values() | map(attribute='lines') | flatten }}"
"""

RETURN = r"""
_value:
  description: Per node, in the order given, its verdict.
  type: dict
  sample:
    gpu-a:
      status: drift
      lines: ["gpu-a: drift", "declared driver 575, loaded 580.159.04"]
      msg: "gpu-a: validation drift: declared driver 575, loaded 580.159.04"
      fails: false
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import plain
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.common import hostvars as hostvars_reader
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.validate import verdicts as node_verdicts


def validate_verdicts(hosts, hostvars, cluster, fail_on="never", read_fail_on=False):
    keys = ("gpufleet_nvidia_validation", "validate_fail_on") if read_fail_on else ("gpufleet_nvidia_validation",)
    data = hostvars_reader.host_data([str(h) for h in hosts or []], hostvars, keys)
    # only these hosts' node verdicts are read from the cluster's (one per host of the play): on one
    # node (the role's assert on every node), not a copy of the whole fleet's
    nodes = (cluster or {}).get("nodes") or {}
    cnodes = dict((host, plain(nodes.get(host) or {}, unknown=str)) for host in data)
    try:
        return node_verdicts.verdicts(data, cnodes, str(fail_on))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"validate_verdicts": validate_verdicts}
