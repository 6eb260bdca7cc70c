# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Count what a playbook run did on each host, for the bench (bench/converge.py).

Enabled only for bench runs (ANSIBLE_CALLBACK_PLUGINS=bench/callback_plugins,
ANSIBLE_CALLBACKS_ENABLED=bench_count); writes a JSON file at the end of the run, to the path in
BENCH_COUNT_FILE:

    {"hosts": {HOST: {"tasks": .., "modules": .., "changed": .., "failed": .., "skipped": ..,
                      "controller": .., "retries": ..}},
     "actions": {ACTION: {"tasks": .., "modules": ..}}}

- tasks: task results ok, changed or failed (skipped ones are not counted: nothing ran), one per
  task and host; a loop counts once.
- modules: how many times a module ran on the host: tasks whose action runs a module there, once
  per loop item and once per retry of an `until` loop. Not counted: the actions that run on the
  controller only (debug, set_fact, assert, fail, group_by, meta, include_* / import_*,
  include_vars, add_host, validate_argument_spec, ...) and tasks delegated to localhost (counted
  as `controller`). It is a lower bound of the module runs: an action plugin such as copy,
  template or get_url may run more than one module for one task (copy: stat, then copy or file),
  and gather_facts runs setup (one module per fact subset asked).
- the implicit localhost of a play that targets it is reported under its own name: the bench
  keeps it out of the per-node figures.

It also writes where the wall time went: "tasks", each task's wall time from its start to the
next task's start (with the linear strategy: until the slowest host is done with it), summed by
task name, slowest first, and "tasks_total_s", their sum (the rest of a run's wall time is
Python's start, the inventory, the playbook's loading and the end).
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: bench_count
    type: aggregate
    short_description: count tasks and module runs per host for the gpufleet.nvidia bench
    description:
      - Writes per-host counts of executed tasks and module invocations to the JSON file named by
        the BENCH_COUNT_FILE environment variable.
    requirements:
      - enabled in ANSIBLE_CALLBACKS_ENABLED
"""

# Actions that never run a module on the managed host: the controller does the work.
CONTROLLER_ONLY = frozenset(
    (
        "add_host",
        "assert",
        "debug",
        "fail",
        "group_by",
        "import_playbook",
        "import_role",
        "import_tasks",
        "include",
        "include_role",
        "include_tasks",
        "include_vars",
        "meta",
        "pause",
        "set_fact",
        "set_stats",
        "validate_argument_spec",
    )
)


# The collection's own actions that the controller answers itself (action plugins that start
# no module).
COLLECTION_CONTROLLER_ONLY = frozenset(
    ("gpufleet.nvidia.fleet_report_files", "gpufleet.nvidia.kube_client_info", "gpufleet.nvidia.role_arguments")
)


def _short(action):
    for prefix in ("ansible.builtin.", "ansible.legacy."):
        if action.startswith(prefix):
            return action[len(prefix):]
    return action


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_count"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._hosts = {}
        self._actions = {}
        self._current = None  # (name, action, start)
        self._task_wall = {}

    # --- bookkeeping --------------------------------------------------------------------------

    def _host(self, result):
        name = result.host.get_name()
        return self._hosts.setdefault(
            name, {"tasks": 0, "modules": 0, "changed": 0, "failed": 0, "skipped": 0, "controller": 0, "retries": 0}
        )

    @staticmethod
    def _runs_module(result):
        """Whether the task's action runs a module on the managed host itself."""
        action = _short(result.task.action)
        if action in CONTROLLER_ONLY or action in COLLECTION_CONTROLLER_ONLY:
            return False
        # the collection's preflight action judges facts it is given on the controller
        if action == "gpufleet.nvidia.preflight" and (result.task.args or {}).get("facts") is not None:
            return False
        # host_validate's action took an earlier validation of the run on the controller (a tree
        # measured as BENCH_SCALE_BASELINE from before 0.1.0 validated the unchanged nodes so)
        if action == "gpufleet.nvidia.host_validate" and result.result.get("reused") is True:
            return False
        delegate = result.task.delegate_to
        if delegate and delegate in ("localhost", "127.0.0.1") and result.host.get_name() != delegate:
            return False
        return True

    def _action(self, result):
        return self._actions.setdefault(_short(result.task.action), {"tasks": 0, "modules": 0})

    def _count(self, result, failed=False):
        host = self._host(result)
        host["tasks"] += 1
        if failed:
            host["failed"] += 1
        elif result.result.get("changed"):
            host["changed"] += 1
        action = self._action(result)
        action["tasks"] += 1
        if not self._runs_module(result):
            if _short(result.task.action) not in CONTROLLER_ONLY:
                host["controller"] += 1
            return
        loop = result.result.get("results")
        runs = 1
        if isinstance(loop, list) and (result.task.loop is not None or result.task.loop_with):
            runs = len([item for item in loop if not (isinstance(item, dict) and item.get("skipped"))])
        host["modules"] += runs
        action["modules"] += runs

    def _close_task(self):
        now = time.perf_counter()
        if self._current is not None:
            name, action, start = self._current
            entry = self._task_wall.setdefault(name, {"action": action, "seconds": 0.0, "count": 0})
            entry["seconds"] += now - start
            entry["count"] += 1
        return now

    # --- events -------------------------------------------------------------------------------

    def v2_playbook_on_task_start(self, task, is_conditional):
        now = self._close_task()
        # get_name() already starts with the role's name.
        self._current = (task.get_name(), _short(task.action), now)

    def v2_playbook_on_handler_task_start(self, task):
        self.v2_playbook_on_task_start(task, False)

    def v2_runner_on_ok(self, result):
        self._count(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count(result, failed=True)

    def v2_runner_on_unreachable(self, result):
        self._count(result, failed=True)

    def v2_runner_on_skipped(self, result):
        self._host(result)["skipped"] += 1

    def v2_runner_retry(self, result):
        # Each failed attempt of an `until` loop ran the module once more.
        host = self._host(result)
        host["retries"] += 1
        if self._runs_module(result):
            host["modules"] += 1
            self._action(result)["modules"] += 1

    def v2_playbook_on_stats(self, stats):
        self._close_task()
        self._current = None
        path = os.environ.get("BENCH_COUNT_FILE")
        if not path:
            return
        tasks = sorted(
            ({"task": name, "action": v["action"], "seconds": round(v["seconds"], 3), "count": v["count"]}
             for name, v in self._task_wall.items()),
            key=lambda item: -item["seconds"],
        )
        with open(path, "w") as handle:
            json.dump(
                {"hosts": self._hosts, "actions": self._actions, "tasks": tasks,
                 "tasks_total_s": round(sum(item["seconds"] for item in tasks), 3)},
                handle, indent=1, sort_keys=True,
            )
