#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# Documentation only, as ansible.builtin.debug's: the action plugin of the same name does the work on
# the control host and accepts exactly the options documented here (it reads them from this file).

from __future__ import annotations

DOCUMENTATION = r"""
---
module: role_arguments
short_description: Check the variables of several of this collection's roles in one task
version_added: 0.1.0
description:
  - Checks the host's variables against the C(meta/argument_specs.yml) of each role in O(roles),
    as Ansible checks a role's variables before it runs the role (the variables the spec names,
    templated, unset ones taking the spec's defaults), and fails the host naming every wrong
    value and its role.
  - Ansible makes that check in a task of its own, for every role, host and play. The
    C(gpufleet.nvidia.site) playbook runs four roles on every node; it imports them with
    C(rolespec_validate=false) and checks all four with this module in its first task, so a
    wrong variable of any layer fails the node before any layer runs, and the check costs one
    task per node rather than four.
  - Runs on the control host, as an action plugin; nothing runs on the host.
author:
  - gpufleet.nvidia maintainers (@gpufleet)
options:
  roles:
    description:
      - The roles to check, by name (V(nvidia_driver)) or fully qualified
        (V(gpufleet.nvidia.nvidia_driver)); roles of this collection only.
    type: list
    elements: str
    required: true
  entry_point:
    description: The entry point whose argument spec is checked, in every role.
    type: str
    default: main
extends_documentation_fragment:
  - gpufleet.nvidia.attributes.controller_read_only
seealso:
  - module: ansible.builtin.validate_argument_spec
"""

EXAMPLES = r"""
- name: Check the variables of the host layers before any of them runs
  gpufleet.nvidia.role_arguments:
    roles: [discover, nvidia_driver, container_toolkit, validate]

- name: Install the driver; its variables were checked above
  ansible.builtin.import_role:
    name: gpufleet.nvidia.nvidia_driver
    rolespec_validate: false
"""

RETURN = r"""
roles:
  description: The roles checked, by their short names, in the order given.
  type: list
  elements: str
  returned: success or when a variable is not valid
  sample: [discover, nvidia_driver]
argument_errors:
  description: The errors found, per role (the roles without any are left out).
  type: dict
  returned: success or when a variable is not valid
  sample: {nvidia_driver: ["value of nvidia_driver_method must be one of: package, preinstalled, operator, got: pkg"]}
"""
