#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: dev_char_symlinks
short_description: Keep GPU containers' GPUs across systemctl daemon-reload with the toolkit's /dev/char links
version_added: 0.1.0
description:
  - 'Prevents "Failed to initialize NVML: Unknown Error" in running GPU containers after
    C(systemctl daemon-reload) (NVIDIA/nvidia-docker#1730): under the systemd cgroup driver,
    a reload applies the containers'' device rules again from the links under
    C(/dev/char/<major>:<minor>), and the GPU device nodes that the legacy NVIDIA hook added are
    lost when those links are missing.'
  - 'With O(state=auto) the module first reads whether the node is exposed: the runtime''s
    cgroup driver (containerd, k3s, RKE2 - C(SystemdCgroup) of the nvidia runtime''s options,
    else of the default runtime; CRI-O - C(cgroup_manager), C(systemd) by default; Docker -
    C(native.cgroupdriver) in C(exec-opts), C(systemd) by default on cgroup v2) and whether
    devices go through the legacy hook (C(nvidia-container-runtime.mode) of the toolkit''s
    config: V(legacy), or V(auto) before toolkit 1.18; on Docker also C(docker run --gpus), which
    always does). A node that is not exposed is left alone (and a rule the module wrote earlier
    is removed); RV(reasons) says why.'
  - 'Where exposed, NVIDIA''s fix: the udev rule C(ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia",
    RUN+="/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all") in O(rule_path),
    and C(nvidia-ctk system create-dev-char-symlinks --create-all) run now when a link of a
    present NVIDIA device node is missing (checked again after it ran).'
author:
  - gpufleet.nvidia maintainers (@gpufleet)
requirements:
  - tomlkit (python3-tomlkit) on the node
options:
  state:
    description:
      - V(auto) applies the fix only where the node is exposed; V(present) always; V(absent)
        removes the rule (the links are harmless and go with the next boot).
    type: str
    choices: [auto, present, absent]
    default: auto
  runtime:
    description: The node's container runtime (as M(gpufleet.nvidia.container_runtime) names it); read with O(state=auto).
    type: str
    choices: [containerd, k3s, rke2, crio, docker]
    default: containerd
  runtime_name:
    description: The nvidia runtime handler's name in the containerd configuration.
    type: str
    default: nvidia
  toolkit_config:
    description: The toolkit's configuration, whose C(nvidia-container-runtime.mode) is read.
    type: path
    default: /etc/nvidia-container-runtime/config.toml
  toolkit_version:
    description:
      - The NVIDIA Container Toolkit version installed (V(1.20.0) or V(1.20.0-1)); it decides
        what C(mode = "auto") is (JIT-CDI from 1.18.0, legacy before). Needed with O(state=auto).
    type: str
  rule_path:
    description:
      - The udev rule file. NVIDIA's notice names C(/lib/udev/rules.d/71-nvidia-dev-char.rules);
        the default is the same name in the administrator's folder, which also overrides a copy
        a package might put there.
      - An absolute, normalized path ending in C(.rules), without whitespace or control characters.
    type: path
    default: /etc/udev/rules.d/71-nvidia-dev-char.rules
  nvidia_ctk_path:
    description:
      - The nvidia-ctk the rule and the module run.
      - 'An absolute, normalized path without whitespace, control characters, C(") or C(\) (they would end
        or change the rule''s C(RUN+=) value), C($) or C(%) (udev substitutes them).'
    type: path
    default: /usr/bin/nvidia-ctk
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying the target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details:
      - The rule file before and after, and the links as C(link -> node) lines.
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
notes:
  - systemd-udevd reads a changed rules file at its next event; the rule matters when the driver
    binds (boot, module load), and the links are created now by the module itself.
  - Without NVIDIA device nodes (no driver loaded) no link is needed now; the rule creates them
    when the driver binds.
