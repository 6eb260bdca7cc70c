"""The gpu_facts action plugin: the roles' variables before the node is read, preflight on the facts after.

The module's run on the node is replaced by the result the module returns on a captured host
(``fixture_facts``); what is tested is what rides around it on the control host.
"""

from __future__ import annotations

from unittest import mock

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.gpufleet.nvidia.plugins.action import gpu_facts as G
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.discovery.captures import fixture_facts

# The H200 capture: driver 580 pre-installed (no package owns it), one GPU.
H200 = "ubuntu2404-h200-preinstalled"
# security_floor waived: the capture's packages are past their floors on the tests' date (test_preflight.py tests the rule)
PREINSTALLED = {"driver_version": "580", "driver_method": "preinstalled", "container_runtime": "none",
                "waive": ["kernel_headers", "security_floor"]}


def run_action(capture, task_vars=None, **args):
    """``(result, the module's arguments or None when it did not run)``."""
    task = Task()
    task.args = args
    loader = DataLoader()
    action = G.ActionModule(task=task, connection=mock.MagicMock(), play_context=PlayContext(), loader=loader,
                            templar=Templar(loader=loader), shared_loader_obj=None)
    calls = []

    def execute_module(module_name, module_args, task_vars):
        calls.append((module_name, module_args))
        return {"changed": False, "ansible_facts": {"gpufleet_nvidia": fixture_facts(capture)}}

    action._execute_module = execute_module
    result = action.run(task_vars=task_vars or {})
    assert len(calls) <= 1 and all(name == "gpufleet.nvidia.gpu_facts" for name, dummy in calls)
    return result, (calls[0][1] if calls else None)


def test_without_the_options_it_is_the_module():
    result, module_args = run_action(H200, host_root="/host")
    assert module_args == {"host_root": "/host"}
    assert result["ansible_facts"]["gpufleet_nvidia"]["gpu_count"] == 1 and result["gpu_node"] is True
    assert "preflight" not in result and "roles" not in result and not result.get("failed")


def test_preflight_judges_the_facts_and_the_module_never_sees_its_options():
    result, module_args = run_action(H200, preflight=PREINSTALLED, preflight_without_gpu=False)
    assert module_args == {}
    assert not result.get("failed") and result["preflight"]["ok"] is True and result["preflight"]["gpu_count"] == 1


def test_a_blocking_preflight_fails_the_task_with_its_message_and_keeps_the_facts():
    # package declared on a pre-installed driver: driver_not_package_owned blocks
    result, dummy = run_action(H200, preflight=dict(PREINSTALLED, driver_method="package"))
    assert result["failed"] is True and "[driver_not_package_owned]" in result["msg"]
    assert result["msg"] == result["preflight"]["msg"] and result["preflight"]["blocking_count"] >= 1
    assert result["ansible_facts"]["gpufleet_nvidia"]["gpu_count"] == 1


def test_a_node_without_gpus_is_judged_only_when_prepared_without_one():
    result, dummy = run_action("debian12-nogpu", preflight=dict(PREINSTALLED, driver_method="package"))
    assert "preflight" not in result and not result.get("failed") and result["gpu_node"] is False
    result, dummy = run_action("debian12-nogpu", preflight=dict(PREINSTALLED, driver_method="package"), preflight_without_gpu=True)
    assert "preflight" in result and result["gpu_node"] is True
    # without preflight, gpu_node still says how the discover role groups the node
    result, dummy = run_action("debian12-nogpu", preflight_without_gpu=True)
    assert "preflight" not in result and result["gpu_node"] is True


def test_wrong_preflight_options_fail_the_node_that_preflight_judges():
    result, dummy = run_action(H200, preflight=dict(PREINSTALLED, driver_method="tarball"))
    assert result["failed"] is True and "preflight" not in result
    assert result["msg"].startswith("preflight: ") and "driver_method" in result["msg"] and "tarball" in result["msg"]
    result, dummy = run_action(H200, preflight=dict(PREINSTALLED, facts={}))
    assert result["failed"] is True and "facts cannot be set here" in result["msg"]
    # package without a version: preflight's own requirement, on a node it judges only (as its own task was skipped)
    package = {"driver_method": "package"}
    result, dummy = run_action(H200, preflight=package)
    assert result["failed"] is True and "driver_version" in result["msg"]
    result, dummy = run_action("debian12-nogpu", preflight=package)
    assert not result.get("failed") and result["ansible_facts"]["gpufleet_nvidia"]["gpu_count"] == 0


def test_a_wrong_role_variable_fails_before_the_node_is_read():
    result, module_args = run_action(H200, task_vars={"nvidia_driver_state": ["present"]}, roles=["nvidia_driver", "discover"])
    assert result["failed"] is True and module_args is None
    assert result["roles"] == ["nvidia_driver", "discover"] and list(result["argument_errors"]) == ["nvidia_driver"]
    assert "gpufleet.nvidia.nvidia_driver: " in result["msg"] and "nvidia_driver_state" in result["msg"]
    result, module_args = run_action(H200, task_vars={"nvidia_driver_state": "present"}, roles=["nvidia_driver"])
    assert not result.get("failed") and module_args == {} and result["argument_errors"] == {}
