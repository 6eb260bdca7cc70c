# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of gpufleet.nvidia.host_validate: reuse a validation of this run.

When the task passes ``reuse`` (the site playbook passes discovery's gpu_facts result, made with
``validate``, on the nodes no host layer changed) and that validation was made with the task's
own options, it is this task's result, decided here on the control host: the node is not read a
second time. Otherwise the module runs on the node as usual, without ``reuse`` (which can be
large), and ``reuse_refused`` says why the earlier one could not serve.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate import host as host_validate


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(host_validate.ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # no longer has any effect
        if self._task.args.get("reuse") is None:
            result.update(self._execute_module(module_name="gpufleet.nvidia.host_validate", task_vars=task_vars))
            return result
        try:
            dummy, params = self.validate_argument_spec(argument_spec=host_validate.ARGUMENT_SPEC)
        except AnsibleActionFail as exc:
            result.update(failed=True, msg=str(exc))
            return result
        validation, why_not = host_validate.reusable(params["reuse"], params)
        if validation is not None:
            result.update(host_validate.reused_result(validation, params))
            return result
        args = dict((k, v) for k, v in self._task.args.items() if k != "reuse")
        result.update(self._execute_module(module_name="gpufleet.nvidia.host_validate", module_args=args, task_vars=task_vars))
        if not result.get("failed"):
            result["reuse_refused"] = why_not
        return result
