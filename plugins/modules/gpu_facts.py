#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Discover a host's NVIDIA GPUs, driver, container stack, OS and kernel
version_added: 0.1.0
description:
  - Reads, without changing anything, what the rest of the collection needs to know about a host
    and returns it as the C(gpufleet_nvidia) fact. Only with O(local_facts_dir) does it write, and
    only its local fact file.
  - GPUs and NVSwitches come from sysfs (C(/sys/bus/pci/devices)), named from the host's C(pci.ids)
    or, without one, from a table of data-center GPUs in the collection.
  - The driver is described from C(/proc/modules), C(/proc/driver/nvidia/version),
    C(/sys/module/nvidia/version), C(modinfo nvidia) and one C(nvidia-smi -q -x); where it came
    from is the package owning C(nvidia-smi) or C(libcuda.so.1) (dpkg file lists read directly,
    or C(rpm -qf)), else C(preinstalled), else C(absent).
  - Built to run daily on thousands of nodes, it reads files wherever it can and runs a command
    only for a binary that exists. Every probe that fails (no C(nvidia-smi), C(nvidia-smi) failing
    to reach the driver, an unreadable file, bad XML or TOML) is reported under C(probes) with
    its state and detail; the module itself does not fail because of the host's state.
  - No file of the host can hang it or exhaust its memory, nor lead it out of O(host_root) - only
    regular files are read (a FIFO, a device or a socket where a file is expected is an error
    probe), 16 MiB at most (1 MiB of a C(/proc) or C(/sys) file), and every link is followed
    inside O(host_root). A damaged C(pci.ids.gz), or an installed package without a version in
    the dpkg database (left out of the packages), is an error probe too.
author:
  - gpufleet.nvidia maintainers (@gpufleet)
