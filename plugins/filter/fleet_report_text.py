# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: fleet_report_text
short_description: Render the fleet report as plain text
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Renders the output of P(gpufleet.nvidia.fleet_report#filter) as plain text - the fleet's
    status and counts (nodes with GPUs, without GPU, never read; the rows by status), the
    cluster's state and failures, the driver branches past their end of life or unknown, then one
    block per node (status, GPUs, driver with its flavour and branches, the day-2 guards, what
    drifted and what failed) and what was not checked.
  - Long reasons are wrapped at 100 columns, never cut; a word longer than that (a path) stays whole.
  - The gpufleet.nvidia.report role prints it at the end of a run.
options:
  _input:
    description: The report.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Print the report
  ansible.builtin.debug:
    msg: "{{ (report | gpufleet.nvidia.fleet_report_text).splitlines() }}"
"""

RETURN = r"""
_value:
  description: The text, lines ending in a newline.
  type: str
  sample: "GPU fleet report - generated 2026-12-01T10:00:00Z\nOK: 1 nodes, 1 with GPUs (1 GPUs), 0 without GPU: ...\n"
"""

from ansible_collections.gpufleet.nvidia.plugins.module_utils.report import fleet as fleet_report


def fleet_report_text(report):
    return fleet_report.render_text(fleet_report.plain(report))


class FilterModule(object):
    def filters(self):
        return {"fleet_report_text": fleet_report_text}
