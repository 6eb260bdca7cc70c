"""The preflight action plugin on the control host: the facts judged there, on the control host's date."""

from __future__ import annotations

import datetime

from unittest import mock

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.gpufleet.nvidia.plugins.action import preflight as A
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.discovery import preflight as judge
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.discovery.captures import fixture_facts


def clock(monkeypatch, day):
    """Make the control host's clock say ``day`` (a date), as datetime.datetime.now(tz) reads it."""

    class Clock(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(day.year, day.month, day.day, 12, 0, tzinfo=tz)

    monkeypatch.setattr(judge.datetime, "datetime", Clock)


def run_action(**args):
    task = Task()
    # security_floor waived: Debian 12's containerd 1.6 is past its end of life (test_preflight.py tests the rule)
    task.args = dict({"driver_version": "535", "waive": ["kernel_headers", "security_floor"],
                      "facts": fixture_facts("debian12-nogpu")}, **args)
    loader = DataLoader()
    action = A.ActionModule(task=task, connection=mock.MagicMock(), play_context=PlayContext(), loader=loader,
                            templar=Templar(loader=loader), shared_loader_obj=None)
    return action.run(task_vars={})


def test_a_branch_past_its_end_of_life_on_the_control_hosts_date_is_a_warning_of_the_task(monkeypatch):
    clock(monkeypatch, datetime.date(2026, 12, 1))
    result = run_action()
    assert not result.get("failed") and result["changed"] is False
    assert result["checks"]["driver_lifecycle"]["outcome"] == "warning"
    (line,) = result["warnings"]
    assert line.startswith(
        "preflight [driver_lifecycle]: driver_version 535 is on a branch past its end of life: R535: long-term support "
        "branch, end of life June 2026 (past on 2026-12-01); CUDA 12 at most. Move the node to a supported branch"
    )


def test_before_the_end_of_life_there_is_no_warning(monkeypatch):
    clock(monkeypatch, datetime.date(2026, 6, 15))
    result = run_action()
    assert result["checks"]["driver_lifecycle"] == {
        "outcome": "pass",
        "detail": "R535: long-term support branch, end of life June 2026 (supported on 2026-06-15); CUDA 12 at most",
    }
    assert "warnings" not in result


@pytest.mark.parametrize("today, failed", [("2026-12-01", True), ("2026-05-01", False)])
def test_today_replaces_the_clock_and_fail_blocks(monkeypatch, today, failed):
    clock(monkeypatch, datetime.date(2030, 1, 1))
    result = run_action(today=today, driver_lifecycle="fail")
    assert bool(result.get("failed")) is failed
    if failed:
        assert result["msg"].startswith("preflight: 1 blocking problem: [driver_lifecycle] driver_version 535 is on a branch")
        # what Ansible prints of the failure is the message (with the fix and the waiver), not every check's outcome
        assert "(fix: " in result["msg"] and result["msg"].endswith("waive: [driver_lifecycle] (the discover role's discover_waive)")
        assert sorted(result) == ["blocking_count", "failed", "msg", "ok"]
