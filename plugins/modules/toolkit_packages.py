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
    C(dpkg-query) (and the key's download when O(repo_key_url) is used). The package lists are
    refreshed only when the repository changed, or when an install needs lists older than
    O(cache_valid_time).
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
attributes:
  check_mode:
    description: Plans everything and changes nothing; the key is still downloaded to compare it.
    support: full
  diff_mode:
    description: The files before and after, and the packages with their versions and holds.
    support: full
  platform:
    description: Debian and Ubuntu.
    support: full
    platforms: debian
notes:
  - A key that is not ASCII-armored, or an apt command that fails, fails the module with apt's words;
    files are written before apt runs, so a failed install leaves the repository configured for a retry.
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
msg:
  description: One line about the result.
  type: str
  returned: always
  sample: NVIDIA Container Toolkit 1.17.8-1 installed, pinned and held
"""

import glob
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible.module_utils.urls import fetch_url

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _safe_write
from ansible_collections.gpufleet.nvidia.plugins.module_utils import _toolkit_apt
from ansible_collections.gpufleet.nvidia.plugins.module_utils._errors import GpuFleetError


class ModuleSystem(object):
    """The node, through the module: commands, files, the key's download, the lists' age."""

    def __init__(self, module):
        self.module = module

    def run(self, argv, environ_update=None):
        return self.module.run_command(argv, environ_update=environ_update or {})

    def read(self, path):
        return _safe_write.read_file(path)

    def write(self, path, text):
        _safe_write.write_file(self.module, path, text)

    def fetch(self, url):
        response, info = fetch_url(self.module, url, timeout=30)
        if info.get("status") != 200 or response is None:
            raise GpuFleetError(
                "could not download the repository key from %s: %s (HTTP %s); nothing was changed"
                % (url, info.get("msg"), info.get("status")),
                url=url,
            )
        return to_native(response.read())

    def lists_age(self):
        lists = [p for p in glob.glob(os.path.join(_toolkit_apt.LISTS_DIR, "*")) if os.path.isfile(p) and not p.endswith("lock")]
        if not lists:
            return None
        return time.time() - max(os.path.getmtime(p) for p in lists)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            version=dict(type="str", required=True),
            packages=dict(type="list", elements="str", default=list(_toolkit_apt.PACKAGES)),
            extra_packages=dict(type="list", elements="str", default=[]),
            hold=dict(type="bool", default=True),
            repo_manage=dict(type="bool", default=True),
            repo_url=dict(type="str", default="https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"),
            repo_key_url=dict(type="str", default="https://nvidia.github.io/libnvidia-container/gpgkey", no_log=False),
            repo_key=dict(type="str", default="", no_log=False),
            keyring=dict(type="path", default=_toolkit_apt.KEYRING),
            source_file=dict(type="path", default=_toolkit_apt.SOURCE_FILE),
            pin_file=dict(type="path", default=_toolkit_apt.PIN_FILE),
            update_cache=dict(type="bool", default=False),
            cache_valid_time=dict(type="int", default=3600),
        ),
        supports_check_mode=True,
    )
    try:
        result = _toolkit_apt.converge(ModuleSystem(module), module.params, module.check_mode, module._diff)
    except GpuFleetError as exc:
        module.fail_json(msg="toolkit_packages: " + exc.msg, **exc.details)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
