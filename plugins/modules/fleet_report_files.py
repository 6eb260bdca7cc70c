#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# Documentation only, as ansible.builtin.debug's: the action plugin of the same name does the work on
# the control host and accepts exactly the options documented here (it reads them from this file).

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_report_files
short_description: Write the fleet report as JSON, HTML, text, JUnit XML and Prometheus files on the control host
version_added: 0.1.0
description:
  - Writes O(report) (from the P(gpufleet.nvidia.fleet_report#filter) filter) as C(<path>.json),
    C(<path>.html) (the page), C(<path>.txt) (the whole report as text), C(<path>.junit.xml) (one
    test suite per node, one test case per check, for a CI system) and C(<path>.prom)
    (Prometheus' text format - per-node status, guard states, held packages and versions, for
    node_exporter's textfile collector), on the control host, by the controller itself (an action plugin, no
    module is sent anywhere). Each file is written beside its target and renamed into place; an
    unchanged file is left as it is.
  - The report is the run's output, not state of the fleet, so the module never reports a
    change and writes in check mode too.
author:
  - gpufleet.nvidia maintainers (@gpufleet)
options:
  report:
    description: The report.
    type: dict
    required: true
  path:
    description: The files' path without extension; a missing directory is created.
    type: path
    required: true
  formats:
    description: Which files.
    type: list
    elements: str
    choices: [html, json, junit, prom, txt]
    default: [json, html, txt, junit, prom]
  mode:
    description: The files' mode.
    type: str
    default: "0644"
attributes:
  action:
    description: Runs on the control host, as an action plugin.
    support: full
  check_mode:
    description: Writes the report in check mode too (it is the run's output).
    support: full
  diff_mode:
    description: No diff.
    support: none
  platform:
    description: The control host.
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Write the report
  gpufleet.nvidia.fleet_report_files:
    report: "{{ groups['all'] | gpufleet.nvidia.fleet_report(hostvars) }}"
    path: gpufleet-report/gpufleet-report
"""

RETURN = r"""
files:
  description: The report's files.
  type: list
  elements: str
  returned: success
  sample: [gpufleet-report/gpufleet-report.json, gpufleet-report/gpufleet-report.html]
written:
  description: Those that were (re)written.
  type: list
  elements: str
  returned: success
  sample: [gpufleet-report/gpufleet-report.json]
unchanged:
  description: Those that already held the same report.
  type: list
  elements: str
  returned: success
  sample: [gpufleet-report/gpufleet-report.html]
"""
