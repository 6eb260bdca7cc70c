# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argument spec of an action plugin that answers its task itself, read from its module's documentation.

Such an action plugin (``fleet_report_files``, ``kube_client_info``, ``role_arguments``) starts no
module; the module file of the same name only documents it, as ``ansible.builtin.debug``'s does.
The options in that file's ``DOCUMENTATION`` are then the one declaration of what the task
accepts: the plugin validates its task against them and declares nothing of its own.

Read on the control host only (by the action plugins; no module imports this): the file is parsed
with :mod:`ast`, not imported, and its documentation loaded as plain YAML.
"""

from __future__ import annotations

import ast
import os

#: The keys of an option's documentation that an argument spec has too; the others (its
#: description) only document it.
SPEC_KEYS = ("type", "elements", "required", "default", "choices", "aliases")


def stub_path(action_file):
    """``.../plugins/action/<name>.py`` -> ``.../plugins/modules/<name>.py``, the module documenting it."""
    plugins = os.path.dirname(os.path.dirname(os.path.abspath(action_file)))
    name = os.path.splitext(os.path.basename(action_file))[0]
    return os.path.join(plugins, "modules", name + ".py")


def documentation(path):
    """The ``DOCUMENTATION`` string of a Python file, found with :mod:`ast` (the file is not run)."""
    with open(path, "rb") as handle:
        tree = ast.parse(handle.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DOCUMENTATION" for t in node.targets):
            return node.value.value
    raise ValueError("%s has no DOCUMENTATION" % path)


def argument_spec(options):
    """Documented options -> the argument spec they describe (each option's SPEC_KEYS)."""
    return dict((name, dict((k, doc[k]) for k in SPEC_KEYS if k in doc)) for name, doc in (options or {}).items())


def from_stub(action_file):
    """The argument spec of the action plugin ``action_file``: its module's documented options."""
    import yaml  # pylint: disable=import-outside-toplevel  # on the control host, where Ansible's own PyYAML is

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load(documentation(stub_path(action_file)), Loader=loader)  # noqa: S506 - a safe loader
    return argument_spec(doc.get("options"))
