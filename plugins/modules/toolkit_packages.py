#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: toolkit_packages
short_description: Install, pin and hold the NVIDIA Container Toolkit's packages on Debian and Ubuntu, in one pass
version_added: 0.1.0
description:
  - Adds NVIDIA's apt repository (or a mirror), trusted only through its key (C(signed-by)), pins
    the four toolkit packages to one version, installs them at that version, and holds them.
  - Reads the key, the source and the pin files and the packages' dpkg state first, builds the
    desired state in memory and changes only what differs; a run that changes nothing costs one
    C(dpkg-query), and downloads no key (see O(repo_key_refresh)). The package lists are
    refreshed only when the repository changed, or when an install needs lists older than
    O(cache_valid_time).
  - With O(runtime), the same call then adds the NVIDIA runtime handler to the node's container
    runtime, exactly as M(gpufleet.nvidia.container_runtime) does with the same options (its
    result is RV(runtime)); the runtime's Python dependency C(python3-tomlkit), given in
    O(extra_packages), is installed first and imported after the install.
  - Debian and Ubuntu only; the RHEL family is handled by the role's dnf tasks.
author:
  - gpufleet.nvidia maintainers (@gpufleet)
options:
  version:
    description:
      - The toolkit version, V(1.17.8) (NVIDIA's package revision C(-1) is added) or V(1.17.8-1).
    type: str
    required: true
  packages:
    description: The packages that move together at O(version).
    type: list
    elements: str
    default: [nvidia-container-toolkit, nvidia-container-toolkit-base, libnvidia-container-tools, libnvidia-container1]
  extra_packages:
    description: Other packages to install (any version) in the same apt call, for instance the runtime module's C(python3-tomlkit).
    type: list
    elements: str
    default: []
  hold:
    description: Hold the packages (C(apt-mark hold)) so that upgrades never move them; V(false) releases a hold.
    type: bool
    default: true
  repo_manage:
    description: Write the repository's key and source file. V(false) installs from the repositories the node already has.
    type: bool
    default: true
  repo_url:
    description: The flat repository, NVIDIA's C(https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)) or a mirror.
    type: str
    default: https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)
  repo_key_url:
    description: Where the repository's ASCII-armored key is downloaded from (on the node), unless O(repo_key) is given.
    type: str
    default: https://nvidia.github.io/libnvidia-container/gpgkey
  repo_key:
    description: The key's ASCII-armored content; nothing is downloaded then.
    type: str
    default: ""
  repo_key_refresh:
    description:
      - Download the key from O(repo_key_url) on every run, and replace the keyring when the key
        changed (a rotated key).
      - With V(false), it is downloaded only when the keyring holds no armored key, or when the
        source file does not say that the keyring came from this O(repo_key_url) (the source
        file's comment records it). A run that changes nothing then makes no request to the key's
        server, and does not fail when it cannot be reached.
    type: bool
    default: false
  keyring:
    description: Where the key is written; the source's C(signed-by) names it.
    type: path
    default: /etc/apt/keyrings/nvidia-container-toolkit.asc
  source_file:
    description: The apt source file.
    type: path
    default: /etc/apt/sources.list.d/nvidia-container-toolkit.list
  pin_file:
    description: The apt preferences file pinning the packages at O(version).
    type: path
    default: /etc/apt/preferences.d/nvidia-container-toolkit.pref
  update_cache:
    description: Refresh the package lists before an install even when they are younger than O(cache_valid_time).
    type: bool
    default: false
  cache_valid_time:
    description: Seconds the package lists stay fresh enough for an install.
    type: int
    default: 3600
  runtime:
    description:
      - After the packages, add the nvidia runtime handler to the container runtime's
        configuration with these options, which are those of M(gpufleet.nvidia.container_runtime)
        (see there for the details) - the very same work, in the same module run.
      - Omitted, no runtime configuration is read or touched.
      - Every runtime but Docker needs the Python library C(tomlkit) (C(python3-tomlkit) in
        O(extra_packages)); the module fails with the usual missing library message when it is
        still missing after the install (in check mode, when it is not installed yet).
    type: dict
    suboptions:
      runtime:
        description: The container runtime whose configuration is edited.
        type: str
        required: true
        choices: [containerd, crio, docker, k3s, rke2]
      state:
        description: V(present) adds or updates the handler, V(absent) removes it and undoes the module's other changes.
        type: str
        default: present
        choices: [present, absent]
      config_mode:
        description:
          - V(dropin) writes a drop-in file that the main configuration imports (containerd, CRI-O);
            V(inplace) edits the main configuration file.
          - Default V(dropin) for containerd and CRI-O; k3s, RKE2 and Docker support only V(inplace).
        type: str
        choices: [dropin, inplace]
      config_path:
        description: The main configuration file (default - the runtime's own, see M(gpufleet.nvidia.container_runtime)).
        type: path
      dropin_path:
        description:
          - The drop-in file with O(runtime.config_mode=dropin).
          - Default C(/etc/containerd/conf.d/99-nvidia.toml) or C(/etc/crio/crio.conf.d/99-nvidia.toml).
        type: path
      runtime_name:
        description: The handler's name (what a Kubernetes C(RuntimeClass) names as C(handler)).
        type: str
        default: nvidia
      binary_name:
        description:
          - The NVIDIA runtime executable.
          - Default C(/usr/bin/nvidia-container-runtime); C(nvidia-container-runtime) (looked up in C(PATH)) for Docker.
        type: path
      set_as_default:
        description: Make the handler the default runtime; with V(false), a default the module set earlier is given back.
        type: bool
        default: false
      enable_cdi:
        description: Turn on CDI device injection (containerd's CRI plugin, Docker 25 and later).
        type: bool
        default: false
      enable_cri:
        description: containerd only. Remove the CRI plugin from C(disabled_plugins).
        type: bool
        default: false
      config_version:
        description:
          - containerd only. The config version to write into a file that has no C(version) and no
            version-1 content, when no containerd binary tells it.
        type: int
        choices: [2, 3]
      containerd_binary:
        description: The containerd executable used to read the version and check the new configuration.
        type: path
      validate:
        description: Check a containerd configuration with C(containerd config dump) before writing it.
        type: bool
        default: true
      backup:
        description: Keep a timestamped copy of each file before it is changed or removed (RV(runtime.backup_files)).
        type: bool
        default: false
attributes:
  check_mode:
    description:
      - Plans everything and changes nothing; the key is downloaded when a run would download it.
      - With O(runtime) on a node where C(python3-tomlkit) is not installed yet, the runtime's
        change cannot be planned, and the module fails as M(gpufleet.nvidia.container_runtime) does.
    support: full
  diff_mode:
    description: The files before and after, and the packages with their versions and holds (and with O(runtime), its files).
    support: full
  platform:
    description: Debian and Ubuntu.
    support: full
    platforms: debian
notes:
  - Every option is checked before anything is read or written (in check mode too) - O(repo_url)
    and O(repo_key_url) are C(http), C(https) or C(file) URLs, O(keyring), O(source_file) and
    O(pin_file) absolute normalized paths, the package names Debian package names - so that no
    value can add a line or an option to the source or pin file (a second source,
    C(trusted=yes), a pin stanza) or an option to apt-get; a refusal names the option and its value.
  - A key that is not ASCII-armored, or an apt command that fails, fails the module with apt's words.
    The files are written before apt runs (apt reads them); when the refresh or the install fails,
    they are put back as they were, byte for byte (a file that was not there is removed), and the
    message says so. Once the install is done the files stay, as they pin what is installed.
  - The module restarts nothing. Restart the runtime when RV(runtime.changed) is true, not when
    only the packages changed.
requirements:
  - With O(runtime), the Python library C(tomlkit) for every runtime but Docker (installed by the
    same call when C(python3-tomlkit) is in O(extra_packages)).
seealso:
  - module: gpufleet.nvidia.container_runtime
"""

EXAMPLES = r"""
- name: Install the toolkit 1.17.8, pinned and held, from NVIDIA's repository
  gpufleet.nvidia.toolkit_packages:
    version: "1.17.8"

- name: From a mirror whose key is in the inventory
  gpufleet.nvidia.toolkit_packages:
    version: "1.17.8-1"
    repo_url: https://mirror.example.com/libnvidia-container/stable/deb/$(ARCH)
    repo_key: "{{ nvidia_toolkit_mirror_key }}"

- name: Install the toolkit and add the nvidia runtime to containerd, in one module run
  gpufleet.nvidia.toolkit_packages:
    version: "1.17.8-1"
    extra_packages: [python3-tomlkit]
    runtime:
      runtime: containerd
      backup: true
  register: toolkit_result
  notify: Restart containerd  # a handler with `when: toolkit_result.runtime.changed`
"""

RETURN = r"""
version:
  description: The package version in force.
  type: str
  returned: always
  sample: 1.17.8-1
packages:
  description: Each package's installed version after the run (null when not installed, in check mode).
  type: dict
  returned: always
  sample: {nvidia-container-toolkit: 1.17.8-1, libnvidia-container1: 1.17.8-1}
held:
  description: The packages on hold after the run.
  type: list
  elements: str
  returned: always
  sample: [libnvidia-container-tools, libnvidia-container1, nvidia-container-toolkit, nvidia-container-toolkit-base]
actions:
  description: What was done (or, in check mode, would be done), in order.
  type: list
  elements: str
  returned: always
  sample: ["write /etc/apt/preferences.d/nvidia-container-toolkit.pref", "apt-get install nvidia-container-toolkit=1.17.8-1"]
files:
  description: The files written (or to be written).
  type: list
  elements: str
  returned: always
  sample: [/etc/apt/preferences.d/nvidia-container-toolkit.pref]
key_downloaded:
  description: The key was downloaded from O(repo_key_url) in this run (see O(repo_key_refresh)).
  type: bool
  returned: always
  sample: false
msg:
  description: One line about the result (with O(runtime), the runtime's after it).
  type: str
  returned: always
  sample: NVIDIA Container Toolkit 1.17.8-1 installed, pinned and held; the nvidia runtime is already configured
runtime:
  description:
    - The runtime's result, every key that M(gpufleet.nvidia.container_runtime) returns (see its
      RETURN for C(msg), C(changed_files), C(config_version), C(plugin_table), C(runtime_table),
      C(restart_needed), C(containerd_version), C(validation) and C(diff)), with its own
      C(changed); the top-level C(changed) is true when the packages or the runtime changed. The
      keys the container_toolkit role reads are below.
  type: dict
  returned: when O(runtime) is given
  sample:
    changed: true
    msg: configured the nvidia runtime (create /etc/containerd/conf.d/99-nvidia.toml, update /etc/containerd/config.toml)
    files: [{path: /etc/containerd/conf.d/99-nvidia.toml, action: create}, {path: /etc/containerd/config.toml, action: update}]
    backup_files: {/etc/containerd/config.toml: /etc/containerd/config.toml.12345.2026-01-01@00:00:00~}
    restart_needed: true
  contains:
    changed:
      description: Whether the runtime's configuration changed (or would, in check mode); what a restart depends on.
      type: bool
      returned: always
      sample: true
    files:
      description: Every file looked at and what happened to it (V(create), V(update), V(delete), V(unchanged)).
      type: list
      elements: dict
      returned: always
      sample: [{path: /etc/containerd/conf.d/99-nvidia.toml, action: create}, {path: /etc/containerd/config.toml, action: update}]
    backup_files:
      description: Path of each changed file -> its backup, with O(runtime.backup=true).
      type: dict
      returned: always
      sample: {/etc/containerd/config.toml: /etc/containerd/config.toml.12345.2026-01-01@00:00:00~}
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import config as runtime_config
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import edit as runtime_edit
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import toolkit_apt


ARGUMENT_SPEC = dict(
    version=dict(type="str", required=True),
    packages=dict(type="list", elements="str", default=list(toolkit_apt.PACKAGES)),
    extra_packages=dict(type="list", elements="str", default=[]),
    hold=dict(type="bool", default=True),
    repo_manage=dict(type="bool", default=True),
    repo_url=dict(type="str", default="https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"),
    repo_key_url=dict(type="str", default="https://nvidia.github.io/libnvidia-container/gpgkey", no_log=False),
    repo_key=dict(type="str", default="", no_log=False),
    repo_key_refresh=dict(type="bool", default=False, no_log=False),
    keyring=dict(type="path", default=toolkit_apt.KEYRING),
    source_file=dict(type="path", default=toolkit_apt.SOURCE_FILE),
    pin_file=dict(type="path", default=toolkit_apt.PIN_FILE),
    update_cache=dict(type="bool", default=False),
    cache_valid_time=dict(type="int", default=3600),
    runtime=dict(type="dict", options=runtime_config.ARGUMENT_SPEC),
)


def configure_runtime(module, host, packages):
    """What the container_runtime module does, once the packages (and tomlkit) are in place."""
    params = module.params["runtime"]
    if not runtime_edit.load_tomlkit() and params["runtime"] != "docker":
        module.fail_json(
            msg=missing_required_lib(
                "tomlkit",
                reason="to edit the configuration of %s%s" % (
                    params["runtime"], " (check mode installs nothing)" if module.check_mode else ""),
            ),
            exception=runtime_edit.TOMLKIT_IMPORT_ERROR,
            changed=packages["changed"],
            actions=packages["actions"],
        )
    return runtime_config.configure(params, host, module.check_mode, module._diff)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    host = Host.for_module(module)
    packages = None
    try:
        result = packages = toolkit_apt.converge(host, module.params, module.check_mode, module._diff)
        if module.params["runtime"] is not None:
            result = toolkit_apt.with_runtime(packages, configure_runtime(module, host, packages))
    except GpuFleetError as exc:
        done = dict(changed=packages["changed"], actions=packages["actions"]) if packages else {}
        module.fail_json(msg="toolkit_packages: %s%s" % ("runtime: " if packages else "", exc.msg), **dict(exc.details, **done))
    for warning in result.pop("warnings", []):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
