"""Node-side modules carry only what they run: the module_utils of each module's AnsiballZ payload.

The payload is listed with Ansible's own finder (``ansible.executor.module_common.recursive_finder``,
what ``ansible-playbook`` runs to build the zip it sends to a node), in a Python process of its
own: the finder needs Ansible's collection loader, which the unit tests' conftest does not
install. On a node every file of the payload is compiled on every run (a zip import writes no
bytecode), and every import it makes is run, so a module that only reads the node must not carry
the runtime configuration editors, nor anything that imports tomlkit.

Run as a script to print each module's payload as JSON:
``python tests/unit/test_payloads.py [module ...]`` (default: every module of plugins/modules/).
"""

from __future__ import annotations

import ast
import datetime
import io
import json
import os
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES = os.path.join(ROOT, "plugins", "modules")
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
PREFIX = "ansible_collections/gpufleet/nvidia/plugins/module_utils/"

#: The modules that only read the node (discovery, preflight, validation).
READ_ONLY = ("gpu_facts", "host_validate", "preflight")
#: The runtime configuration editors and what only they use: none of it in a read-only payload.
EDITORS = (
    "runtime/edit.py",
    "runtime/toml_edit.py",
    "runtime/files.py",
    "runtime/undo.py",
    "runtime/config.py",
    "runtime/config_plan.py",
    "runtime/config_check.py",
    "runtime/containerd.py",
    "runtime/containerd_config.py",
    "runtime/containerd_inplace.py",
    "runtime/k3s.py",
    "runtime/crio.py",
    "runtime/docker.py",
    "runtime/toolkit_config.py",
    "runtime/toolkit_apt.py",
    "runtime/dev_char.py",
    "runtime/cdi.py",
    "runtime/cdi_refresh.py",
    "runtime/cdi_spec.py",
)


def build(name):
    """``{"bytes": size of the zip, "module_utils": [the collection's files in it], "files": [every file]}``."""
    from ansible.executor import module_common  # pylint: disable=import-outside-toplevel

    path = os.path.join(MODULES, name + ".py")
    with open(path, "rb") as handle:
        source = handle.read()
    fqn = "ansible_collections.gpufleet.nvidia.plugins.modules." + name
    data = io.BytesIO()
    with zipfile.ZipFile(data, mode="w", compression=zipfile.ZIP_DEFLATED) as zf:
        when = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
        module_common.recursive_finder(name, fqn, source, zf, when, module_common._builder.ExtensionManager.create(task_vars={}))
        module_common._add_module_to_zip(zf, when, fqn, source, path, module_common._builder.ExtensionManager.create(task_vars={}))
        files = sorted(zf.namelist())
    ours = [f[len(PREFIX):] for f in files if f.startswith(PREFIX) and not f.endswith("__init__.py")]
    return {"bytes": len(data.getvalue()), "module_utils": ours, "files": files}


def main(names):
    sys.path.insert(0, COLLECTIONS)
    from ansible.plugins.loader import init_plugin_loader  # pylint: disable=import-outside-toplevel

    init_plugin_loader([COLLECTIONS])
    names = names or sorted(f[:-3] for f in os.listdir(MODULES) if f.endswith(".py") and f != "__init__.py")
    print(json.dumps(dict((name, build(name)) for name in names), indent=1, sort_keys=True))


_PAYLOADS = {}


def payloads():
    """Every module's payload, listed once per test session by a run of this file as a script."""
    if not _PAYLOADS:
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS)
        out = subprocess.run([sys.executable, os.path.abspath(__file__)], env=env, cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        _PAYLOADS.update(json.loads(out))
    return _PAYLOADS


def imports_tomlkit(rel):
    """Whether the module_utils file ``rel`` imports tomlkit, anywhere in its body."""
    with open(os.path.join(ROOT, "plugins", "module_utils", rel), encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        if any(n == "tomlkit" or n.startswith("tomlkit.") for n in names):
            return True
    return False


def test_the_finder_lists_every_module_and_what_it_imports():
    found = payloads()
    assert sorted(found) == sorted(f[:-3] for f in os.listdir(MODULES) if f.endswith(".py") and f != "__init__.py")
    assert "runtime/edit.py" in found["container_runtime"]["module_utils"]
    assert "discovery/facts.py" in found["gpu_facts"]["module_utils"]
    assert imports_tomlkit("runtime/edit.py")


@pytest.mark.parametrize("module", READ_ONLY)
def test_a_module_that_only_reads_the_node_carries_no_editor_and_no_tomlkit(module):
    carried = payloads()[module]["module_utils"]
    assert sorted(set(carried) & set(EDITORS)) == []
    assert [rel for rel in carried if imports_tomlkit(rel)] == []


if __name__ == "__main__":
    main(sys.argv[1:])
