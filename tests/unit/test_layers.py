"""The house's rules, read from the source: plugins/ imports run one way, and never in a circle.

Every import in plugins/ is read with :mod:`ast`, those inside functions included (a lazy import
is an import all the same). ``plugins/module_utils/<layer>/`` holds one layer; a module may import
``common/``, its own layer and the layers below it (``LAYERS``, lowest first), never one above.
Modules, action, filter and other plugins sit above every layer and import nothing of each
other's. The checks are also run on small made-up trees, so that each can be seen to fail.
"""

from __future__ import annotations

import ast
import os

import pytest

PLUGINS = os.path.join(os.path.dirname(__file__), "..", "..", "plugins")
PACKAGE = "ansible_collections.gpufleet.nvidia.plugins"

#: The layers of module_utils, lowest first.
LAYERS = ("common", "discovery", "driver", "runtime", "cluster", "upgrade", "validate", "report")


def _module_name(root, path):
    rel = os.path.relpath(path, root)[:-len(".py")].split(os.sep)
    if rel[-1] == "__init__":
        rel = rel[:-1]
    return ".".join([PACKAGE] + rel)


def _imports(tree, name, is_package):
    """The collection's modules that the module ``name`` imports, anywhere in its body."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")[:len(name.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(parts + ([base] if base else []))
            found.add(base)
            found.update(base + "." + a.name for a in node.names)
    return found


def import_graph(root, package=PACKAGE):
    """``{module: {modules of the collection it imports}}`` for every .py file under ``root``."""
    sources = {}
    for folder, _dirs, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                sources[_module_name(root, path)] = path
    graph = {}
    for name, path in sources.items():
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        graph[name] = set(m for m in _imports(tree, name, path.endswith("__init__.py"))
                          if m in sources and m != name and not sources[m].endswith("__init__.py"))
    return graph


def cycles(graph):
    """Every import circle, each as the list of modules along it (first repeated at the end)."""
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                found.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


#: Where the layers live: node code, and control-host code that only action and filter plugins run.
UTILS = ("module_utils", "plugin_utils")


def layer_of(module):
    """The layer of a module of module_utils or plugin_utils, or None for a plugin above them."""
    parts = module[len(PACKAGE) + 1:].split(".")
    if parts[0] not in UTILS:
        return None
    return parts[1] if len(parts) > 2 else parts[0]


def _utils_of(module):
    return module[len(PACKAGE) + 1:].split(".")[0]


def _allowed(module, dep):
    """Whether ``module`` may import ``dep``: down the layers, and control-host code only from control-host code."""
    mine, theirs = layer_of(module), layer_of(dep)
    if theirs is None:
        return False  # nothing imports a module, action or filter plugin
    if _utils_of(dep) == "plugin_utils" and _utils_of(module) not in ("plugin_utils", "action", "filter"):
        return False  # a module, or node code, never carries control-host code
    if mine is None:
        return True
    return mine in LAYERS and theirs in LAYERS and LAYERS.index(theirs) <= LAYERS.index(mine)


def upward_imports(graph):
    """``(importer, imported)`` pairs that go against the layers, out of the layers' folders, or to
    control-host code from a module or node code."""
    return [(module, dep) for module, deps in sorted(graph.items()) for dep in sorted(deps)
            if not _allowed(module, dep)]


def carried_by_modules(graph):
    """Every module of the collection that some module (plugins/modules) carries to a node, at any depth."""
    seen, stack = set(), [m for m in graph if _utils_of(m) == "modules"]
    while stack:
        for dep in graph.get(stack.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return seen


def test_no_import_circle_in_plugins():
    graph = import_graph(PLUGINS)
    assert len(graph) > 40  # the walk found the plugins
    assert cycles(graph) == []


def test_module_utils_is_one_folder_per_layer():
    here = os.path.join(PLUGINS, "module_utils")
    assert sorted(f for f in os.listdir(here) if f.endswith(".py") and f != "__init__.py") == []
    assert sorted(d for d in os.listdir(here) if os.path.isdir(os.path.join(here, d)) and d != "__pycache__") \
        == sorted(LAYERS)


def test_plugin_utils_keeps_the_same_layers():
    here = os.path.join(PLUGINS, "plugin_utils")
    assert sorted(f for f in os.listdir(here) if f.endswith(".py") and f != "__init__.py") == []
    folders = [d for d in os.listdir(here) if os.path.isdir(os.path.join(here, d)) and d != "__pycache__"]
    assert folders and set(folders) <= set(LAYERS)


def test_no_module_carries_control_host_code():
    graph = import_graph(PLUGINS)
    carried = carried_by_modules(graph)
    assert any(_utils_of(m) == "module_utils" for m in carried)  # the walk followed the modules' imports
    assert sorted(m for m in carried if _utils_of(m) == "plugin_utils") == []


def test_node_code_that_no_module_runs_lives_in_plugin_utils():
    graph = import_graph(PLUGINS)
    carried = carried_by_modules(graph)
    files = [m for m in graph if _utils_of(m) == "module_utils" and m[len(PACKAGE) + 1:].count(".") >= 2]
    assert len(files) > 20
    assert sorted(m for m in files if m not in carried) == []


def test_imports_run_down_the_layers():
    graph = import_graph(PLUGINS)
    assert any(layer_of(d) == "common" for deps in graph.values() for d in deps)
    assert upward_imports(graph) == []


def _tree(tmp_path, files):
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return import_graph(str(tmp_path))


M = PACKAGE + ".module_utils"


@pytest.mark.parametrize("files, circle", [
    ({"module_utils/driver/install.py": "from %s.driver import apt\n" % M,
      "module_utils/driver/apt.py": "def f():\n    from %s.driver import install\n" % M},
     ["driver.apt", "driver.install", "driver.apt"]),
    ({"module_utils/runtime/a.py": "from . import b\n",
      "module_utils/runtime/b.py": "from .c import x\n",
      "module_utils/runtime/c.py": "from %s.runtime.a import y\n" % M},
     ["runtime.a", "runtime.b", "runtime.c", "runtime.a"]),
])
def test_a_circle_is_found_even_through_a_lazy_or_relative_import(tmp_path, files, circle):
    found = cycles(_tree(tmp_path, files))
    assert [[m[len(M) + 1:] for m in c] for c in found] == [circle]


def test_an_import_up_the_layers_or_of_a_plugin_is_found(tmp_path):
    graph = _tree(tmp_path, {
        "module_utils/common/errors.py": "",
        "module_utils/discovery/facts.py": "from %s.common import errors\nfrom %s.report import fleet\n" % (M, M),
        "module_utils/report/fleet.py": "from %s.common.errors import E\n" % M,
        "filter/plan.py": "from %s.report import fleet\n" % M,
        "modules/a.py": "from %s.modules import b\n" % PACKAGE,
        "modules/b.py": "",
    })
    assert cycles(graph) == []
    assert upward_imports(graph) == [
        (M + ".discovery.facts", M + ".report.fleet"),
        (PACKAGE + ".modules.a", PACKAGE + ".modules.b"),
    ]


def test_control_host_code_in_a_module_or_node_code_is_found(tmp_path):
    U = PACKAGE + ".plugin_utils"
    graph = _tree(tmp_path, {
        "module_utils/common/errors.py": "",
        "module_utils/driver/apt.py": "from %s.report import fleet\n" % U,
        "plugin_utils/report/fleet.py": "from %s.common import errors\n" % M,
        "plugin_utils/cluster/plan.py": "from %s.report import fleet\n" % U,
        "modules/a.py": "from %s.driver import apt\n" % M,
        "modules/b.py": "from %s.report.fleet import x\n" % U,
        "filter/f.py": "from %s.report import fleet\n" % U,
    })
    assert upward_imports(graph) == [
        (M + ".driver.apt", U + ".report.fleet"),
        (PACKAGE + ".modules.b", U + ".report.fleet"),
        (U + ".cluster.plan", U + ".report.fleet"),
    ]
    assert sorted(carried_by_modules(graph)) == [M + ".common.errors", M + ".driver.apt", U + ".report.fleet"]


def test_the_unit_tests_mirror_the_layers():
    """tests/unit/plugins/<module_utils|plugin_utils>/<layer>/ holds the tests of that layer's files."""
    tests = os.path.join(os.path.dirname(__file__), "plugins")
    for utils in UTILS:
        here = os.path.join(tests, utils)
        assert sorted(f for f in os.listdir(here) if f.startswith("test_")) == []
        folders = [d for d in os.listdir(here) if os.path.isdir(os.path.join(here, d)) and d != "__pycache__"]
        assert folders and set(folders) <= set(LAYERS)
        assert set(folders) <= set(os.listdir(os.path.join(PLUGINS, utils)))
