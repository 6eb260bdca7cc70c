#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cdi_spec
short_description: Write the CDI spec for a node's NVIDIA GPUs without nvidia-ctk
version_added: 0.1.0
description:
  - Writes a Container Device Interface (CDI) spec, by default C(/etc/cdi/nvidia.yaml), that lets
    containerd, CRI-O, Docker and Podman hand NVIDIA GPUs to containers as
    C(nvidia.com/gpu=<name>). It covers what C(nvidia-ctk cdi generate) writes for full GPUs, built
    in Python on the node, so it needs neither nvidia-ctk nor NVML nor PyYAML.
  - "The spec has CDI version C(0.5.0) and kind C(nvidia.com/gpu); one device per GPU named by its
    index and/or UUID (see O(device_name_strategy)) with its C(/dev/nvidiaN) (and its
    C(/dev/dri) nodes where the GPU has them), and a device C(all) with every GPU's nodes."
  - "Shared by all devices: the control nodes C(/dev/nvidiactl), C(/dev/nvidia-uvm),
    C(/dev/nvidia-uvm-tools) and C(/dev/nvidia-modeset) that exist; C(NVIDIA_VISIBLE_DEVICES=void)
    and C(NVIDIA_CTK_LIBCUDA_DIR); read-only mounts of every C(*.so.<driver version>) library in
    the folder of C(libcuda.so.<driver version>), the binaries C(nvidia-smi), C(nvidia-debugdump),
    C(nvidia-persistenced), C(nvidia-cuda-mps-control), C(nvidia-cuda-mps-server) (and the IMEX
    pair when installed), the GSP firmware C(nvidia/<version>/gsp_*.bin), the vendor files
    (Vulkan ICD, EGL vendor, ...) and the persistenced / fabric manager / MPS sockets that exist;
    and the createContainer hooks C(create-symlinks), C(enable-cuda-compat), C(update-ldcache),
    C(disable-device-node-modification) and C(update-application-profile), run by
    O(nvidia_cdi_hook_path)."
  - The driver version is the loaded kernel module's (C(/proc/driver/nvidia/version)); the
    libraries are found through the driver root's C(/etc/ld.so.cache), read directly, or by
    scanning the usual library folders when it has none; a kernel module and libraries of
    different versions make the module fail rather than write a spec that cannot work.
  - GPUs are read from C(/proc/driver/nvidia/gpus/*/information), or from C(nvidia-smi -q -x)
    when that is missing. The index is the GPU's position in PCI bus order, as NVML numbers them.
  - The file is rewritten only when its text differs; the output is sorted and has no timestamp,
    so a second run reports no change.
author:
  - gpufleet.nvidia maintainers (@gpufleet)
options:
  state:
    description:
      - V(present) writes the spec; V(absent) removes the file.
    type: str
    choices: [present, absent]
    default: present
  output:
    description:
      - Where to write the spec. It must end in C(.yaml) or C(.json), the only names the CDI
        registry reads; a C(.json) name gets JSON, anything else YAML.
      - The folder is created (mode C(0755)) when missing.
      - An absolute path without C(.) or C(..) parts; O(driver_root), O(dev_root) and
        O(nvidia_cdi_hook_path) must be absolute too (a relative hook path would be looked up
        in whatever folder the container runtime runs it from). A relative one is refused by name.
    type: path
    default: /etc/cdi/nvidia.yaml
    aliases: [path]
  driver_root:
    description:
      - The root of the file system that holds the driver's libraries, binaries, firmware and
        C(ld.so.cache), for example C(/run/nvidia/driver) for the GPU Operator's driver
        container. Host paths in the spec keep this prefix; container paths drop it.
    type: path
    default: /
  dev_root:
    description:
      - The root under which the C(/dev/nvidia*) device nodes are found. When not C(/), device
        nodes carry a C(hostPath).
    type: path
    default: /
  device_name_strategy:
    description:
      - How the per-GPU devices are named. V(index) gives C(0), C(1), ...; V(uuid) gives
        C(GPU-<uuid>); V(both) gives both names, as C(nvidia-ctk cdi generate) does by default.
    type: str
    choices: [index, uuid, both]
    default: both
  nvidia_cdi_hook_path:
    description:
      - The hook program written into the spec. With the default C(nvidia-cdi-hook) the hooks run
        as C(nvidia-cdi-hook <hook>); when the program's name is C(nvidia-ctk) they run as
        C(nvidia-ctk hook <hook>), as nvidia-ctk's own C(--nvidia-cdi-hook-path) does.
      - The module warns when this path does not exist on the node.
    type: path
    default: /usr/bin/nvidia-cdi-hook
    aliases: [nvidia_ctk_path]
  disabled_hooks:
    description:
      - Hooks to leave out, like nvidia-ctk's C(--disable-hook). C(all) leaves out every hook.
      - Needed with an older NVIDIA Container Toolkit, whose hook program does not know the newer
        hooks (C(enable-cuda-compat) came in 1.17.5, C(disable-device-node-modification) in
        1.17.8, C(update-application-profile) in 1.20.0); a container whose spec names an unknown
        hook fails to start.
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
  - "The file is written as YAML by a small writer in the collection (block style, strings quoted
    only where YAML would read them as something else), not by PyYAML: the text is then the same
    on every node whatever Python packages it has, which the comparison with the existing file
    relies on. A C(.json) output is written with Python's C(json)."
  - "Differences from C(nvidia-ctk cdi generate) 1.20, on purpose: device nodes carry no
    C(major), C(minor) or C(fileMode) (the container runtime reads them from the host node when
    a container starts, so the spec stays right when C(nvidia-uvm) gets another major number
    after a reboot); binaries are looked for in the driver's own C(bin) folder (next to its
    library folder) before C(/usr/local/sbin), C(/usr/local/bin), C(/usr/sbin), C(/usr/bin),
    C(/sbin), C(/bin), never in the caller's C(PATH); vendor files are looked for in C(/etc),
    C(/usr/local/share), C(/usr/share), never in C(XDG_DATA_DIRS)."
  - MIG devices are not described; the module warns when a GPU has MIG instances. Use
    C(nvidia-ctk cdi generate) for MIG.
  - Regenerate the spec after a driver upgrade (the library names carry the driver version). The
    C(gpufleet.nvidia.container_toolkit) role runs this module on every run when CDI is on and the
    node's toolkit has no C(nvidia-cdi-refresh) units (or C(container_toolkit_cdi_source=module)), so
    a driver change is picked up by the same run; where the toolkit's units keep
    C(/var/run/cdi/nvidia.yaml) current instead, the role removes the spec this module wrote.
  - Library files are opened for their ELF C(DT_SONAME) only when they are regular files, without
    blocking and without following a final link, so a FIFO or a device under a library's name
    cannot hang the module.
seealso:
  - name: Container Device Interface specification
    description: The format of the file written.
    link: https://github.com/cncf-tags/container-device-interface/blob/main/SPEC.md
  - name: NVIDIA Container Toolkit CDI support
    description: What C(nvidia-ctk cdi generate) does.
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
  description: The driver version the spec was built for.
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
spec:
  description: The spec written, as data; empty for V(absent).
  returned: always
  type: dict
  sample:
    cdiVersion: 0.5.0
    kind: nvidia.com/gpu
    devices:
      - name: "0"
        containerEdits:
          deviceNodes:
            - path: /dev/nvidia0
              permissions: rwm
      - name: all
        containerEdits:
          deviceNodes:
            - path: /dev/nvidia0
              permissions: rwm
    containerEdits:
      env:
        - NVIDIA_CTK_LIBCUDA_DIR=/usr/local/nvidia/lib64
        - NVIDIA_VISIBLE_DEVICES=void
      deviceNodes:
        - path: /dev/nvidiactl
          permissions: rwm
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

from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "absent"], default="present"),
            output=dict(type="path", default=cdi.DEFAULT_OUTPUT, aliases=["path"]),
            driver_root=dict(type="path", default="/"),
            dev_root=dict(type="path", default="/"),
            device_name_strategy=dict(type="str", choices=list(cdi.DEVICE_NAME_STRATEGIES), default="both"),
            nvidia_cdi_hook_path=dict(type="path", default=cdi.DEFAULT_HOOK_PATH, aliases=["nvidia_ctk_path"]),
            disabled_hooks=dict(type="list", elements="str", choices=["all"] + list(cdi.HOOK_NAMES), default=[]),
            mode=dict(type="raw"),
        ),
        supports_check_mode=True,
    )
    try:
        result = cdi.run(module)
    except GpuFleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
