# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: k8s_objects_to_write
short_description: The objects that differ from what the cluster holds
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - "Returns the objects of the input that the cluster lacks, or whose fields differ from the live
    object's (fields the server adds, and C(status), are not differences; lists must match element by
    element). Give only these to M(kubernetes.core.k8s): it sends a PATCH for every object it is
    given, an API write each run even when nothing differs."
positional: live
options:
  _input:
    description: The objects to apply.
    type: list
    elements: dict
    required: true
  live:
    description: The live objects, as M(kubernetes.core.k8s_info) returned them (C(resources), all of them in one list).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Apply only what differs
  kubernetes.core.k8s:
    definition: "{{ item }}"
  loop: "{{ objects | gpufleet.nvidia.k8s_objects_to_write(live.results | map(attribute='resources') | flatten) }}"
"""

RETURN = r"""
_value:
  description: The objects to write, in the input's order.
  type: list
  elements: dict
  sample:
    - {apiVersion: v1, kind: Namespace, metadata: {name: gpu-operator}}
"""

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.objects import objects_to_write


class FilterModule(object):
    def filters(self):
        return {"k8s_objects_to_write": objects_to_write}
