#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: toolkit_config
short_description: Keep unprivileged containers from GPUs in the NVIDIA Container Toolkit's config, and say who keeps the CDI spec current
version_added: 0.1.0
description:
  - Edits C(/etc/nvidia-container-runtime/config.toml) in place (comments, order and every other
    key kept) so that an unprivileged container cannot get GPUs by setting
    C(NVIDIA_VISIBLE_DEVICES), as NVIDIA documents for "Preventing unprivileged access to GPUs in
    Kubernetes" - C(accept-nvidia-visible-devices-envvar-when-unprivileged = false) and
    C(accept-nvidia-visible-devices-as-volume-mounts = true) (the toolkit's defaults are V(true)
    and V(false)).
  - The device plugin must then hand GPUs over as volume mounts (its C(deviceListStrategy)
    V(volume-mounts)) or through CDI (V(cdi-cri), V(cdi-annotations)); with its default
    V(envvar) strategy, pods get no GPU.
  - The original text of each key the module changes is recorded in one comment line at the
    top of the file; O(isolate_unprivileged=false) puts back exactly that (a key that was not
    there is removed), and removes the file if the module created it for these keys alone.
  - Also reads, without changing anything, who keeps the node's CDI spec current when
    O(cdi_enabled) - the toolkit's C(nvidia-cdi-refresh.path) / C(nvidia-cdi-refresh.service)
    (toolkit 1.18 or later) or M(gpufleet.nvidia.cdi_spec) - and whether the spec must be
    written again now (see RV(cdi)); the caller acts on that.
author:
  - gpufleet.nvidia maintainers (@gpufleet)
requirements:
  - tomlkit (python3-tomlkit) on the node
