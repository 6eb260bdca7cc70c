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
    status and counts (nodes with GPUs, without GPU, never read; the rows by status), the run's
    notes (the C(notes) of P(gpufleet.nvidia.fleet_report#filter)'s O(gpufleet.nvidia.fleet_report#filter:run)), the
    cluster's state and failures, the driver branches past their end of life or unknown, then one
    block per node (status, GPUs, driver with its flavour and branches, the day-2 guards, what
    drifted and what failed, the toolkit's and the runtimes' versions, the packages' held state,
    what this run changed, the fix of each state that is not ok) and what was not checked.
  - With O(summary_nodes), only the nodes that are not ok, the first O(summary_nodes) of them
    (failed first), and how many more - what the gpufleet.nvidia.report role prints at the end of a
    run (the whole text is its C(.txt) file); each note there is cut after its first sentence.
  - Long reasons are wrapped at 100 columns, never cut; a word longer than that (a path) stays whole.
options:
  _input:
    description: The report.
    type: dict
    required: true
  summary_nodes:
    description: Print only the nodes that are not ok, at most this many; all nodes when unset.
    type: int
  path:
    description: Where the whole report is, said at the end of the summary.
    type: str
"""

EXAMPLES = r"""
- name: Print the report
  ansible.builtin.debug:
    msg: "{{ (report | gpufleet.nvidia.fleet_report_text).splitlines() }}"

- name: Print the counts and the first 20 nodes that are not ok
  ansible.builtin.debug:
    msg: "{{ report | gpufleet.nvidia.fleet_report_text(summary_nodes=20, path='gpufleet-report/gpufleet-report.txt') }}"
"""

RETURN = r"""
_value:
  description: The text, lines ending in a newline.
  type: str
  sample: "GPU fleet report - generated 2026-12-01T10:00:00Z\nOK: 1 nodes, 1 with GPUs (1 GPUs), 0 without GPU: ...\n"
"""

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import plain
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import text


def fleet_report_text(report, summary_nodes=None, path=None):
    report = plain(report, unknown=str)
    if summary_nodes is None:
        return text.render_text(report)
    return text.render_summary(report, limit=int(summary_nodes), path=path)


class FilterModule(object):
    def filters(self):
        return {"fleet_report_text": fleet_report_text}
