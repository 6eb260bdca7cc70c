# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: fleet_report_html
short_description: Render the fleet report as one self-contained HTML page
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Renders the output of P(gpufleet.nvidia.fleet_report#filter) as an HTML page with no script
    and no external asset - the summary at the top, the cluster's state, a table with one
    coloured row per node (ok, drift, failed, no GPU, not validated; the driver cell gives each
    driver branch's type and end of life, a branch past it or not in the table marked, and the
    modules' flavour, C(unknown) with why where it could not be read; a column gives the node's
    day-2 guards, each with its status), the fleet's driver branches with their hosts, and what
    was not checked. Long reasons wrap in their cells.
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

from ansible_collections.gpufleet.nvidia.plugins.module_utils.report import fleet as fleet_report


def fleet_report_html(report):
    return fleet_report.render_html(fleet_report.plain(report))


class FilterModule(object):
    def filters(self):
        return {"fleet_report_html": fleet_report_html}
