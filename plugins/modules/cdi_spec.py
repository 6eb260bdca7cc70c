#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cdi_spec
short_description: Write the CDI spec of a node's NVIDIA GPUs with nvidia-ctk, and guard the one the runtimes use
version_added: 0.1.0
description:
  - Keeps the Container Device Interface (CDI) spec that lets containerd, CRI-O, Docker and Podman hand
    NVIDIA GPUs to containers as C(nvidia.com/gpu=<name>) right for the node as it is now.
  - With O(method=module) the module runs C(nvidia-ctk cdi generate) (NVIDIA Container Toolkit,
    package C(nvidia-container-toolkit-base)) into a temporary file and writes its spec to O(output),
    by default C(/etc/cdi/nvidia.yaml), only when the text differs, atomically. nvidia-ctk finds the
    driver's libraries, binaries and firmware through NVML, names full GPUs and MIG devices and
    validates the spec.
  - With O(method=toolkit) the toolkit's own C(nvidia-cdi-refresh.service) (toolkit 1.18 or later)
    writes C(/var/run/cdi/nvidia.yaml); the module reads the state of that service and of
    C(nvidia-cdi-refresh.path) (C(systemctl show)), and where either failed or hit its start limit, or
    the spec fails the guard below (or O(refresh) is set), runs C(systemctl reset-failed) on the failed
    units, restarts the service, starts the path unit, and checks the result again.
  - "The guard, in Python because no NVIDIA tool does it: the spec (and a spec of a later CDI folder,
    C(/var/run/cdi) before C(/etc/cdi), that takes its devices, which is the one the runtimes use) must
    name only device nodes that exist, with the major and minor numbers it records; must have been
    written for the loaded driver (C(/proc/driver/nvidia/version), else C(/sys/module/nvidia/version));
    a device named by a GPU UUID must be a GPU of this node on its own node; and its MIG devices must be
    the MIG instances of the node (C(/proc/driver/nvidia/capabilities), C(/proc/driver/nvidia-caps/mig-minors)).
    A spec that fails it is not written (method module), or is repaired (method toolkit); the module fails
    with every problem named when it cannot be made right."
requirements:
  - nvidia-ctk (NVIDIA Container Toolkit, package nvidia-container-toolkit-base) for O(method=module)
  - PyYAML on the node (python3-yaml on Debian and Ubuntu, python3-pyyaml on EL), to read the spec
  - systemd, for O(method=toolkit)
author:
  - gpufleet.nvidia maintainers (@gpufleet)
