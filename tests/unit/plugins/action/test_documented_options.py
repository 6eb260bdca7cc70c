"""What each action plugin accepts is what its module's documentation says, and nothing else.

``fleet_report_files``, ``kube_client_info`` and ``role_arguments`` read their argument spec from
the DOCUMENTATION of their module file (``common/argspec.py``); ``preflight`` validates with the
module's own spec from module_utils, which sanity holds to the
documentation. Either way the documented options (the file's own and its fragments', as
ansible-doc merges them) must be the options the plugin accepts, with the same type, default,
choices and the rest: the test fails when they differ. The messages a user sees for a wrong
option are pinned, in-process, through the plugins' own ``run``.
"""

from __future__ import annotations

import importlib
import os
from types import SimpleNamespace

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.gpufleet.nvidia.plugins.action import fleet_report_files as F
from ansible_collections.gpufleet.nvidia.plugins.action import kube_client_info as K
from ansible_collections.gpufleet.nvidia.plugins.action import role_arguments as R
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.common import argspec
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.common import role_arguments as role_arguments_lib
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import preflight as preflight_lib

PACKAGE = "ansible_collections.gpufleet.nvidia.plugins"
# Each action plugin and the spec it validates its task with.
SPECS = {
    "fleet_report_files": F.ARGUMENT_SPEC,
    "kube_client_info": K.ARGUMENT_SPEC,
    "role_arguments": R.ARGUMENT_SPEC,
    "preflight": preflight_lib.ARGUMENT_SPEC,
}
# What an option's documentation may hold beyond SPEC_KEYS: text only. Anything else (suboptions,
# no_log, ...) is something the spec read from it would lose, and fails the test.
DOC_ONLY_KEYS = {"description", "version_added"}


def _action_files():
    folder = os.path.dirname(F.__file__)
    return sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".py") and f != "__init__.py")


def _fragment_options(name):
    """The options of one of this collection's doc fragments (``gpufleet.nvidia.<file>.<var>``)."""
    namespace, collection, module, variable = name.split(".")
    assert (namespace, collection) == ("gpufleet", "nvidia"), name
    fragment = importlib.import_module("%s.doc_fragments.%s" % (PACKAGE, module)).ModuleDocFragment
    return yaml.safe_load(getattr(fragment, variable.upper())).get("options") or {}


def documented_options(name):
    """The options of the module ``name`` as ansible-doc shows them: its own and its fragments'."""
    module = importlib.import_module("%s.modules.%s" % (PACKAGE, name))
    doc = yaml.safe_load(module.DOCUMENTATION)
    options = dict(doc.get("options") or {})
    for fragment in doc.get("extends_documentation_fragment") or []:
        options.update(_fragment_options(fragment))
    return options


def test_every_action_plugin_is_covered():
    assert _action_files() == sorted(list(SPECS) + ["gpu_facts"])


def test_gpu_facts_answers_its_documented_options_and_passes_the_module_the_rest():
    from ansible_collections.gpufleet.nvidia.plugins.action import gpu_facts as G
    from ansible_collections.gpufleet.nvidia.plugins.modules import gpu_facts as module

    documented = yaml.safe_load(module.DOCUMENTATION)["options"]
    assert G.ActionModule._VALID_ARGS == set(documented) == set(module.ARGUMENT_SPEC)
    assert G.ACTION_SPEC == module.ACTION_SPEC == argspec.argument_spec(dict((k, documented[k]) for k in module.ACTION_SPEC))


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_documented_options_are_the_accepted_options(name):
    plugin = importlib.import_module("%s.action.%s" % (PACKAGE, name))
    documented, spec = documented_options(name), SPECS[name]
    assert set(documented) == set(spec) == plugin.ActionModule._VALID_ARGS
    for option, doc in documented.items():
        assert set(doc) <= set(argspec.SPEC_KEYS) | DOC_ONLY_KEYS, (option, sorted(doc))
        for key in argspec.SPEC_KEYS:
            assert doc.get(key) == spec[option].get(key), (option, key)


@pytest.mark.parametrize("name", ["fleet_report_files", "kube_client_info", "role_arguments"])
def test_the_stub_only_documents_and_the_plugin_reads_its_options(name):
    path = argspec.stub_path(importlib.import_module("%s.action.%s" % (PACKAGE, name)).__file__)
    module = importlib.import_module("%s.modules.%s" % (PACKAGE, name))
    assert os.path.samefile(path, module.__file__)
    assert set(vars(module)) & {"main", "AnsibleModule"} == set()
    assert SPECS[name] == argspec.argument_spec(yaml.safe_load(module.DOCUMENTATION)["options"])


def test_the_report_formats_documented_are_those_rendered():
    assert F.ARGUMENT_SPEC["formats"]["choices"] == sorted(F.RENDER)


def test_a_spec_is_read_from_the_documentation_of_the_module_of_the_same_name(tmp_path):
    (tmp_path / "action").mkdir()
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "thing.py").write_text(
        'X = 1\nDOCUMENTATION = r"""\noptions:\n  size:\n    description: [How big.]\n    type: int\n'
        '    default: 3\n    version_added: 0.2.0\n"""\nRETURN = ""\n')
    action = str(tmp_path / "action" / "thing.py")
    assert argspec.stub_path(action) == str(tmp_path / "modules" / "thing.py")
    assert argspec.from_stub(action) == {"size": {"type": "int", "default": 3}}
    (tmp_path / "modules" / "thing.py").write_text("X = 1\n")
    with pytest.raises(ValueError, match="has no DOCUMENTATION"):
        argspec.from_stub(action)
    assert argspec.argument_spec(None) == {}


def _run(plugin, args):
    """The plugin's ``run`` on a task with ``args``, on the control host (no variables)."""
    task = Task()
    task.action, task.args = "gpufleet.nvidia.x", args
    loader = DataLoader()
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/tmp"))
    action = plugin.ActionModule(task=task, connection=connection, play_context=PlayContext(), loader=loader,
                                 templar=Templar(loader), shared_loader_obj=None)
    return action.run(task_vars={})


@pytest.mark.parametrize("plugin, args, msg", [
    (F, {"report": {}, "path": "r", "formats": ["xml"]}, "value of formats must be one or more of: html, json, junit, prom, txt. Got no match for: xml"),
    (F, {"report": {}}, "missing required arguments: path"),
    (F, {"report": "text", "path": "r"},
     "argument 'report' is of type str and we were unable to convert to dict: dictionary requested, could not parse JSON or key=value"),
    (R, {}, "missing required arguments: roles"),
    (R, {"roles": ["nvidia_driver"], "entry_point": 3},
     "roles: gpufleet.nvidia.nvidia_driver has no argument spec for entry point '3' in %s" % role_arguments_lib.spec_path("nvidia_driver")),
])
def test_a_wrong_option_is_refused_with_the_validators_message(plugin, args, msg):
    assert _run(plugin, args) == {"failed": True, "msg": msg}


def test_an_unknown_option_is_refused_by_name():
    with pytest.raises(Exception, match="Invalid options for gpufleet.nvidia.x: kubeconfg"):
        _run(K, {"kubeconfg": "/nowhere"})


def test_the_documented_default_is_taken(monkeypatch):
    monkeypatch.setenv("HOME", "/home/someone")
    assert _run(K, {})["kubeconfig"] == {"path": "/home/someone/.kube/config", "exists": False}
