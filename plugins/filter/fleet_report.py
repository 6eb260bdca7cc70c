# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: fleet_report
short_description: Build the fleet report, one row per node, from what a run gathered
version_added: 0.1.0
author: gpufleet.nvidia maintainers
description:
  - Builds the report the C(gpufleet.nvidia.report) role writes - run details, a summary (nodes,
    GPU nodes, GPUs, nodes without GPU and never read, and how many rows are ok, drifted, failed,
    with nothing to validate, not validated), the cluster's state, one row per host and plain
    statements of what was not checked and why.
  - C(summary.without_gpu) counts the nodes known to have no GPU (a node with GPUs and no driver has
    GPUs); C(summary.gpu_unknown) those never read, whose GPUs a row says are C(unknown (no facts)).
  - Each row's C(day2) lists its day-2 guards from its validation (C(kernel_next_boot),
    C(driver_libraries), C(nvml_reload), C(isolation), C(runtime_drift)), each with C(title),
    C(status) and C(msg); C(driver.flavor) is C(open), C(proprietary), or C(unknown) with
    C(driver.flavor_why) wherever a driver is there, null without one.
  - "Per host it reads, all optional: C(gpufleet_nvidia) (the facts of
    M(gpufleet.nvidia.gpu_facts), refreshed by M(gpufleet.nvidia.host_validate)),
    C(gpufleet_nvidia_validation) (M(gpufleet.nvidia.host_validate)'s result with the role's
    C(cluster_expect)), C(validate_cluster_verdict) (the validate role's cluster
    verdict), C(gpufleet_stopped_at) (where a playbook stopped on the host - a stage name or a
    dict with C(stage), C(task), C(msg)), and for hosts that were not validated the declared
    C(nvidia_driver_version), C(container_toolkit_version), C(container_toolkit_runtime) and
    C(gpufleet_sharing_config)."
  - A row's status is C(failed), C(drift), C(ok), C(no_gpu) (no GPU, nothing to validate) or
    C(not_validated) (no facts or no validation; the reason is given). Rows are sorted failed
    first.
  - Each row's C(driver.lifecycle) gives the type and end of life of its declared and installed
    driver branches from the collection's table of NVIDIA data-center branches, judged on
    O(today); a branch past its end of life has C(state=past), one not in the table
    C(state=unknown). The report's C(lifecycle) lists the fleet's branches with their hosts.
    Neither changes a row's status.
  - Each row's C(security) judges its installed (else loaded, else declared) driver, its installed
    Container Toolkit and containerd against the collection's table of security floors on
    O(today) (the pairing with the host's C(discover_kubernetes_version) where set); each finding
    names its bulletin and the version that fixes it. The report's C(security) lists the fleet's
    bulletins with the hosts below them. Neither changes a row's status.
  - Each row's C(layers) says what this run did on the node's driver, toolkit and runtime layers
    (from the roles' C(nvidia_driver_result) and C(container_toolkit_result)) - C(changed), C(msg),
    C(held) (C(held), C(locked), C(not held ...), C(not managed ...)) - and C(changed)
    names the layers changed (C(nothing), or null where no role ran); C(runtime.versions) the
    container runtimes' versions; C(fix) one line per cause of a state that is not ok, with what
    to run. The driver's flavour is the role's where the facts could not read it.
positional: hostvars
options:
  _input:
    description: The inventory names of the hosts to report on.
    type: list
    elements: str
    required: true
  hostvars:
    description: The variables of every host, normally C(hostvars).
    type: dict
    required: true
  generated_at:
    description: When the report was made (written as is).
    type: str
  today:
    description:
      - The date the driver branches' end of life is compared with, V(YYYY-MM-DD).
      - Defaults to the date O(generated_at) starts with; without either the branches are given
        their end of life but not compared (C(state=not_compared)).
    type: str
  run:
    description:
      - Details of the run shown at the top (C(check_mode), C(playbook), C(limit), C(ansible_version),
        C(duration_s), the run's length in seconds); C(collection_version) is the collection's own where not given.
      - C(notes), a list of strings, is shown as its own section at the top (what a lab lacks, for instance).
    type: dict
  title:
    description: The report's title.
    type: str
    default: GPU fleet report
"""

EXAMPLES = r"""
- name: Build the report of every host of the run
  ansible.builtin.set_fact:
    report: >-
      {{ groups['all'] | gpufleet.nvidia.fleet_report(hostvars, generated_at=now(utc=true).isoformat(),
         run={'check_mode': ansible_check_mode}) }}
"""

RETURN = r"""
_value:
  description: The report.
  type: dict
  contains:
    summary:
      description: Counts over the rows.
      type: dict
      sample: {nodes: 3, gpu_nodes: 1, without_gpu: 2, gpu_unknown: 0, gpus: 1, ok: 1, drifted: 0, failed: 0, no_gpu: 2,
               not_validated: 0}
    status:
      description: The fleet's status, C(failed), C(drift), C(not_validated) or C(ok).
      type: str
      sample: ok
    cluster:
      description: Whether the cluster was checked (or why not), the stack's pods and the CUDA pod.
      type: dict
      sample: {checked: false, reason: "no cluster: no kubeconfig (...)"}
    nodes:
      description: One row per host.
      type: list
      elements: dict
      sample: [{host: gpu-a, status: ok, gpus: {count: 1, text: 1 x NVIDIA H200}}]
    not_checked:
      description: What was not checked and why, each with the hosts it applies to.
      type: list
      elements: dict
      sample: [{msg: "no GPU: nothing to validate", hosts: [cpu-a, cpu-b]}]
    lifecycle:
      description: The fleet's driver branches (declared or installed), each with its state and hosts.
      type: list
      elements: dict
      sample:
        - branch: 535
          state: past
          msg: "R535: long-term support branch, end of life June 2026 (past on 2026-12-01); CUDA 12 at most"
          hosts: [lab-debian12]
    security:
      description: The bulletins the fleet's nodes are below, each with what it is, when it was published, where it
        was read and the hosts below it.
      type: list
      elements: dict
      sample:
        - bulletin: nvidia-5861
          msg: "NVIDIA security bulletin 5861 (GPU Display Driver, September 2026: CVE-2026-47587 and more)"
          published: "2026-09-30"
          source: https://github.com/NVIDIA/product-security/tree/main/2026/5861
          hosts: [gpu-h200-01]
"""

import json
import os

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import fleet


#: The collection's root: galaxy.yml in a source tree, MANIFEST.json in an installed collection.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def collection_version(root=COLLECTION_ROOT):
    """The version of the collection that runs, for the report's run details; None where unreadable."""
    try:
        with open(os.path.join(root, "MANIFEST.json"), encoding="utf-8") as handle:
            return json.load(handle)["collection_info"]["version"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        with open(os.path.join(root, "galaxy.yml"), encoding="utf-8") as handle:
            return next((line.split(":", 1)[1].strip().strip("\"'") for line in handle if line.startswith("version:")), None)
    except OSError:
        return None


def fleet_report(hosts, hostvars, generated_at=None, run=None, title=None, today=None):
    run = dict(run or {})
    run.setdefault("collection_version", collection_version())
    try:
        return fleet.build_report(list(hosts or []), hostvars, generated_at=generated_at, run=run, title=title, today=today)
    except GpuFleetError as exc:
        raise AnsibleFilterError("fleet_report: %s" % exc.msg)


class FilterModule(object):
    def filters(self):
        return {"fleet_report": fleet_report}