options:
  host_root:
    description:
      - Where the host's root file system is, for a host mounted into a container.
      - When not C(/), files are read under it and commands run through C(chroot host_root).
        C(/proc) and C(/sys) are read under it when it has them, else from this machine (the
        same kernel).
    type: path
    default: /
  command_timeout:
    description:
      - Seconds after which a command (C(nvidia-smi), C(modinfo), a C(--version)) is killed, with
        every process it started, and reported as an error probe.
    type: int
    default: 60
  validate:
    description:
      - Also validate the node, in the same pass, as M(gpufleet.nvidia.host_validate) does with
        these options (its options but O(host_root) and O(command_timeout), which are this
        module's), and set the validation as the C(gpufleet_nvidia_validation) host fact, as
        M(gpufleet.nvidia.host_validate) does.
      - Unset, nothing is validated. The site playbook sets it at discovery, with the validate
        role's options, and validates again only the nodes that a host layer changed, so that a
        run that changes nothing reads each node once.
    type: dict
    suboptions:
      gpu_count:
        description: See M(gpufleet.nvidia.host_validate).
        type: int
      driver_version:
        description: See M(gpufleet.nvidia.host_validate).
        type: str
        default: ""
      driver_method:
        description: See M(gpufleet.nvidia.host_validate).
        type: str
        choices: [package, preinstalled, operator]
        default: package
      toolkit_version:
        description: See M(gpufleet.nvidia.host_validate).
        type: str
        default: ""
      container_runtime:
        description: See M(gpufleet.nvidia.host_validate).
        type: str
        choices: [containerd, crio, docker, k3s, rke2, none]
        default: containerd
      runtime_handler:
        description: See M(gpufleet.nvidia.host_validate).
        type: str
        default: nvidia
      cdi:
        description: See M(gpufleet.nvidia.host_validate).
        type: str
        choices: [auto, enabled, disabled]
        default: auto
      cdi_spec_dirs:
        description: See M(gpufleet.nvidia.host_validate).
        type: list
        elements: path
        default: [/etc/cdi, /var/run/cdi]
      cuda_test:
        description: See M(gpufleet.nvidia.host_validate).
        type: bool
        default: true
      nvml_reload_test:
        description: See M(gpufleet.nvidia.host_validate).
        type: bool
        default: false
      nvml_reload_test_image:
        description: See M(gpufleet.nvidia.host_validate).
        type: str
        default: ""
      prepared_without_gpu:
        description: See M(gpufleet.nvidia.host_validate).
        type: bool
        default: false
      nvcc_path:
        description: See M(gpufleet.nvidia.host_validate).
        type: path
      cuda_test_timeout:
        description: See M(gpufleet.nvidia.host_validate).
        type: int
        default: 180
      isolate_unprivileged:
        description: See M(gpufleet.nvidia.host_validate).
        type: bool
      cluster_expect:
        description: See M(gpufleet.nvidia.host_validate).
        type: dict
        default: {}
  roles:
    description:
      - Check these roles' variables first, on the control host, as M(gpufleet.nvidia.role_arguments)
        does (their C(main) entry point); a wrong variable fails the task before the node is read.
      - The site playbook checks its four host roles here, so that discovery costs a node one task.
    type: list
    elements: str
  preflight:
    description:
      - After discovery, judge the facts on the control host with these options of
        M(gpufleet.nvidia.preflight) (every option but O(gpufleet.nvidia.preflight#module:facts) and
        O(gpufleet.nvidia.preflight#module:host_root)), and fail the task with preflight's message when
        it blocks. Its result is RV(preflight); its warnings are the task's.
      - Judged on a node with GPUs only, unless O(preflight_without_gpu).
      - A failed preflight returns the facts in its result, which Ansible does not set as facts on a
        failed task; the site playbook's rescue sets them, for the report.
    type: dict
  preflight_without_gpu:
    description: Judge O(preflight) on a node without GPUs too (one prepared as a GPU node).
    type: bool
    default: false
  local_facts_dir:
    description:
      - Also keep a summary of the hardware (C(gpu_count), the GPUs' names, C(os) as C(<id> <version_id>),
        C(kernel)) as a local fact, in C(gpufleet_nvidia.fact) of this folder on the node (as JSON, root's,
        mode 0644; the folder is made root's, mode 0755), which fact gathering then reads into
        C(ansible_local.gpufleet_nvidia). The discover role sets it when C(discover_local_facts) is on.
      - Unset, the module writes nothing. The path is on the node itself, not under O(host_root).
    type: path
attributes:
  check_mode:
    description: Can run in check_mode and return the same facts; the local fact file is not written.
    support: full
  diff_mode:
    description: Shows the local fact file's change, with O(local_facts_dir); nothing else is changed.
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
notes:
  - O(roles), O(preflight) and O(preflight_without_gpu) are answered by the action plugin, on the
    control host; the module on the node never sees them.
  - On RPM hosts the owning package is asked with C(rpm -qf), run inside C(chroot host_root) when
    O(host_root) is not C(/).
seealso:
  - module: gpufleet.nvidia.preflight
  - module: gpufleet.nvidia.host_validate
"""

EXAMPLES = r"""
- name: Gather NVIDIA facts
  gpufleet.nvidia.gpu_facts:

- name: Show what the driver is and where it came from
  ansible.builtin.debug:
    msg: >-
      {{ gpufleet_nvidia.driver.version }} ({{ gpufleet_nvidia.driver.flavor }},
      {{ gpufleet_nvidia.driver.source }}) on {{ gpufleet_nvidia.gpu_count }} GPUs

- name: Gather facts of the host mounted at /host in a privileged container
  gpufleet.nvidia.gpu_facts:
    host_root: /host
  register: gpu

- name: Stop when nvidia-smi cannot talk to the driver
  ansible.builtin.fail:
    msg: "{{ gpu.ansible_facts.gpufleet_nvidia.probes.nvidia_smi.detail }}"
  when: gpu.ansible_facts.gpufleet_nvidia.probes.nvidia_smi.state == 'error'

- name: Gather the facts and validate the node in the same pass
  gpufleet.nvidia.gpu_facts:
    validate:
      driver_version: "580"
      container_runtime: containerd
  register: discovery
"""

RETURN = r"""
gpu_node:
  description:
    - Whether the node is to be prepared as a GPU node - it has NVIDIA GPUs, or O(preflight_without_gpu)
      is set - as the discover role groups it (C(discover_gpu_group), else C(discover_nogpu_group)).
  returned: when the module read the node
  type: bool
  sample: true
preflight:
  description: With O(preflight), preflight's result, as M(gpufleet.nvidia.preflight) returns it.
  returned: when O(preflight) is set and the node has GPUs (or O(preflight_without_gpu))
  type: dict
  sample: {ok: true, msg: "1 GPU: 14 ok, 0 warnings, 0 blocking", gpu_count: 1, blocking_count: 0}
roles:
  description: With O(roles), the roles whose variables were checked, by their short names.
  returned: when O(roles) is set
  type: list
  elements: str
  sample: [discover, nvidia_driver, container_toolkit, validate]
argument_errors:
  description: With O(roles), the error messages of each role whose variables are not valid.
  returned: when O(roles) is set
  type: dict
  sample: {nvidia_driver: ["argument 'nvidia_driver_state' is of type list and we were unable to convert to str"]}
ansible_facts:
  description: The facts this module sets on the host.
  returned: always
  type: dict
  contains:
    gpufleet_nvidia:
      description:
        - The facts, set as the C(gpufleet_nvidia) host fact (and returned there only, not a second time
          beside it).
      returned: always
      type: dict
      contains:
        schema:
          description: Version of this dict's layout.
          type: int
          returned: always
          sample: 1
        host_root:
          description: The O(host_root) the facts were read under.
          type: str
          returned: always
          sample: /
        gpus:
          description: NVIDIA display and 3D controllers (PCI class 0x0300 and 0x0302).
          type: list
          elements: dict
          returned: always
          sample:
            - bus_id: "0000:00:06.0"
              vendor_id: "0x10de"
              device_id: "0x2335"
              subsystem_vendor_id: "0x10de"
              subsystem_device_id: "0x18bf"
              class: "0x030200"
              name: GH100 [H200 SXM 141GB]
              name_source: table
              architecture: Hopper
              kernel_driver: nvidia
              numa_node: null
        gpu_count:
          description: Number of GPUs.
          type: int
          returned: always
          sample: 1
        nvswitches:
          description: NVIDIA NVSwitch bridges (PCI class 0x0680).
          type: dict
          returned: always
          sample: {"count": 0, "bus_ids": []}
        topology:
          description:
            - The GPU-to-GPU topology as C(nvidia-smi topo -m) gives it, read only on hosts with two
              GPUs or more (C(state=skipped) otherwise). C(links) maps each GPU to its peers with
              nvidia-smi's link codes (C(NV<n>) for n bonded NVLinks, C(PIX), C(PXB), C(PHB), C(NODE),
              C(SYS)); C(nvlink_pairs) counts the GPU pairs joined by NVLink.
          type: dict
          returned: always
          sample:
            state: ok
            detail: 2 GPUs, 1 NVLink pairs
            gpus: [GPU0, GPU1]
            links: {GPU0: {GPU1: NV18}, GPU1: {GPU0: NV18}}
            cpu_affinity: {GPU0: "0-47", GPU1: "0-47"}
            numa_affinity: {GPU0: "0", GPU1: "0"}
            nvlink_pairs: 1
        fabric_manager:
          description:
            - NVIDIA's fabric manager, which hosts whose GPUs are joined by NVSwitches need at exactly
              the driver's version (C(required) is true when NVSwitches are present). C(version) comes
              from its package (C(version_source=package)) or from C(nv-fabricmanager --version);
              C(service) is what C(systemctl is-active nvidia-fabricmanager) answers (null when not
              asked, for instance through O(host_root)).
          type: dict
          returned: always
          sample:
            required: true
            installed: true
            path: /usr/bin/nv-fabricmanager
            version: 570.172.08
            version_source: binary
            package: null
            service: active
        driver:
          description:
            - The driver. C(loaded), C(version) and C(flavor) (C(open) or C(proprietary)) describe the
              loaded kernel module; C(installed) the module on disk (C(modinfo)); C(nvidia_smi) the one
              C(nvidia-smi -q -x) call, with per GPU its index, name, UUID, bus id, memory, C(mig_capable),
              the current and pending MIG mode and the persistence mode; C(source) is C(package), C(preinstalled) or C(absent);
              C(package) the owning package; C(packages) the installed NVIDIA packages (dpkg hosts).
            - C(found) is the one driver version that preflight, host_validate and the fleet report read,
              the driver on disk first (C(modinfo), else the C(package) owning nvidia-smi or libcuda), else
              what runs (C(nvidia-smi), else the C(loaded module)), C(from) naming which; and its C(flavor)
              (the module's on disk, else the loaded one's, else the kernel-module C(packages)), C(flavor_from)
              naming which.
          type: dict
          returned: always
          sample:
            loaded: true
            modules: [nvidia, nvidia_uvm]
            version: 580.159.04
            flavor: open
            nouveau_loaded: false
            installed: {state: missing, version: null, flavor: null, filename: null, signer: null}
            nvidia_smi:
              state: ok
              path: /usr/local/nvidia/bin/nvidia-smi
              driver_version: 580.159.04
              cuda_version: "13.0"
              detail: 1 GPU
              gpus:
                - index: 0
                  name: NVIDIA H200
                  uuid: GPU-d35d5d0d-d305-4f92-c0d5-c310f071b577
                  bus_id: "0000:00:06.0"
                  architecture: Hopper
                  memory_total_mib: 143771
                  mig_capable: true
                  mig_mode_current: disabled
                  mig_mode_pending: disabled
                  persistence_mode: enabled
            libcuda: /usr/local/nvidia/lib64/libcuda.so.1
            source: preinstalled
            package: null
            packages: null
            found: {version: 580.159.04, from: nvidia-smi, flavor: open, flavor_from: loaded module}
        container:
          description:
            - The NVIDIA Container Toolkit (C(toolkit)) and the container runtimes (C(containerd),
              C(docker), C(crio), C(k3s), C(rke2)), each with C(installed), its binary, version and
              configuration paths. For containerd also the config's top-level C(version), the CRI
              plugin's table name, C(disabled_plugins), C(cri_disabled), C(imports) and the runtimes of
              the main file (null without a TOML library, Python's tomllib or tomli).
          type: dict
          returned: always
          sample:
            toolkit: {installed: false, version: null, version_source: null, nvidia_ctk: null,
                      nvidia_container_cli: null, nvidia_container_runtime: null,
                      config_path: /etc/nvidia-container-runtime/config.toml, config_exists: false,
                      packages: {}}
            containerd: {installed: true, path: /usr/bin/containerd, version: 1.6.20~ds1,
                         config_path: /etc/containerd/config.toml, config_exists: true, config_version: 2,
                         cri_plugin: io.containerd.grpc.v1.cri, disabled_plugins: [], cri_disabled: false,
                         imports: [], runtimes: []}
            docker: {installed: false, path: null, version: null, config_path: /etc/docker/daemon.json,
                     config_exists: false, runtimes: null, default_runtime: null}
            crio: {installed: false, path: null, version: null, config_path: /etc/crio/crio.conf,
                   config_exists: false, dropin_dir: /etc/crio/crio.conf.d, dropin_dir_exists: false}
            k3s: {installed: false, path: null,
                  config_path: /var/lib/rancher/k3s/agent/etc/containerd/config.toml, config_exists: false,
                  template_path: /var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl,
                  template_exists: false}
            rke2: {installed: false, path: null,
                   config_path: /var/lib/rancher/rke2/agent/etc/containerd/config.toml, config_exists: false,
                   template_path: /var/lib/rancher/rke2/agent/etc/containerd/config.toml.tmpl,
                   template_exists: false}
        os:
          description: From os-release; C(family) is C(debian), C(redhat) or C(other).
          type: dict
          returned: always
          sample: {id: ubuntu, id_like: debian, version_id: "24.04", version_major: "24", codename: noble,
                   pretty_name: Ubuntu 24.04.3 LTS, family: debian}
        kernel:
          description: The running kernel and whether its headers (C(/lib/modules/RELEASE/build)) are installed.
          type: dict
          returned: always
          sample: {release: 6.8.0-48-generic, headers_installed: true,
                   headers_path: /lib/modules/6.8.0-48-generic/build}
        secure_boot:
          description:
            - C(state) is C(enabled), C(disabled), C(not_efi) or C(unknown) (from the SecureBoot EFI
              variable); C(dkms_mok_key) whether C(/var/lib/dkms/mok.pub) exists; C(mok_keys) the MOK
              key files found.
          type: dict
          returned: always
          sample: {state: not_efi, dkms_mok_key: false, mok_keys: []}
        kernels:
          description:
            - The installed kernels (C(/boot/vmlinuz-*), C(/lib/modules/*)), the running one, and the one
              the next boot starts (C(next_boot.source) C(grubby) for C(grubby --default-kernel), C(grub)
              for grubenv's C(saved_entry) or grub.cfg's first entry, C(newest), or C(unknown) where no
              kernel is installed on the node, as with a direct kernel boot).
            - C(modules) has, per kernel, the nvidia module files found (DKMS's C(updates/dkms), EL's
              C(extra/), Ubuntu's precompiled C(kernel/nvidia-*), a pre-installed driver's
              C(/usr/local/nvidia/modules)) with the C(version) and C(vermagic) of their C(.modinfo)
              section (C(.ko), C(.ko.xz), C(.ko.zst) where Python can decompress it, else through
              C(modinfo)), DKMS's builds and the precompiled package, and a C(state) - C(ok) (a module
              of C(driver_version), the user-space libraries' version, built for that kernel),
              C(other_version), C(wrong_kernel), C(unreadable), C(built_not_installed) or C(missing).
            - C(unbooted_without_module) lists the installed kernels other than the running one whose
              C(state) is not C(ok).
          type: dict
          returned: always
          sample: {running: 6.8.0-45-generic, installed: [{release: 6.8.0-45-generic, vmlinuz: /boot/vmlinuz-6.8.0-45-generic,
                   modules_dir: /lib/modules/6.8.0-45-generic}, {release: 6.8.0-51-generic, vmlinuz: /boot/vmlinuz-6.8.0-51-generic,
                   modules_dir: /lib/modules/6.8.0-51-generic}],
                   next_boot: {release: 6.8.0-51-generic, source: grub, module: missing,
                               detail: "/boot/grub/grubenv saved_entry=gnulinux-advanced-0b1c>gnulinux-6.8.0-51-generic-advanced-0b1c"},
                   driver_version: 580.159.04,
                   modules: [{release: 6.8.0-51-generic, state: missing, files: [], dkms: [], precompiled_package: null,
                              detail: "no nvidia module for 6.8.0-51-generic (no DKMS build, no precompiled package, no module file)"}],
                   dkms: [{version: 580.159.04, kernel: 6.8.0-45-generic, arch: x86_64,
                           module: /var/lib/dkms/nvidia/580.159.04/6.8.0-45-generic/x86_64/module/nvidia.ko.xz}],
                   precompiled_packages: {}, unbooted_without_module: [6.8.0-51-generic]}
        driver_libraries:
          description:
            - The loaded module's version against the user-space libraries on disk
              (C(libnvidia-ml.so.VERSION) files) and the driver's packages. C(state) is C(ok),
              C(drift) (the "driver/library version mismatch" - NVML and CUDA calls fail until the
              module is reloaded), C(not_loaded) or C(unknown) (no library found).
            - On drift, C(holders) lists the processes with a C(/dev/nvidia*) file open (from
              C(/proc/PID/fd)) and C(fix) is C(reload) where none does and every process could be read,
              else C(reboot).
          type: dict
          returned: always
          sample: {state: drift, loaded: 580.159.04, libraries: {580.173.02: [/usr/local/nvidia/lib64/libnvidia-ml.so.580.173.02]},
                   packages: {}, holders: [{pid: 4242, command: python3}], fix: reboot,
                   detail: "the loaded nvidia module is 580.159.04, the libraries or packages on disk are 580.173.02"}
        nvml_reload:
          description:
            - Whether running containers lose NVML ("Failed to initialize NVML - Unknown Error") after
              C(systemctl daemon-reload). C(state) is C(exposed) (systemd is the init, a runtime uses the
              systemd cgroup driver - containerd's C(SystemdCgroup = true), CRI-O's C(cgroup_manager),
              Docker's C(native.cgroupdriver) or its default on cgroup v2 - devices reach containers through
              the NVIDIA runtime's legacy hook (its C(legacy) mode, C(auto) before toolkit 1.18 (from 1.18
              C(auto) is JIT-CDI), or Docker's C(--gpus)), and a nvidia device node has no
              C(/dev/char/MAJOR:MINOR) link), C(protected),
              C(not_exposed) or C(unknown); C(reason) says why and C(fix) what to change.
          type: dict
          returned: always
          sample: {state: not_exposed, systemd: false, cgroup_drivers: {containerd: null, crio: null, docker: null},
                   toolkit_mode: auto, dev_char_links: [], dev_char_missing: [], fix: null,
                   reason: "systemd is not the init (no /run/systemd/system): nothing runs daemon-reload"}
        probes:
          description: Every probe, by name, with C(state) (C(ok), C(missing) or C(error)) and C(detail).
          type: dict
          returned: always
          sample:
            nvidia_smi: {state: error, detail: "nvidia-smi -q -x exited 9: NVIDIA-SMI has failed because it
              couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is
              installed and running."}
            modinfo: {state: missing, detail: modinfo not found (kmod not installed)}
    gpufleet_nvidia_validation:
      description:
        - With O(validate), the node's validation, as M(gpufleet.nvidia.host_validate) sets this fact
          (RV(gpufleet.nvidia.host_validate#module:validation)), made from the same reads as the facts.
      returned: when O(validate) is set
      type: dict
      sample: {status: ok, summary: "ok: 6 ok, 0 drifted, 0 failed, 2 not checked", gpu_count: 1}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import facts as gpu_facts, local_fact
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate import host as host_validate
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


#: What the action plugin answers on the control host, before or after the module.
ACTION_SPEC = dict(
    roles=dict(type="list", elements="str"),
    preflight=dict(type="dict"),
    preflight_without_gpu=dict(type="bool", default=False),
)
ARGUMENT_SPEC = dict(
    host_root=dict(type="path", default="/"),
    command_timeout=dict(type="int", default=60),
    validate=dict(type="dict", options=host_validate.GPU_FACTS_SPEC),
    local_facts_dir=dict(type="path"),
    **ACTION_SPEC
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    result = dict(changed=False)
    try:
        host = Host.for_module(module, params["host_root"], params["command_timeout"])
        if params["validate"] is None:
            facts = gpu_facts.gather_facts(host)
            validated = {}
        else:
            validate = dict(params["validate"], host_root=params["host_root"], command_timeout=params["command_timeout"])
            validation, facts = host_validate.validate_node(host, validate, option_prefix="validate.")
            validated = {"gpufleet_nvidia_validation": validation}
        if params["local_facts_dir"]:
            result["changed"], result["diff"] = local_fact.keep(module, params["local_facts_dir"], facts)
    except GpuFleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    module.exit_json(ansible_facts=dict(validated, gpufleet_nvidia=facts), **result)


if __name__ == "__main__":
    main()
