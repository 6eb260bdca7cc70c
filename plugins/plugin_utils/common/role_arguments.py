# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Several of this collection's roles' variables checked at once, on the control host.

Used by gpufleet.nvidia.role_arguments and by gpufleet.nvidia.gpu_facts' ``roles``. The values
are read and checked as Ansible's own check reads and checks them (the variables named in the
spec, templated, then ``ArgumentSpecValidator`` with ``validate_role_argument_spec``); unset
variables take the spec's defaults.
"""

from __future__ import annotations

import os

import yaml

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

COLLECTION = "gpufleet.nvidia"
ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), "roles")
# Where Ansible looks for a role's argument specs, in its order.
SPEC_FILES = ("argument_specs.yml", "argument_specs.yaml", "main.yml", "main.yaml")


def role_names():
    """The roles of this collection (those with a tasks directory), sorted."""
    try:
        names = os.listdir(ROLES_DIR)
    except OSError:
        return []
    return sorted(name for name in names if os.path.isdir(os.path.join(ROLES_DIR, name, "tasks")))


def short_name(name):
    """``gpufleet.nvidia.nvidia_driver`` or ``nvidia_driver`` -> ``nvidia_driver``."""
    prefix = COLLECTION + "."
    return name[len(prefix):] if name.startswith(prefix) else name


def spec_path(role):
    """The file of the role's meta directory that holds its argument specs, or None."""
    for filename in SPEC_FILES:
        path = os.path.join(ROLES_DIR, role, "meta", filename)
        if os.path.isfile(path):
            return path
    return None


def load_specs(path):
    """A role's argument specs file, parsed: plain YAML, read with libyaml where it is there.

    Ansible's own loader takes about 20 times longer on these files (about 80 ms for the four of
    site.yml, in every host's worker), and they carry no tags or templates it would be needed for.
    """
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        with open(path, "rb") as handle:
            return yaml.load(handle, Loader=loader)  # noqa: S506 - a safe loader
    except (OSError, yaml.YAMLError) as exc:
        raise AnsibleActionFail("roles: cannot read %s: %s" % (path, exc))


def entry_point_options(data, role, entry_point, path):
    """The ``options`` of one entry point of a loaded argument specs file; raises AnsibleActionFail."""
    specs = (data or {}).get("argument_specs") if isinstance(data, dict) else None
    if not isinstance(specs, dict) or entry_point not in specs:
        raise AnsibleActionFail(
            "roles: %s.%s has no argument spec for entry point '%s' in %s" % (COLLECTION, role, entry_point, path)
        )
    options = (specs[entry_point] or {}).get("options") or {}
    if not isinstance(options, dict):
        raise AnsibleActionFail("roles: %s.%s: the options of entry point '%s' in %s are not a mapping" % (COLLECTION, role, entry_point, path))
    return options


def role_options(role, entry_point):
    """The ``options`` of one entry point of one of this collection's roles; raises AnsibleActionFail."""
    path = spec_path(role)
    if path is None:
        if role not in role_names():
            raise AnsibleActionFail(
                "roles: '%s' is not a role of %s (expected one of: %s)" % (role, COLLECTION, ", ".join(role_names()))
            )
        raise AnsibleActionFail("roles: %s.%s has no meta/argument_specs.yml to check its variables against" % (COLLECTION, role))
    return entry_point_options(load_specs(path), role, entry_point, path)


def check(options, values):
    """The error messages of ``values`` against one entry point's ``options`` (none: valid)."""
    return list(ArgumentSpecValidator(options).validate(values, validate_role_argument_spec=True).error_messages)


def summary(roles, errors):
    """The task's message: every error, in the roles' order and named with its role, or that all are valid."""
    if not errors:
        return "The variables of %s are valid" % ", ".join("%s.%s" % (COLLECTION, role) for role in roles)
    lines = ["%s.%s: %s" % (COLLECTION, role, message) for role in roles for message in errors.get(role, [])]
    return "The roles' variables are not valid:\n" + "\n".join(lines)


def errors_of(templar, specs, task_vars):
    """``{role: error messages}`` of the roles (``(role, options)`` pairs) whose variables are not valid."""
    errors = {}
    for role, options in specs:
        # As Ansible's own check: the variables the spec names, templated; unset ones take its defaults.
        values = templar.template({name: task_vars[name] for name in options if name in task_vars})
        messages = check(options, values)
        if messages:
            errors[role] = messages
    return errors


def checked(templar, names, entry_point, task_vars):
    """The task's result for the roles ``names`` (also gpufleet.nvidia.gpu_facts' ``roles``); raises AnsibleActionFail."""
    roles = [short_name(name) for name in names]
    specs = [(role, role_options(role, entry_point)) for role in roles]
    errors = errors_of(templar, specs, task_vars or {})
    result = dict(changed=False, roles=roles, argument_errors=errors, msg=summary(roles, errors))
    if errors:
        result["failed"] = True
    return result
