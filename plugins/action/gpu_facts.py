# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of gpufleet.nvidia.gpu_facts: discovery and what rides on it, in one task per node.

Every task costs the control host a worker and a result per node, whatever the task does (at 1,000
nodes, 150-350 ms of the controller each; docs/performance.md). The site playbook's discovery took
three: the roles' variables, the module, and preflight judging the facts it returned. Here they
are one: ``roles`` are checked first, on the control host (gpufleet.nvidia.role_arguments' check,
so a wrong variable fails the node before it is read); the module reads the node; ``preflight``
judges the facts here (gpufleet.nvidia.preflight's rules, message and failure), on a node with
GPUs or with ``preflight_without_gpu``. The module never sees these three options.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import preflight
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.common import argspec, role_arguments
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.discovery.preflight import judged

#: The module's documented options (those of ``validate`` are checked by the module).
DOCUMENTED = argspec.from_stub(__file__)
#: The options answered here, as the module's documentation declares them.
ACTION_SPEC = dict((k, v) for k, v in DOCUMENTED.items() if k in ("roles", "preflight", "preflight_without_gpu"))
#: preflight's options that discovery supplies itself.
SUPPLIED = ("facts", "host_root")
#: preflight's options as this task takes them (the facts are put in after the node is read).
PREFLIGHT_SPEC = dict((k, v) for k, v in preflight.ARGUMENT_SPEC.items() if k != "facts")


def validated(spec, values, name, **kwargs):
    """``values`` checked against ``spec``, with defaults; raises AnsibleActionFail naming the option."""
    checked = ArgumentSpecValidator(spec, **kwargs).validate(values)
    if checked.error_messages:
        raise AnsibleActionFail("%s: %s" % (name, "; ".join(checked.error_messages)))
    return checked.validated_parameters


def preflight_params(options, host_root):
    """The preflight options, checked (the facts are put in afterwards); raises AnsibleActionFail."""
    given = sorted(set(options) & set(SUPPLIED))
    if given:
        raise AnsibleActionFail("preflight: %s cannot be set here: discovery supplies %s" % (", ".join(given), " and ".join(SUPPLIED)))
    return validated(PREFLIGHT_SPEC, dict(options, host_root=host_root), "preflight", required_if=preflight.REQUIRED_IF)


def judge(result, own, host_root):
    """Add ``gpu_node`` and preflight's verdict on the facts in the module's ``result``.

    ``gpu_node``: the node has GPUs, or is prepared as a GPU node without one
    (``preflight_without_gpu``); preflight judges only such a node. Its options are checked here,
    when they are used, as preflight's own task checked them: a node that needs no preflight needs
    none of its options either (``driver_version`` for ``package``).
    """
    facts = (result.get("ansible_facts") or {}).get("gpufleet_nvidia")
    if result.get("failed") or facts is None:
        return result
    result["gpu_node"] = bool(facts.get("gpu_count") or own["preflight_without_gpu"])
    if own["preflight"] is None or not result["gpu_node"]:
        return result
    try:
        params = preflight_params(own["preflight"], host_root)
    except AnsibleActionFail as exc:
        result.update(failed=True, msg=str(exc))
        return result
    verdict = judged(dict(params, facts=facts))
    result["preflight"] = verdict
    result["warnings"] = list(result.get("warnings") or []) + list(verdict.get("warnings") or [])
    if verdict.get("failed"):
        # the node stops here: its validation serves no later play, and Ansible prints a failed result whole
        result["ansible_facts"].pop("gpufleet_nvidia_validation", None)
        result.update(failed=True, msg=verdict["msg"])
    return result


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(DOCUMENTED)

    def _before(self, task_vars):
        """``(own options, failed result or None)``: what is checked before the node is read."""
        own = validated(ACTION_SPEC, dict((k, v) for k, v in self._task.args.items() if k in ACTION_SPEC), "gpu_facts")
        if not own["roles"]:
            return own, None
        checked = role_arguments.checked(self._templar, own["roles"], "main", task_vars)
        return own, (checked if checked.get("failed") else dict(roles=checked["roles"], argument_errors={}))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # no longer has any effect
        try:
            own, checked = self._before(task_vars)
        except AnsibleActionFail as exc:
            result.update(failed=True, msg=str(exc))
            return result
        result.update(checked or {})
        if result.get("failed"):
            return result
        module_args = dict((k, v) for k, v in self._task.args.items() if k not in ACTION_SPEC)
        result.update(self._execute_module(module_name="gpufleet.nvidia.gpu_facts", module_args=module_args, task_vars=task_vars))
        return judge(result, own, module_args.get("host_root") or "/")