options:
  state:
    description:
      - V(present) writes (or guards) the spec; V(absent) removes the file O(output) (O(method=module) only).
    type: str
    choices: [present, absent]
    default: present
  method:
    description:
      - Who writes the spec. V(module) - this module runs nvidia-ctk and writes O(output);
        V(toolkit) - the toolkit's C(nvidia-cdi-refresh.service) writes C(/var/run/cdi/nvidia.yaml)
        and the module guards and repairs it (O(output), O(driver_root), O(device_name_strategy),
        O(nvidia_cdi_hook_path), O(disabled_hooks), O(mode) and O(nvidia_ctk) are the service's
        business then, set in C(/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env)).
    type: str
    choices: [module, toolkit]
    default: module
  refresh:
    description:
      - With O(method=toolkit), restart C(nvidia-cdi-refresh.service) even when the guard finds nothing
        (the driver changed in this run).
    type: bool
    default: false
  output:
    description:
      - Where to write the spec. It must end in C(.yaml) or C(.json), the only names the CDI
        registry reads; a C(.json) name gets JSON, anything else YAML.
      - The folder is created (mode C(0755)) when missing.
      - An absolute path without C(.) or C(..) parts; O(driver_root), O(dev_root),
        O(nvidia_cdi_hook_path) and O(nvidia_ctk) must be absolute too (a relative hook path would be
        looked up in whatever folder the container runtime runs it from). A relative one is refused by name.
    type: path
    default: /etc/cdi/nvidia.yaml
    aliases: [path]
  driver_root:
    description:
      - The root of the file system that holds the driver's libraries, binaries and firmware, for example
        C(/run/nvidia/driver) for the GPU Operator's driver container (nvidia-ctk's C(--driver-root)).
    type: path
    default: /
  dev_root:
    description:
      - The root under which the C(/dev/nvidia*) device nodes are found (nvidia-ctk's C(--dev-root));
        the guard looks for the spec's device nodes there.
    type: path
    default: /
  device_name_strategy:
    description:
      - How the per-GPU devices are named. V(index) gives C(0), C(1), ... (and C(0:0) for MIG devices);
        V(uuid) gives C(GPU-<uuid>) (C(MIG-<uuid>)); V(both) gives both names, as C(nvidia-ctk cdi generate)
        does by default.
    type: str
    choices: [index, uuid, both]
    default: both
  nvidia_cdi_hook_path:
    description:
      - The hook program written into the spec (nvidia-ctk's C(--nvidia-cdi-hook-path)). With the default
        C(nvidia-cdi-hook) the hooks run as C(nvidia-cdi-hook <hook>); when the program's name is
        C(nvidia-ctk) they run as C(nvidia-ctk hook <hook>).
      - The module warns when this path does not exist on the node.
    type: path
    default: /usr/bin/nvidia-cdi-hook
    aliases: [nvidia_ctk_path]
  nvidia_ctk:
    description:
      - The nvidia-ctk program that writes the spec (O(method=module)).
    type: path
    default: /usr/bin/nvidia-ctk
  disabled_hooks:
    description:
      - Hooks to leave out (nvidia-ctk's C(--disable-hook)). C(all) leaves out every hook.
      - Needed where the containers run an older toolkit's hook program than the nvidia-ctk that writes
        the spec (C(enable-cuda-compat) came in 1.17.5, C(disable-device-node-modification) in 1.17.8,
        C(update-application-profile) in 1.20.0); a container whose spec names an unknown hook fails to start.
    type: list
    elements: str
    choices:
      - all
      - create-symlinks
      - enable-cuda-compat
      - update-ldcache
      - disable-device-node-modification
      - update-application-profile
    default: []
  mode:
    description:
      - The file's permissions, octal (V(0640)) or symbolic (V(u=rw,g=r,o=)) as for
        M(ansible.builtin.file). When not set, a new file gets C(0644) and an existing one keeps its mode.
      - The spec's hooks run as root, so a mode that lets the group or the world write the file,
        or that sets the setuid, setgid or sticky bit (V(0777), V(0664), V(04644), V(g+w)), is
        refused by name before anything is read or written, in check mode too.
    type: raw
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying the target.
    support: full
    details:
      - With O(method=module) nvidia-ctk still runs, into a temporary file, so the prediction is exact.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details:
      - The diff shows the whole file before and after, also when it is created or removed.
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
notes:
  - nvidia-ctk's spec is deterministic for a node in a given state, so a second run reports no change;
    a YAML spec gets one comment line after C(---) naming this module and the driver version, which
    the M(gpufleet.nvidia.toolkit_config) decision looks for.
  - The C(gpufleet.nvidia.container_toolkit) role runs this module on every run when CDI is on, with
    O(method=module) where the node's toolkit has no C(nvidia-cdi-refresh) units (or
    C(container_toolkit_cdi_source=module)), else with O(method=toolkit).
seealso:
  - name: Container Device Interface specification
    description: The format of the file written.
    link: https://github.com/cncf-tags/container-device-interface/blob/main/SPEC.md
  - name: NVIDIA Container Toolkit CDI support
    description: What C(nvidia-ctk cdi generate) and the nvidia-cdi-refresh units do.
    link: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html
"""

EXAMPLES = r"""
- name: Write /etc/cdi/nvidia.yaml for this node's GPUs
  gpufleet.nvidia.cdi_spec:

- name: Name devices by UUID only and keep the file private to root
  gpufleet.nvidia.cdi_spec:
    device_name_strategy: uuid
    mode: "0600"

- name: Describe the driver of the GPU Operator's driver container
  gpufleet.nvidia.cdi_spec:
    driver_root: /run/nvidia/driver
    output: /var/run/cdi/nvidia.yaml

- name: Write a spec that an NVIDIA Container Toolkit 1.17.0 can run
  gpufleet.nvidia.cdi_spec:
    nvidia_cdi_hook_path: /usr/bin/nvidia-ctk
    disabled_hooks:
      - enable-cuda-compat
      - disable-device-node-modification
      - update-application-profile

- name: Guard the spec of the toolkit's nvidia-cdi-refresh units, and repair them where they failed
  gpufleet.nvidia.cdi_spec:
    method: toolkit

- name: Show how many libraries the spec mounts
  gpufleet.nvidia.cdi_spec:
  register: cdi
- ansible.builtin.debug:
    msg: "{{ cdi.devices | join(', ') }}: {{ cdi.counts.libraries }} libraries"

- name: Remove the spec
  gpufleet.nvidia.cdi_spec:
    state: absent
"""

RETURN = r"""
path:
  description: The spec file.
  returned: always
  type: str
  sample: /etc/cdi/nvidia.yaml
devices:
  description: The device names in the spec (use them as C(nvidia.com/gpu=<name>)); empty for V(absent).
  returned: always
  type: list
  elements: str
  sample: ["0", "GPU-d35d5d0d-d305-4f92-c0d5-c310f071b577", "all"]
driver_version:
  description: The driver version the spec was written for (its C(libcuda.so.<version>) mount).
  returned: when O(state=present)
  type: str
  sample: 580.159.04
counts:
  description:
    - How many of each thing the spec holds. C(device_nodes) counts distinct nodes over all
      devices; C(libraries), C(binaries), C(firmware), C(configs) (vendor files) and C(ipc)
      (sockets) are the parts of C(mounts); C(hooks) counts the shared hooks and the per-GPU ones.
    - Empty for V(absent).
  returned: always
  type: dict
  sample:
    device_nodes: 4
    libraries: 26
    binaries: 5
    firmware: 2
    configs: 2
    ipc: 0
    hooks: 6
    mounts: 35
problems:
  description:
    - What the guard found wrong before the run with O(method=toolkit) (failed units, a missing or stale
      spec), which the module repaired (or, in check mode, would). With O(method=module) a spec that
      fails the guard is not written and the module fails, so this is empty.
  returned: always
  type: list
  elements: str
  sample:
    - "nvidia-cdi-refresh.path failed (Result=unit-start-limit-hit, NRestarts=0): it no longer starts the refresh when the driver or the toolkit changes"
    - "/var/run/cdi/nvidia.yaml was written for driver 580.95.05, the loaded driver is 580.159.04 (every library it mounts is named by the version)"
repairs:
  description: The commands the module ran to repair the toolkit's units (O(method=toolkit)).
  returned: always
  type: list
  elements: str
  sample:
    - systemctl reset-failed nvidia-cdi-refresh.path nvidia-cdi-refresh.service
    - systemctl restart nvidia-cdi-refresh.service
    - systemctl start nvidia-cdi-refresh.path
spec:
  description: The spec, as data; empty for V(absent).
  returned: always
  type: dict
  sample:
    cdiVersion: 0.5.0
    kind: nvidia.com/gpu
    devices:
      - name: "0"
        containerEdits:
          deviceNodes:
            - {path: /dev/nvidia0, major: 195, fileMode: 438, permissions: rwm}
      - name: all
        containerEdits:
          deviceNodes:
            - {path: /dev/nvidia0, major: 195, fileMode: 438, permissions: rwm}
    containerEdits:
      env:
        - NVIDIA_CTK_LIBCUDA_DIR=/usr/local/nvidia/lib64
        - NVIDIA_VISIBLE_DEVICES=void
      deviceNodes:
        - {path: /dev/nvidiactl, major: 195, minor: 255, fileMode: 438, permissions: rwm}
      hooks:
        - hookName: createContainer
          path: /usr/bin/nvidia-cdi-hook
          args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/local/nvidia/lib64]
          env: [NVIDIA_CTK_DEBUG=false]
      mounts:
        - hostPath: /usr/local/nvidia/lib64/libcuda.so.580.159.04
          containerPath: /usr/local/nvidia/lib64/libcuda.so.580.159.04
          options: [ro, nosuid, nodev, rbind, rprivate]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi, cdi_spec
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "absent"], default="present"),
            method=dict(type="str", choices=["module", "toolkit"], default="module"),
            refresh=dict(type="bool", default=False),
            output=dict(type="path", default=cdi.DEFAULT_OUTPUT, aliases=["path"]),
            driver_root=dict(type="path", default="/"),
            dev_root=dict(type="path", default="/"),
            device_name_strategy=dict(type="str", choices=list(cdi_spec.DEVICE_NAME_STRATEGIES), default="both"),
            nvidia_cdi_hook_path=dict(type="path", default=cdi_spec.DEFAULT_HOOK_PATH, aliases=["nvidia_ctk_path"]),
            nvidia_ctk=dict(type="path", default=cdi_spec.NVIDIA_CTK),
            disabled_hooks=dict(type="list", elements="str", choices=["all"] + list(cdi_spec.HOOK_NAMES), default=[]),
            mode=dict(type="raw"),
        ),
        supports_check_mode=True,
    )
    try:
        result = cdi_spec.run(module)
    except GpuFleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
