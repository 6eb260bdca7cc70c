# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of gpufleet.nvidia.preflight: judge facts on the control host.

Preflight is a pure function of the node's facts and the desired state. When the task passes
``facts`` (the discover role passes those gpu_facts just gathered), nothing needs the node: the
rules run here, on the control host, and the task costs no round trip to it. Without ``facts``
the module runs on the node as usual, gathering them itself. The result is the module's either
way (same options, same checks, same failure message); a failure here returns only the message
and the counts, which is what Ansible prints of it (the message names each blocking problem with
its fix and the waiver).
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import preflight
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.discovery.preflight import judged


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(preflight.ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # no longer has any effect
        if self._task.args.get("facts") is None:
            result.update(self._execute_module(module_name="gpufleet.nvidia.preflight", task_vars=task_vars))
            return result
        try:
            dummy, params = self.validate_argument_spec(
                argument_spec=preflight.ARGUMENT_SPEC, required_if=preflight.REQUIRED_IF
            )
        except AnsibleActionFail as exc:
            result.update(failed=True, msg=str(exc))
            return result
        result.update(judged(params))
        return result