seealso:
  - module: gpufleet.nvidia.toolkit_config
  - name: "NOTICE: Containers losing access to GPUs with error: Failed to initialize NVML: Unknown Error"
    description: NVIDIA's explanation and the workaround this module applies.
    link: https://github.com/NVIDIA/nvidia-docker/issues/1730
"""

EXAMPLES = r"""
- name: Keep GPU containers' GPUs across daemon-reload where the node needs it
  gpufleet.nvidia.dev_char_symlinks:
    runtime: containerd
    toolkit_version: 1.20.0-1

- name: Remove the rule
  gpufleet.nvidia.dev_char_symlinks:
    state: absent
"""

RETURN = r"""
needed:
  description: Whether the node loses GPUs on daemon-reload without the fix (V(true) for O(state=present)).
  returned: always
  type: bool
  sample: true
reasons:
  description: Why, in words.
  returned: always
  type: list
  elements: str
  sample: ["the systemd cgroup driver (SystemdCgroup = true in /etc/containerd/conf.d/99-nvidia.toml (runtimes.nvidia))",
           "the toolkit runtime in legacy mode"]
cgroup_driver:
  description: The runtime's cgroup driver as read (null unless O(state=auto)).
  returned: always
  type: str
  sample: systemd
toolkit_mode:
  description: The toolkit runtime's mode, V(auto) resolved (null unless O(state=auto)).
  returned: always
  type: str
  sample: legacy
rule_path:
  description: The udev rule file.
  returned: always
  type: str
  sample: /etc/udev/rules.d/71-nvidia-dev-char.rules
rule_action:
  description: What happened to it - V(create), V(update), V(delete) or V(unchanged).
  returned: always
  type: str
  sample: create
links:
  description: The /dev/char links of the node's NVIDIA device nodes, link -> node (empty where the fix does not apply).
  returned: always
  type: dict
  sample: {/dev/char/195:0: /dev/nvidia0, /dev/char/195:255: /dev/nvidiactl}
missing_links:
  description: The links that were missing before the run.
  returned: always
  type: list
  elements: str
  sample: [/dev/char/195:0]
commands:
  description: The commands run (in check mode, that would run).
  returned: always
  type: list
  elements: str
  sample: [/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all]
msg:
  description: What was done, in words.
  returned: always
  type: str
  sample: "needed (the systemd cgroup driver (...) and the toolkit runtime in legacy mode): created 1 /dev/char link(s); udev rule ... create"
diff:
  description: The rule file, and the links, before and after, in diff mode.
  returned: when diff mode is on
  type: list
  elements: dict
  sample:
    - {before: "", after: "ACTION==\"add\", ...\n", before_header: /etc/udev/rules.d/71-nvidia-dev-char.rules (absent),
       after_header: /etc/udev/rules.d/71-nvidia-dev-char.rules}
    - {before: "/dev/char/195:0 -> /dev/nvidia0 (missing)\n", after: "/dev/char/195:0 -> /dev/nvidia0\n",
       before_header: /dev/char, after_header: /dev/char}
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import dev_char, edit


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["auto", "present", "absent"], default="auto"),
            runtime=dict(type="str", choices=list(dev_char.RUNTIMES), default="containerd"),
            runtime_name=dict(type="str", default="nvidia"),
            toolkit_config=dict(type="path", default=dev_char.toolkit_config.CONFIG_PATH),
            toolkit_version=dict(type="str"),
            rule_path=dict(type="path", default=dev_char.RULE_PATH),
            nvidia_ctk_path=dict(type="path", default=dev_char.NVIDIA_CTK),
        ),
        required_if=[("state", "auto", ["toolkit_version"])],
        supports_check_mode=True,
    )
    if not edit.load_tomlkit():
        module.fail_json(msg=missing_required_lib("tomlkit"), exception=edit.TOMLKIT_IMPORT_ERROR)
    try:
        result = dev_char.converge(Host.for_module(module), module.params, module.check_mode, module._diff)
    except GpuFleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
