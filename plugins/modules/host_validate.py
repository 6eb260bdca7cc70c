#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_validate
short_description: Check on a node what NVIDIA's validator checks, in one read-only pass
version_added: 0.1.0
description:
  - Gathers fresh C(gpufleet_nvidia) facts (as M(gpufleet.nvidia.gpu_facts) does) and checks, in
    one round trip, what the GPU Operator's validator checks on a node, plus the declared state.
  - "C(gpus) - the node has O(gpu_count) GPUs when that is set. A node without GPU and with none
    declared has nothing to validate and says so (C(no GPU: nothing to validate)), unless
    O(prepared_without_gpu) is set: then the driver on disk (against O(driver_version)), the
    toolkit and the runtime handler are checked, and the checks that need a GPU say why they
    were not run."
  - C(driver) - C(nvidia-smi) answers, sees every GPU of the PCI bus, and the loaded kernel module
    is the version of nvidia-smi's libraries. C(driver_version) - the loaded driver is
    O(driver_version) (a branch matches any of its releases); a difference is drift.
    C(driver_installed) - the driver on disk (C(modinfo)) is the loaded one; otherwise a reboot
    is due (drift).
  - C(toolkit_version) - the NVIDIA Container Toolkit is O(toolkit_version), when set.
  - C(runtime) - the container runtime has a handler named O(runtime_handler) that runs
    C(nvidia-container-runtime), and that binary exists. containerd is read through
    C(containerd --config /etc/containerd/config.toml config dump), so imports and drop-ins count
    as containerd merges them, and a config containerd cannot load fails the check; a disabled
    CRI plugin fails it too. k3s and RKE2 are read from their generated C(config.toml) (through
    their bundled containerd when present), CRI-O from C(crio.conf) and C(crio.conf.d), Docker
    from C(daemon.json).
  - C(cdi) - when CDI is enabled (O(cdi=enabled), C(enable_cdi = true) in containerd's config,
    C(features.cdi) in C(daemon.json), C(mode = "cdi") in the toolkit's config, or a spec of kind
    C(nvidia.com/gpu) in O(cdi_spec_dirs)), a spec of kind C(nvidia.com/gpu) exists, parses, names
    every GPU (by index or UUID) and was written for the loaded driver.
  - C(cuda) - with O(cuda_test) and C(nvcc) on the node, a vector-add CUDA program is built in a
    temporary folder under C(/tmp), run on every GPU, and must print C(Test PASSED); the folder is
    removed. Without nvcc, or when nvcc cannot build it, the check is not run and says why.
  - C(kernel_next_boot) - the kernel the node boots next (as C(gpufleet_nvidia.kernels) reads it)
    has an nvidia module of the driver's version; drift otherwise, with the fix (its headers for
    DKMS, the precompiled package, or another boot default). Not checked where the next boot
    kernel cannot be read on the node.
  - C(driver_libraries) - the loaded nvidia module is the version of the user-space libraries and
    driver packages on disk; failed otherwise, with the fix (reload where no process holds the
    GPU, else reboot).
  - C(nvml_reload) - the node is not exposed to losing NVML in running containers after
    C(systemctl daemon-reload) (drift where it is, with the fix). With O(nvml_reload_test) it is
    proven instead - on a node with a GPU, systemd and Docker or ctr, a container of
    O(nvml_reload_test_image) is started with the nvidia runtime, C(systemctl daemon-reload) run,
    and C(nvidia-smi -L) asked in the container again; the container is removed.
  - C(runtime_drift) - every setting that M(gpufleet.nvidia.container_runtime) recorded in
    containerd's config and drop-ins, CRI-O's drop-ins and the k3s / RKE2 templates still holds
    the value it wrote; drift otherwise, and the check carries a C(diff) (C(-) as written, C(+) now).
  - C(isolation) - where the node isolates unprivileged containers (O(isolate_unprivileged)), the
    toolkit's C(/etc/nvidia-container-runtime/config.toml) has
    C(accept-nvidia-visible-devices-envvar-when-unprivileged = false) and
    C(accept-nvidia-visible-devices-as-volume-mounts = true) (a key not in the file counts as the
    toolkit's default, C(true) and C(false)); drift otherwise - an unprivileged container can take
    any GPU by setting C(NVIDIA_VISIBLE_DEVICES) - with the fix. Not checked on a node without
    the toolkit; a file that does not parse fails it.
  - Each check ends in C(ok), C(drift), C(failed) or C(skipped) with a message; the node's
    C(status) is the worst. The module fails only on bad arguments, never because of the node's
    state; the caller decides what a failed check means.
author:
  - gpufleet.nvidia maintainers (@gpufleet)
options:
  gpu_count:
    description:
      - The number of GPUs the node must have. Unset, the GPUs found are taken as they are, and a
        node without GPU has nothing to validate.
    type: int
  prepared_without_gpu:
    description:
      - The node was prepared by the host layers although it has no GPU (a node image built
        without one, the local lab). Without a GPU it then checks what is installed and
        configured (the driver package's version, the toolkit, the runtime handler) instead of
        nothing.
    type: bool
    default: false
  driver_version:
    description:
      - The declared driver, a branch (V(580)) or a release (V(580.95.05)). Empty skips the
        comparison.
    type: str
    default: ""
  driver_method:
    description:
      - How the driver is installed. With V(operator) the GPU Operator runs the driver in a
        container, and the host driver checks and the CUDA test are skipped.
    type: str
    choices: [package, preinstalled, operator]
    default: package
  toolkit_version:
    description:
      - The declared NVIDIA Container Toolkit version (V(1.17.8)); the installed package's
        upstream version must be it or start with it. Empty skips the comparison.
    type: str
    default: ""
  container_runtime:
    description:
      - The container runtime whose handler is checked; V(none) skips the runtime check.
    type: str
    choices: [containerd, crio, docker, k3s, rke2, none]
    default: containerd
  runtime_handler:
    description:
      - The handler's name (what a Kubernetes C(RuntimeClass) names as C(handler)).
    type: str
    default: nvidia
  cdi:
    description:
      - V(auto) checks the CDI spec when something enables CDI (see the description);
        V(enabled) always checks it; V(disabled) never does.
    type: str
    choices: [auto, enabled, disabled]
    default: auto
  cdi_spec_dirs:
    description:
      - Where CDI specs are looked for.
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  cuda_test:
    description:
      - Build and run the CUDA vector-add test when C(nvcc) is found.
    type: bool
    default: true
  nvml_reload_test:
    description:
      - Prove the C(nvml_reload) check by reloading systemd (C(systemctl daemon-reload)) while a GPU
        container runs. Intrusive - off by default; where it cannot run the check says why.
    type: bool
    default: false
  nvml_reload_test_image:
    description:
      - The image of the O(nvml_reload_test) container; it must have C(sleep), and C(nvidia-smi)
        comes from the runtime. Docker pulls it when absent; for ctr it must already be in the
        C(gpufleet) namespace.
    type: str
    default: ""
  isolate_unprivileged:
    description:
      - Whether the node is declared to isolate unprivileged containers from GPUs they were not
        given (the container_toolkit role's C(container_toolkit_isolate_unprivileged)). Unset,
        that role's default rule - V(true) except with O(container_runtime=docker).
      - V(false) checks nothing against the file (the toolkit role then leaves what the site had),
        and says what the file does.
    type: bool
  nvcc_path:
    description:
      - The C(nvcc) to build the test with. Default C(nvcc) from C(PATH) or C(/usr/local/cuda/bin).
    type: path
  cuda_test_timeout:
    description:
      - Seconds after which building, and then running, the CUDA test is abandoned.
    type: int
    default: 180
  command_timeout:
    description:
      - Seconds after which any other command (C(nvidia-smi), C(containerd config dump), a
        C(--version)) is abandoned and reported.
    type: int
    default: 60
  host_root:
    description:
      - Where the host's root file system is, for a host mounted into a container; commands then
        run through C(chroot host_root).
    type: path
    default: /
  cluster_expect:
    description:
      - What the cluster should show for this node, returned as is in RV(validation.cluster_expect)
        for the cluster checks and the fleet report that run later from the control host - the
        C(node) name, the sharing C(replicas), the GPU C(resource), the C(sharing_config) and the
        expected C(labels). Nothing on the node is checked against it.
    type: dict
    default: {}
extends_documentation_fragment:
  - gpufleet.nvidia.attributes.read_only
notes:
  - Nothing on the node is changed, in check mode or not; the CUDA test's temporary folder is removed.
  - The fresh facts replace the C(gpufleet_nvidia) fact, so what runs after (the fleet report)
    sees the node as it is at the end of the run.
  - TOML is read with Python's C(tomllib) (or C(tomli)) where the node has it, else with a reader
    of the subset runtime configs use; CDI specs in YAML with PyYAML where the node has it, else
    with a reader of the block style that C(nvidia-ctk) and M(gpufleet.nvidia.cdi_spec) write.
seealso:
  - module: gpufleet.nvidia.gpu_facts
  - name: GPU Operator validator
    description: The checks this module follows (driver, toolkit, CUDA, plugin).
    link: https://github.com/NVIDIA/gpu-operator/tree/main/validator
"""

EXAMPLES = r"""
- name: Validate a node against its declared driver branch
  gpufleet.nvidia.host_validate:
    driver_version: "580"
    container_runtime: containerd
  register: check

- name: Say what failed
  ansible.builtin.debug:
    msg: "{{ check.validation.failed }}"
  when: check.validation.status == 'failed'

- name: A node that must have eight GPUs, CDI required, no CUDA test
  gpufleet.nvidia.host_validate:
    gpu_count: 8
    cdi: enabled
    cuda_test: false
"""

RETURN = r"""
validation:
  description:
    - The node's checks, also set as the C(gpufleet_nvidia_validation) host fact.
  returned: always
  type: dict
  contains:
    schema:
      description: Version of this dict's layout.
      type: int
      returned: always
      sample: 1
    status:
      description: The worst check; C(skipped) when nothing was checked (a node without GPU).
      type: str
      returned: always
      sample: ok
    summary:
      description: One line about the node.
      type: str
      returned: always
      sample: "ok: 4 ok, 0 drifted, 0 failed, 3 not checked"
    gpu_count:
      description: GPUs on the PCI bus.
      type: int
      returned: always
      sample: 1
    declared:
      description:
        - What the node was checked against; C(isolate_unprivileged) is O(isolate_unprivileged), or
          its default rule's answer where unset.
      type: dict
      returned: always
      sample: {driver_version: "580", driver_method: preinstalled, toolkit_version: null,
               container_runtime: none, runtime_handler: nvidia, gpu_count: null, isolate_unprivileged: true}
    driver:
      description: The loaded driver, the one on disk, nvidia-smi's and the CUDA version it reports.
      type: dict
      returned: always
      sample: {loaded: 580.159.04, installed: 580.159.04, nvidia_smi: 580.159.04, cuda: "13.0"}
    toolkit:
      description: The installed NVIDIA Container Toolkit version.
      type: dict
      returned: always
      sample: {installed: 1.17.8-1}
    runtime:
      description:
        - The runtime checked, the handler, whether it is there and runs nvidia-container-runtime
          (null when not checked), where that was read, and the runtime's default handler.
      type: dict
      returned: always
      sample: {name: containerd, handler: nvidia, present: true,
               source: /usr/bin/containerd --config /etc/containerd/config.toml config dump,
               default_runtime: runc}
    cdi:
      description: Whether CDI is enabled and why, and the specs of kind C(nvidia.com/gpu) read.
      type: dict
      returned: always
      sample:
        enabled: true
        why: ["containerd enables CDI"]
        specs: [{path: /etc/cdi/nvidia.yaml, kind: nvidia.com/gpu, devices: ["0", "all"],
                 driver_version: 580.159.04, error: null}]
    cuda:
      description: Whether the CUDA test ran and passed, the nvcc used, and the end of its output.
      type: dict
      returned: always
      sample: {ran: true, passed: true, nvcc: /usr/local/cuda/bin/nvcc,
               output: "[Vector addition of 50000 elements on 1 device(s)]\ndevice 0 (NVIDIA H200): 50000 elements added\nTest PASSED"}
    checks:
      description: Every check, in order, with C(name), C(status) and C(msg); a drifted C(runtime_drift) also has C(diff).
      type: list
      elements: dict
      returned: always
      sample:
        - {name: gpus, status: ok, msg: 1 NVIDIA GPU on the PCI bus}
        - {name: driver, status: ok, msg: "nvidia-smi answers: driver 580.159.04, CUDA 13.0, 1 GPU"}
    failed:
      description: The messages of the failed checks.
      type: list
      elements: str
      returned: always
      sample: ["containerd has no runtime handler 'nvidia' (...)"]
    drifted:
      description: The messages of the drifted checks.
      type: list
      elements: str
      returned: always
      sample: ["declared driver 575, loaded 580.159.04"]
    not_checked:
      description: What was not checked, and why.
      type: list
      elements: str
      returned: always
      sample: ["CUDA vectorAdd on the host: not run: no nvcc on the node (install the CUDA toolkit to run it)"]
    cluster_expect:
      description: O(cluster_expect), as given.
      type: dict
      returned: always
      sample: {node: gpu-a, replicas: 4, resource: nvidia.com/gpu, sharing_config: ts-4,
               labels: {nvidia.com/gpu.present: "true"}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate import host as host_validate
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host


def main():
    module = AnsibleModule(argument_spec=host_validate.ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    try:
        validation, facts = host_validate.validate_node(
            Host.for_module(module, params["host_root"], params["command_timeout"]), params)
    except GpuFleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    module.exit_json(changed=False, validation=validation,
                     ansible_facts={"gpufleet_nvidia": facts, "gpufleet_nvidia_validation": validation})


if __name__ == "__main__":
    main()
