#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: preflight
short_description: Check, before changing anything, that the declared NVIDIA stack can work on a host
version_added: 0.1.0
description:
  - Compares the desired driver, CUDA versions and container runtime with the host's
    C(gpufleet_nvidia) facts and reports every problem at once, each with its rule, severity
    (C(blocking) or C(warning)), message, reason and fix.
  - Fails, naming every blocking problem, when a blocking problem remains that O(waive) does not
    accept. Warnings never fail it.
  - On a host without NVIDIA GPUs the rules about GPUs (C(gpu_open_modules), C(gpu_driver_branch),
    C(nouveau)) are skipped and the desired state itself is still checked; the message starts with
    C(no NVIDIA GPU on this host). The P(gpufleet.nvidia.discover#role) role runs preflight on GPU nodes only.
  - "Rules: C(driver_version_format), C(cuda_version_format) (malformed input), C(os_supported)
    (package method on Debian 12/13, Ubuntu 22.04/24.04, RHEL/Rocky/AlmaLinux 8/9/10),
    C(driver_missing) and C(driver_drift) (preinstalled method), C(driver_not_package_owned)
    (package method over a driver from elsewhere; operator method over a host driver, blocking),
    C(operator_driver) (the GPU Operator's driver container on a node prepared on the host: a warning,
    the cluster layer moves it off first), C(gpu_open_modules) (open modules need Turing
    or newer; Blackwell and Grace Hopper need them), C(gpu_driver_branch) (Maxwell, Pascal and
    Volta end with R580, Kepler with R470; Hopper needs R525, H200 R550, Blackwell R570,
    HGX B200 570.133.20), C(cuda_driver) (CUDA minimum driver; only the CUDA major's family
    minimum met is a warning, below it blocking), C(gpu_cuda) (CUDA 13 and newer on Maxwell,
    Pascal or Volta GPUs, whose last toolkit is CUDA 12.x), C(driver_lifecycle) (see below), C(nouveau), C(secure_boot) (DKMS-built modules
    need a MOK key unless Ubuntu's precompiled signed modules apply), C(kernel_headers) (DKMS on
    Debian and RHEL), C(containerd_cri) (CRI plugin disabled), C(container_runtime) (runtime not
    found), C(fabric_manager_missing) and C(fabric_manager_version) (hosts with NVSwitches, see
    below), C(security_floor) (see below)."
  - "On a host with NVSwitches (HGX / DGX boards), NVIDIA's fabric manager must run at exactly the
    driver's version, or CUDA fails to initialise on every GPU. C(fabric_manager_missing) is
    blocking with O(driver_method=preinstalled) when no fabric manager is installed (nothing would
    install one), a warning when it is installed but its C(nvidia-fabricmanager) service is not
    active, and a warning with O(driver_method=package) on Debian, whose archive does not package
    it. C(fabric_manager_version) is blocking with O(driver_method=preinstalled) when the
    installed fabric manager is not the installed driver's version (it refuses to start), and a
    warning with O(driver_method=package), whose driver role moves the fabric manager with the
    driver. Both are skipped without NVSwitches, with O(driver_method=operator), and on facts
    that do not report NVSwitches."
  - "C(driver_lifecycle) judges the declared driver's branch, and with O(driver_method=preinstalled)
    the installed one's, against the collection's table of NVIDIA data-center driver branches
    (type and end of life, C(plugins/module_utils/common/lifecycle.py)) on O(today). A branch
    past its end of life is a warning, or blocking with O(driver_lifecycle=fail); a branch not
    in the table is a warning that says so. Every branch judged is in RV(lifecycle)."
  - "C(security_floor) judges the declared driver release (a branch alone installs its newest)
    and with O(driver_method=preinstalled) the installed one, the declared (O(toolkit_version))
    else the installed Container Toolkit, and the installed containerd against the collection's table of security floors
    (C(plugins/module_utils/common/security.py)) on O(today): a driver below its branch's floor
    in NVIDIA's driver bulletins, a toolkit below NVIDIA's toolkit bulletins' floor, a containerd
    line past its end of life, and containerd 1.x under O(kubernetes_version) 1.36 or later. Each
    problem names the bulletin and the version that fixes it; a warning, or blocking with
    O(security_floors=fail). Every subject judged is in RV(security)."
  - "C(driver_flavor=auto) resolves as the driver role installs: the open modules where a GPU
    needs them (Blackwell, Grace Hopper), the proprietary ones where a GPU is older than Turing,
    else NVIDIA's default of the declared branch (open from R560, proprietary before)."
  - Each warning that is not waived is also given to Ansible as a warning of the task, so the
    run's output shows it.
author:
  - gpufleet.nvidia maintainers (@gpufleet)
options:
  driver_version:
    description:
      - The driver branch (V(580)) or release (V(580.95.05)) to install, or, with
        O(driver_method=preinstalled), the one expected. Quote it in YAML (V("580.10") would
        otherwise become the number 580.1).
      - Required when O(driver_method=package).
    type: str
  driver_flavor:
    description:
      - Kernel module flavour. V(auto) picks V(open) where a GPU needs it or the branch is R560 or
        newer, V(proprietary) where a GPU is older than Turing or the branch older than R560.
      - With O(driver_method=preinstalled) the loaded flavour is checked; a declared one that differs
        is reported as drift.
    type: str
    choices: [open, proprietary, auto]
    default: auto
  driver_method:
    description:
      - V(package) installs the driver from the distribution's or NVIDIA's packages.
      - V(preinstalled) keeps the driver that is on the host (an image, a .run file) and checks it.
      - V(operator) leaves the driver to the GPU Operator's driver container. The host should have no
        driver of its own (a present one is a warning, since the operator would use it instead) and
        no nouveau; no DKMS build happens on the host.
    type: str
    choices: [package, preinstalled, operator]
    default: package
  cuda_versions:
    description:
      - CUDA releases the host's workloads are built with (V(12.4), V(12.4.1) for Update 1, V(13.0)).
        The driver compared is O(driver_version) with O(driver_method=package), the installed one with
        O(driver_method=preinstalled).
    type: list
    elements: str
    default: []
  container_runtime:
    description:
      - The container runtime that the NVIDIA runtime goes into; V(none) skips the runtime checks.
    type: str
    choices: [containerd, crio, docker, k3s, rke2, none]
    default: containerd
  waive:
    description:
      - Rule ids whose problems the user accepts. Waived problems stay in RV(problems) with
        C(waived=true) and their reason, but never fail the module.
    type: list
    elements: str
    choices: [driver_version_format, cuda_version_format, os_supported, driver_missing,
              driver_not_package_owned, driver_drift, operator_driver, gpu_open_modules, gpu_driver_branch,
              cuda_driver, gpu_cuda, driver_lifecycle, nouveau, secure_boot, kernel_headers,
              containerd_cri, container_runtime, fabric_manager_missing, fabric_manager_version,
              security_floor, next_boot_module, driver_library_mismatch, nvml_reload_exposure]
    default: []
  driver_lifecycle:
    description:
      - What a driver branch past its end of life is, in the C(driver_lifecycle) rule -
        V(warn) a warning, V(fail) a blocking problem. A branch not in the table is a warning
        either way.
    type: str
    choices: [warn, fail]
    default: warn
  security_floors:
    description:
      - What a version below a security floor is, in the C(security_floor) rule - V(warn) a
        warning, V(fail) a blocking problem.
    type: str
    choices: [warn, fail]
    default: warn
  toolkit_version:
    description:
      - The Container Toolkit version the toolkit role installs (V(1.20.0-1)), judged by
        C(security_floor) instead of the installed one.
      - Omitted, the installed toolkit is judged.
    type: str
  kubernetes_version:
    description:
      - The cluster's Kubernetes version (V(1.36.2)), for the C(security_floor) rule's pairing of
        Kubernetes and containerd (containerd 1.x is not supported from Kubernetes 1.36 on).
      - Omitted, the pairing is not judged.
    type: str
  today:
    description:
      - The date the branches' end of life, the bulletins and the runtime lines' end of life are
        compared with, as V(YYYY-MM-DD).
      - Defaults to the date (UTC) on the machine that runs the check - the control host when
        O(facts) is given, else the node.
    type: str
  facts:
    description:
      - A C(gpufleet_nvidia) facts dict from M(gpufleet.nvidia.gpu_facts). When omitted, the module
        gathers the facts itself, reading under O(host_root).
    type: dict
  host_root:
    description:
      - Where the host's root file system is when the module gathers the facts itself.
    type: path
    default: /
extends_documentation_fragment:
  - gpufleet.nvidia.attributes.read_only
seealso:
  - module: gpufleet.nvidia.gpu_facts
"""

EXAMPLES = r"""
- name: Check that driver 580 from packages suits the host and CUDA 12.4 and 13.0
  gpufleet.nvidia.preflight:
    driver_version: "580"
    driver_method: package
    cuda_versions: ["12.4", "13.0"]
    container_runtime: containerd

- name: Check a pre-installed driver against the gathered facts, accepting a drifted version
  gpufleet.nvidia.preflight:
    driver_version: "570"
    driver_method: preinstalled
    cuda_versions: ["12.8"]
    container_runtime: k3s
    waive: [driver_drift]
    facts: "{{ ansible_facts.gpufleet_nvidia }}"
  register: preflight

- name: Refuse a driver branch past its end of life, as of a fixed date
  gpufleet.nvidia.preflight:
    driver_version: "595"
    driver_lifecycle: fail
    today: "2026-12-01"
    facts: "{{ ansible_facts.gpufleet_nvidia }}"

- name: Show the warnings
  ansible.builtin.debug:
    msg: "{{ preflight.problems | selectattr('severity', 'eq', 'warning') | map(attribute='message') }}"
"""

RETURN = r"""
msg:
  description: A summary, or on failure every blocking problem as C([rule] message).
  returned: always
  type: str
  sample: "1 GPU: 0 blocking, 1 warning, 0 waived"
ok:
  description: Whether no blocking problem remains after O(waive).
  returned: always
  type: bool
  sample: true
gpu_count:
  description: Number of NVIDIA GPUs checked.
  returned: always
  type: int
  sample: 1
problems:
  description: Every problem found, in rule order.
  returned: always
  type: list
  elements: dict
  contains:
    rule:
      description: The rule's id (see O(waive)).
      type: str
      sample: cuda_driver
    severity:
      description: V(blocking) or V(warning).
      type: str
      sample: warning
    message:
      description: What is wrong, with the values involved.
      type: str
      sample: >-
        CUDA 12.4 asks for driver 550.54.14; driver_version 550.40.07 is older and runs it only
        through minor-version compatibility
    reason:
      description: Why it matters.
      type: str
      sample: >-
        Minor-version compatibility runs applications built with a newer CUDA 12.x, but not those
        that need PTX JIT compilation or features of the newer driver.
    fix:
      description: What to do about it.
      type: str
      sample: Set driver_version to 550.54.14 or newer for full support.
    waived:
      description: Whether O(waive) accepts it.
      type: bool
      sample: false
  sample:
    - rule: driver_drift
      severity: warning
      message: "the pre-installed driver has drifted from the declared one: version 580.159.04, declared 570"
      reason: The fleet no longer runs the driver its inventory says; CUDA and GPU checks use the installed one.
      fix: Update the host's image or driver, or change driver_version / driver_flavor to what is installed.
      waived: true
checks:
  description:
    - Every rule by id, with its C(outcome) (C(pass), C(skipped), C(waived), C(warning) or
      C(blocking)) and a C(detail).
  returned: always
  type: dict
  sample:
    cuda_driver: {outcome: pass, detail: CUDA 13.0 needs 580.65.06}
    kernel_headers: {outcome: skipped, detail: driver_method preinstalled builds nothing}
blocking_count:
  description: Number of blocking problems not waived.
  returned: always
  type: int
  sample: 0
warning_count:
  description:
    - Number of warnings not waived. (Not C(warnings), which Ansible reserves for its own list of
      warning messages.)
  returned: always
  type: int
  sample: 1
resolved:
  description:
    - What the checks used. C(driver_flavor) is the flavour O(driver_flavor=auto) resolved to (or the
      installed one); C(driver_version) the version compared and C(driver_version_source)
      V(declared) or V(installed).
  returned: always
  type: dict
  sample: {driver_method: preinstalled, driver_flavor: open, driver_version: 580.159.04,
           driver_version_source: installed}
security:
  description:
    - What C(security_floor) judged, one entry a subject - C(of) V(declared) or V(installed),
      C(versions), C(state) (V(below), V(ok), V(not_judged)), C(bulletins) and C(findings), each
      with its C(kind) (V(driver), V(toolkit), V(runtime), V(pairing)), C(version), C(fixed) (the
      version that fixes it), C(bulletins), C(mitigation) and C(text).
  returned: always
  type: list
  elements: dict
  sample:
    - of: installed
      versions: ["580.159.04"]
      state: below
      bulletins: [nvidia-5861]
      text: "driver 580.159.04 is below R580's security floor 580.178.04: NVIDIA security bulletin 5861 (...)"
      findings:
        - kind: driver
          component: driver
          version: 580.159.04
          fixed: 580.178.04
          bulletins: [nvidia-5861]
          mitigation: null
          text: "driver 580.159.04 is below R580's security floor 580.178.04: NVIDIA security bulletin 5861 (...)"
lifecycle:
  description:
    - Each driver branch judged by C(driver_lifecycle) - the installed driver's
      (O(driver_method=preinstalled)) and the declared one's when its branch differs.
    - C(state) is V(supported), V(past), V(no_end_date) (a new-feature branch), V(unknown) (not
      in the table) or V(not_compared) (no date).
  returned: always
  type: list
  elements: dict
  sample:
    - of: declared
      version: "535"
      branch: 535
      name: R535
      known: true
      type: long-term support branch
      end_of_life: 2026-06
      end_of_life_text: June 2026
      state: past
      note: CUDA 12 at most
      text: "R535: long-term support branch, end of life June 2026 (past on 2026-12-01); CUDA 12 at most"
"""

import datetime

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import facts as gpu_facts
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import preflight
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


def main():
    module = AnsibleModule(
        argument_spec=preflight.ARGUMENT_SPEC,
        required_if=preflight.REQUIRED_IF,
        supports_check_mode=True,
    )
    params = module.params
    try:
        facts = params["facts"]
        if facts is None:
            facts = gpu_facts.gather_facts(Host.for_module(module, params["host_root"], 60))
        # the node's date: what the driver branches' end of life is compared with
        result = preflight.run(facts, params, datetime.datetime.now(datetime.timezone.utc).date())
    except GpuFleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    for line in preflight.warning_lines(result):
        module.warn(line)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
