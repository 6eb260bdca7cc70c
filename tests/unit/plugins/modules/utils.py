"""Shared helpers for running a module's ``main()`` inside a unit test.

``run_module(module, args)`` runs the module with ``args`` and returns the dict it passed to
``exit_json``; ``AnsibleFailJson`` is raised with the dict of ``fail_json``; ``snapshot(directory)``
is every file under a folder (bytes, mode, mtime).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from typing import Any
from unittest import mock

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

try:  # ansible-core >= 2.19
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # pragma: no cover - older ansible-core
    patch_module_args = None


class AnsibleExitJson(Exception):
    """Raised in place of ``exit_json``; ``.result`` is what the module returned."""

    def __init__(self, result: dict) -> None:
        super().__init__(result)
        self.result = result


class AnsibleFailJson(Exception):
    """Raised in place of ``fail_json``; ``.result`` is what the module returned."""

    def __init__(self, result: dict) -> None:
        super().__init__(result)
        self.result = result


def _exit_json(self, **kwargs: Any) -> None:  # pylint: disable=unused-argument
    kwargs.setdefault("changed", False)
    raise AnsibleExitJson(kwargs)


def _fail_json(self, **kwargs: Any) -> None:  # pylint: disable=unused-argument
    kwargs["failed"] = True
    raise AnsibleFailJson(kwargs)


@contextlib.contextmanager
def set_module_args(args: dict):
    """Make ``AnsibleModule`` read ``args`` as its parameters inside the block."""
    args = dict(args)
    args.setdefault("_ansible_remote_tmp", "/tmp")
    args.setdefault("_ansible_keep_remote_files", False)
    if patch_module_args is not None:
        with patch_module_args(args):
            yield
        return
    serialized = to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    with mock.patch.object(basic, "_ANSIBLE_ARGS", serialized):
        yield


def run_module(module, args: dict, check_mode: bool = False, diff: bool = False) -> dict:
    """Run ``module.main()`` with ``args``; return the exit_json result or raise AnsibleFailJson."""
    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with set_module_args(args), mock.patch.multiple(
        basic.AnsibleModule, exit_json=_exit_json, fail_json=_fail_json
    ):
        try:
            module.main()
        except AnsibleExitJson as exc:
            return exc.result
    raise AssertionError("module did not call exit_json or fail_json")


def snapshot(directory):
    """Every file under ``directory``: path -> (bytes, mode, mtime)."""
    found = {}
    for root, _dirs, files in os.walk(str(directory)):
        for name in files:
            path = os.path.join(root, name)
            st = os.stat(path)
            with open(path, "rb") as handle:
                found[path] = (handle.read(), stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    return found