options:
  path:
    description: The toolkit's configuration file.
    type: path
    default: /etc/nvidia-container-runtime/config.toml
  isolate_unprivileged:
    description:
      - V(true) sets the pair; V(false) undoes what the module set; not given - the file is
        only read.
    type: bool
  cdi_enabled:
    description: Whether the node uses CDI; V(false) returns RV(cdi) with C(method=none).
    type: bool
    default: false
  cdi_source:
    description:
      - Who keeps the spec current. V(toolkit) - the toolkit's refresh units (refused by name
        when the installed toolkit has none); V(module) - M(gpufleet.nvidia.cdi_spec);
        V(auto) - the toolkit's units where they are installed, the module elsewhere.
    type: str
    choices: [auto, toolkit, module]
    default: auto
  cdi_output:
    description:
      - Where M(gpufleet.nvidia.cdi_spec) writes the spec - the C(cdi.output) this module returns when that module keeps it current,
        and the file removed (when the module wrote it) once the toolkit's units take over.
    type: path
    default: /etc/cdi/nvidia.yaml
  driver_changed:
    description: The driver changed in this run (the driver layer's result); the toolkit's spec is then written again.
    type: bool
    default: false
  reboot_pending:
    description: The node waits for a reboot into a new driver; no spec is refreshed before it.
    type: bool
    default: false
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying the target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details:
      - The whole file before and after.
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
notes:
  - The two keys are refused by name when they hold something other than a boolean (the toolkit
    cannot read the file then), before anything is written.
  - A toolkit package upgrade rewrites the file with C(nvidia-ctk config --in-place), which keeps
    the keys' values; the record comment may be lost with it, and V(false) then leaves the keys set.
seealso:
  - module: gpufleet.nvidia.cdi_spec
  - module: gpufleet.nvidia.dev_char_symlinks
  - name: NVIDIA Container Toolkit - CDI support (automatic CDI specification generation)
    description: The nvidia-cdi-refresh units.
    link: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html
"""

EXAMPLES = r"""
- name: Keep unprivileged containers from asking for GPUs
  gpufleet.nvidia.toolkit_config:
    isolate_unprivileged: true

- name: Put the toolkit's own defaults back
  gpufleet.nvidia.toolkit_config:
    isolate_unprivileged: false

- name: Say who keeps the CDI spec current after the driver layer ran
  gpufleet.nvidia.toolkit_config:
    cdi_enabled: true
    driver_changed: "{{ nvidia_driver_result is changed }}"
  register: toolkit
- ansible.builtin.debug:
    msg: "{{ toolkit.cdi.method }}: {{ toolkit.cdi.reason }}"
"""

RETURN = r"""
path:
  description: The file.
  returned: always
  type: str
  sample: /etc/nvidia-container-runtime/config.toml
exists:
  description: Whether the file exists after the run (in check mode, would exist).
  returned: always
  type: bool
  sample: true
isolation:
  description: The two settings as the toolkit reads them (its defaults for a missing key), after the run.
  returned: always
  type: dict
  sample: {envvar_when_unprivileged: false, as_volume_mounts: true, isolated: true}
mode:
  description: C(nvidia-container-runtime.mode) of the file (V(auto) when unset).
  returned: always
  type: str
  sample: auto
cdi:
  description:
    - Who keeps the CDI spec current and what to do now. C(method) - V(toolkit), V(module) or
      V(none); C(refresh) - write the spec now (start C(nvidia-cdi-refresh.service), or run
      M(gpufleet.nvidia.cdi_spec)); C(output) - the spec that method writes;
      C(remove_module_spec) - the toolkit took over from a spec M(gpufleet.nvidia.cdi_spec)
      wrote, which should go (the two would describe the same devices); C(reason) - why, in
      words; C(unit) - the toolkit's path unit, or null; C(loaded_driver) and C(spec_driver) -
      the loaded driver's version and the one the toolkit's spec was written for.
  returned: always
  type: dict
  sample:
    enabled: true
    method: toolkit
    refresh: false
    output: /var/run/cdi/nvidia.yaml
    remove_module_spec: false
    reason: /var/run/cdi/nvidia.yaml is current (driver 580.159.04); nvidia-cdi-refresh.path keeps it so
    unit: /usr/lib/systemd/system/nvidia-cdi-refresh.path
    loaded_driver: 580.159.04
    spec_driver: 580.159.04
msg:
  description: What was done, in words.
  returned: always
  type: str
  sample: "/etc/nvidia-container-runtime/config.toml: isolation set; unprivileged containers get GPUs only through the device plugin's volume mounts"
diff:
  description: The file before and after, in diff mode.
  returned: when diff mode is on
  type: dict
  sample: {before: "", after: "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n",
           before_header: /etc/nvidia-container-runtime/config.toml, after_header: /etc/nvidia-container-runtime/config.toml}
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi_refresh, edit, toolkit_config


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default=toolkit_config.CONFIG_PATH),
            isolate_unprivileged=dict(type="bool"),
            cdi_enabled=dict(type="bool", default=False),
            cdi_source=dict(type="str", choices=list(cdi_refresh.SOURCES), default="auto"),
            cdi_output=dict(type="path", default=cdi_refresh.MODULE_SPEC),
            driver_changed=dict(type="bool", default=False),
            reboot_pending=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    if not edit.load_tomlkit():
        module.fail_json(msg=missing_required_lib("tomlkit"), exception=edit.TOMLKIT_IMPORT_ERROR)
    params = module.params
    host = Host.for_module(module)
    try:
        state = cdi_refresh.read_state(host, params["cdi_output"])
        cdi = cdi_refresh.decide(params["cdi_enabled"], params["cdi_source"], state,
                                 params["driver_changed"], params["reboot_pending"], params["cdi_output"])
        result = toolkit_config.converge(host, params, module.check_mode, module._diff)
    except GpuFleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    cdi.update(unit=state["unit"], loaded_driver=state["loaded"], spec_driver=state["toolkit_spec"])
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(cdi=cdi, **result)


if __name__ == "__main__":
    main()
