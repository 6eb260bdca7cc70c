# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of gpufleet.nvidia.role_arguments: several roles' variables checked in one task.

Ansible checks a role's variables against its ``meta/argument_specs.yml`` in a task of its own,
once per role, host and play. site.yml runs four roles on every node; it turns their own checks
off (``rolespec_validate: false``) and checks all four here, in the first task of the run, so a
wrong variable of any layer stops the node before any layer changes it. The values are read and
checked as Ansible's own check reads and checks them (the variables named in the spec, templated,
then ``ArgumentSpecValidator`` with ``validate_role_argument_spec``); unset variables take the
spec's defaults.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.common import argspec
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.common.role_arguments import checked

ARGUMENT_SPEC = argspec.from_stub(__file__)  # the options documented in plugins/modules/role_arguments.py


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # no longer has any effect
        try:
            dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
            result.update(checked(self._templar, args["roles"], args["entry_point"], task_vars))
        except AnsibleActionFail as exc:
            result.update(failed=True, msg=str(exc))
        return result
