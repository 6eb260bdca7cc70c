"""The example fleets of ``tests/unit/fixtures/fleets`` and what the tests check them against.

``plan(fleet, role)`` plans a fleet the way the role does: it templates the expression of the
role's own planning task (``tasks/check.yml``) with Ansible's templar, over the role's defaults,
the fleet's variables and a ``hostvars`` / ``groups`` built from the fleet, so the filters run
exactly as the role calls them. ``direct(fleet, role)`` calls the filters from Python.
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys

import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures")
FLEETS_DIR = os.path.join(FIXTURES, "fleets")
CHARTS_DIR = os.path.join(FIXTURES, "charts")
REFERENCE_COPY = os.path.join(CHARTS_DIR, "reference-options.md")
# Beside the repository, where the project keeps it (absent in a plain clone).
REFERENCE = os.path.join(os.path.dirname(ROOT), "shared", "reference", "nvidia-stack-facts.md")
# NVIDIA's published chart values and CRDs, beside the checkout (never copied into it).
REFERENCE_CHARTS = os.path.join(os.path.dirname(os.path.realpath(ROOT)), "shared", "reference", "charts")
GROUP = "gpu_nodes"
#: The roles site.yml runs on every node whose arguments the collection checks (role_arguments).
SITE_ROLES = ["discover", "nvidia_driver", "container_toolkit", "validate"]
ROLES = ("gpu_operator", "device_plugin")
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
# Kubernetes versions whose published schemas every object is validated against (strict).
K8S_VERSIONS = ("1.31.0", "1.37.0")


def fleet_names():
    return sorted(f[:-4] for f in os.listdir(FLEETS_DIR) if f.endswith(".yml"))


def load(name):
    with open(os.path.join(FLEETS_DIR, name + ".yml")) as f:
        return yaml.safe_load(f)


def cases():
    """(fleet, role) for every fleet and each role that can plan it."""
    return [(name, role) for name in fleet_names() for role in load(name)["roles"]]


def hostvars(fleet):
    return dict((host, dict(fleet.get("vars") or {}, **(hv or {}))) for host, hv in fleet["hosts"].items())


def _trusted(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return dict((k, _trusted(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    return value


def role_defaults(role):
    with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) as f:
        return yaml.safe_load(f)


def planning_task(role):
    with open(os.path.join(ROOT, "roles", role, "tasks", "check.yml")) as f:
        block = yaml.safe_load(f)[0]["block"]
    task = block[0]
    assert "ansible.builtin.set_fact" in task, task
    return task


_LOADER = []
FILTER_PACKAGE = "ansible_collections.gpufleet.nvidia.plugins.filter"
# The cluster layer's filters (the other filters of the collection are left as imported).
FILTERS = ("gpu_fleet_nodes", "gpu_operator_plan", "device_plugin_plan", "gpu_node_label_patches", "image_pull_secret")


def _templar(variables):
    """Ansible's templar, with the plugin loader set up to find gpufleet.nvidia's filters the
    way ansible-playbook does (the collection is linked under .cache/collections)."""
    if not _LOADER:
        init_plugin_loader([COLLECTIONS])
        # The unit tests' conftest imports the collection as a plain namespace package, before
        # Ansible's collection finder is installed: give that package the metadata the finder
        # would have loaded (meta/runtime.yml), and let the finder load the filter plugins
        # afresh (the plugin loader needs the files it records for them).
        for module in [FILTER_PACKAGE] + ["%s.%s" % (FILTER_PACKAGE, f) for f in FILTERS]:
            sys.modules.pop(module, None)
        package = sys.modules.get("ansible_collections.gpufleet.nvidia")
        if package is not None and getattr(package, "_collection_meta", None) is None:
            with open(os.path.join(ROOT, "meta", "runtime.yml")) as f:
                package._collection_meta = yaml.safe_load(f) or {}
        _LOADER.append(True)
    return Templar(loader=DataLoader(), variables=variables)


def plan(fleet, role, extra_vars=None):
    """The plan the role's own task expression builds for ``fleet``."""
    task = planning_task(role)
    (fact, expression), = task["ansible.builtin.set_fact"].items()
    variables = _trusted(role_defaults(role))
    variables.update(_trusted(copy.deepcopy(fleet.get("vars") or {})))
    variables.update(_trusted(copy.deepcopy(extra_vars or {})))
    variables.update(_trusted(task.get("vars") or {}))
    variables["hostvars"] = hostvars(fleet)
    variables["groups"] = {"all": list(fleet["hosts"]), GROUP: list(fleet["hosts"])}
    variables["hostvars"]["localhost"] = {}
    return _plain(_templar(variables).template(trust_as_template(expression)))


def _plain(value):
    return json.loads(json.dumps(value))


def settings(fleet, role, extra_vars=None):
    """The settings dict the role's task passes to its plan filter, templated."""
    task = planning_task(role)
    variables = _trusted(role_defaults(role))
    variables.update(_trusted(copy.deepcopy(fleet.get("vars") or {})))
    variables.update(_trusted(copy.deepcopy(extra_vars or {})))
    variables.update(_trusted(task["vars"]))
    return _plain(_templar(variables).template(trust_as_template("{{ __%s_settings }}" % role)))


def direct(fleet, role, extra_vars=None):
    """The plan from the filters called as Python functions."""
    from ansible_collections.gpufleet.nvidia.plugins.filter.device_plugin_plan import device_plugin_plan
    from ansible_collections.gpufleet.nvidia.plugins.filter.gpu_fleet_nodes import gpu_fleet_nodes
    from ansible_collections.gpufleet.nvidia.plugins.filter.gpu_operator_plan import gpu_operator_plan

    nodes = gpu_fleet_nodes(list(fleet["hosts"]), hostvars(fleet), role)
    build = gpu_operator_plan if role == "gpu_operator" else device_plugin_plan
    return build(nodes, settings(fleet, role, extra_vars))


# --- What the reference names ------------------------------------------------------------------
def _reference_text():
    with open(REFERENCE_COPY) as f:
        return f.read()


def reference_plugin_config_paths():
    """Key paths of the device plugin config block of the reference; ``mps`` is the sibling the
    block's comment names for ``timeSlicing`` and takes the same keys."""
    text = _reference_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)
    doc = yaml.safe_load(block)
    paths = set(_paths(doc))
    paths |= set(p.replace("sharing.timeSlicing", "sharing.mps") for p in paths if p.startswith("sharing.timeSlicing"))
    return paths


def reference_operator_options():
    """The gpu-operator chart options the reference names, ``a.{b,c}`` expanded; an entry ending
    in ``.*`` stands for every key below it."""
    text = _reference_text()
    section = text[text.index("## GPU Operator Helm values that matter"):]
    section = section[: section.index("Per node")]
    options = set()
    for token in re.findall(r"`([A-Za-z][A-Za-z0-9.{},*]*)`", section):
        if "." not in token:
            continue
        match = re.match(r"^(.*)\.\{(.*)\}$", token)
        if match:
            options |= set("%s.%s" % (match.group(1), k) for k in match.group(2).split(","))
        else:
            options.add(token)
    return options


def _paths(data, prefix=""):
    for key, value in data.items():
        path = "%s.%s" % (prefix, key) if prefix else str(key)
        yield path
        if isinstance(value, dict):
            yield from _paths(value, path)


def leaf_paths(data, prefix=""):
    """Dotted paths of the leaves of nested dicts (a list or scalar ends a path)."""
    for key, value in data.items():
        path = "%s.%s" % (prefix, key) if prefix else str(key)
        if isinstance(value, dict) and value:
            yield from leaf_paths(value, path)
        else:
            yield path
