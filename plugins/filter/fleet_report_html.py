# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: fleet_report_html
short_description: Render the fleet report as one self-contained HTML page
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Renders the output of P(gpufleet.nvidia.fleet_report#filter) as one self-contained HTML page
    (no external asset; its style and a short script inline) that reads at 8 nodes as at 10,000 -
    the run (collection version, duration, check mode, C(--limit)), the summary cards, the
    cluster's state, then the nodes grouped by status, the bad ones first, one compact line per
    node (status, host, OS, GPUs, driver, toolkit, what this run changed, the first reason) whose
    details fold out (every version, the flavour, the driver branches' end of life, the packages'
    held or locked state, the day-2 guards, the security floors, the fix of each state that is not
    ok), a search box and filters (status, OS, driver branch, GPU model, guard not ok); then the
    fleet's driver branches, its security floors and what was not checked.
  - Every value is HTML-escaped; the page is also well-formed XML.
options:
  _input:
    description: The report.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Write the report as HTML
  ansible.builtin.copy:
    content: "{{ report | gpufleet.nvidia.fleet_report_html }}"
    dest: /tmp/gpufleet-report.html
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The page.
  type: str
  sample: "<!DOCTYPE html>\n<html lang=\"en\">..."
"""

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import plain
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import html


def fleet_report_html(report):
    return html.render_html(plain(report, unknown=str))


class FilterModule(object):
    def filters(self):
        return {"fleet_report_html": fleet_report_html}
