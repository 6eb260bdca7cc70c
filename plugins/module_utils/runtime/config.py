# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container_runtime module's flow: read the host's files, plan, check, write.

:func:`configure` has ``runtime.config_plan`` read the files of the runtime asked for and plan the
change, ``runtime.config_check`` check a containerd configuration with ``containerd config dump``,
and writes; :func:`restore` puts back the backups of a change. The editors are ``runtime.containerd``,
``runtime.k3s``, ``runtime.crio`` and ``runtime.docker``.
"""

from __future__ import annotations

import os
import posixpath
import stat

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.config_check import validate_plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.config_plan import RUNTIMES, build_plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.files import FileChange, Plan, read_text


#: The options of ``gpufleet.nvidia.container_runtime``, and the suboptions of
#: ``gpufleet.nvidia.toolkit_packages``' ``runtime`` (both run :func:`configure` with them).
ARGUMENT_SPEC = dict(
    runtime=dict(type="str", required=True, choices=list(RUNTIMES)),
    state=dict(type="str", default="present", choices=["present", "absent"]),
    config_mode=dict(type="str", choices=["dropin", "inplace"]),
    config_path=dict(type="path"),
    dropin_path=dict(type="path"),
    runtime_name=dict(type="str", default="nvidia"),
    binary_name=dict(type="path"),
    set_as_default=dict(type="bool", default=False),
    enable_cdi=dict(type="bool", default=False),
    enable_cri=dict(type="bool", default=False),
    config_version=dict(type="int", choices=[2, 3]),
    containerd_binary=dict(type="path"),
    validate=dict(type="bool", default=True),
    backup=dict(type="bool", default=False),
)

#: The options of ``gpufleet.nvidia.container_runtime`` itself: ARGUMENT_SPEC, and ``state=restored``
#: (:func:`restore`) with what it puts back.
MODULE_ARGUMENT_SPEC = dict(
    ARGUMENT_SPEC,
    state=dict(type="str", default="present", choices=["present", "absent", "restored"]),
    restore_backups=dict(type="dict"),
    restore_created=dict(type="list", elements="path"),
)
MODULE_REQUIRED_IF = [("state", "restored", ("restore_backups", "restore_created"), True)]


def _apply_change(change, host, backup, mode=None):
    if change.after is None:
        return host.remove(change.path, backup=backup)
    return host.write(change.path, change.after, backup=backup, **({} if mode is None else {"mode": mode}))


def _put_back(done, host) -> list:
    """Give the files of ``done`` (changes written) their text from before, last first; what could not be."""
    failed = []
    for change in reversed(done):
        try:
            if change.before is None:
                host.remove(change.path)
            else:
                host.write(change.path, change.before)
        except Exception as exc:  # noqa: BLE001 - say which file is left as it is
            failed.append("%s (%s)" % (change.path, exc))
    return failed


def _write_failed(change, exc, done, failed) -> GpuFleetError:
    why = exc.msg if isinstance(exc, GpuFleetError) else "%s: %s" % (type(exc).__name__, exc)
    msg = "could not %s %s: %s" % ("remove" if change.after is None else "write", change.path, why)
    if done:
        msg += "; %s put back as %s" % (", ".join(c.path for c in done), "they were" if not failed else "far as it went")
    if failed:
        msg += "; NOT put back: %s" % ", ".join(failed)
    return GpuFleetError(msg, path=change.path)


def _unwritable(host, path):
    """Why ``path`` could not be written on ``host`` (None: it can, as far as one can tell beforehand)."""
    local = host.local(path)
    if os.path.isdir(local):
        return "%s is a folder" % path
    folder = posixpath.dirname(path)
    while not os.path.lexists(host.local(folder)) and folder != posixpath.dirname(folder):
        folder = posixpath.dirname(folder)
    if not os.path.isdir(host.local(folder)):
        return "%s is not a folder" % folder
    if not os.access(host.local(folder), os.W_OK | os.X_OK):
        return "%s cannot be written" % folder
    return None


def check_writable(plan, host) -> None:
    """Refuse before the first write when a planned file cannot be written (a folder in its place, a
    file where its folder should be, a folder without write access): several files change together."""
    if not hasattr(host, "local"):
        return  # a host without local paths (a test's) checks nothing beforehand
    for change in plan.files:
        why = _unwritable(host, change.path) if change.changed and change.after is not None else None
        if why:
            raise GpuFleetError("could not write %s: %s; nothing was written" % (change.path, why), path=change.path)


def apply_plan(plan, host, backup: bool = False, modes=None) -> dict:
    """Write the planned files in order; returns ``{path: backup path}``.

    The files change together or not at all: when one cannot be written, those written before
    it get their text back, and one GpuFleetError says what happened. ``modes``: the mode of a
    file that is created, by path (default the writer's 0644; an existing file keeps its own).
    """
    backups = {}
    done = []
    for change in plan.files:
        if not change.changed:
            continue
        try:
            saved = _apply_change(change, host, backup, (modes or {}).get(change.path))
        except Exception as exc:  # noqa: BLE001 - a module's fail_json in tests, an OSError, ...
            raise _write_failed(change, exc, done, _put_back(done, host))
        done.append(change)
        if saved:
            backups[change.path] = saved
    return backups


def configure(params: dict, host, check_mode: bool = False, diff: bool = False) -> dict:
    """The whole module: plan, validate, write (unless check mode); the module's result."""
    plan, context = build_plan(params, host)
    validation = validate_plan(plan, params, context, host) if plan.changed else {"ran": False, "reason": "nothing to change"}
    backups = {}
    if plan.changed and not check_mode:
        check_writable(plan, host)
        backups = apply_plan(plan, host, backup=bool(params.get("backup")), modes=plan.facts.get("modes"))
    return _result(
        plan, diff, config_version=plan.facts.get("config_version"), plugin_table=plan.facts.get("plugin_table"),
        runtime_table=plan.facts.get("runtime_table"),
        restart_needed=any(f.changed for f in plan.files if f.path != plan.facts.get("state_file")),
        validation=validation, backup_files=backups, containerd_version=context.get("containerd_version"), warnings=plan.warnings)


def _result(plan, diff, **fields) -> dict:
    """The module's result for ``plan``; ``fields``: what depends on the state asked for."""
    result = dict(changed=plan.changed, msg=plan.msg, changed_files=plan.changed_files,
                  files=[{"path": f.path, "action": f.action or "unchanged"} for f in plan.files], **fields)
    if diff:
        result["diff"] = plan.diff
    return result


def _restored_change(host, path, backup) -> tuple:
    """``(change, mode)``: ``path`` given the text of its ``backup`` (a file of the host), and the
    backup's mode for a file that is gone (an existing one keeps its own mode and owner)."""
    for option, value in (("restore_backups", path), ("restore_backups[%s]" % path, backup)):
        inputs.checked(option, inputs.absolute_path, value)
    if not host.isfile(backup):
        raise GpuFleetError(
            "restore_backups: the backup %s of %s is not a file on the host; nothing was restored" % (backup, path),
            path=path, backup=backup,
        )
    text = read_text(host, backup)
    mode = stat.S_IMODE(os.stat(host.local(backup)).st_mode)
    return FileChange(path, read_text(host, path), text), mode


def restore_plan(params: dict, host) -> tuple:
    """``(plan, modes)``: each file of ``restore_backups`` (path -> backup) back to its backup, each
    of ``restore_created`` removed; checked (paths absolute, backups there) before anything is read."""
    backups = params.get("restore_backups") or {}
    created = [p for p in params.get("restore_created") or [] if p not in backups]
    for path in created:
        inputs.checked("restore_created", inputs.absolute_path, path)
    restored = [_restored_change(host, path, backups[path]) for path in sorted(backups)]
    changes = [change for change, unused in restored] + [FileChange(path, read_text(host, path), None) for path in created]
    return Plan(changes, msg=_restore_message(changes)), dict((change.path, mode) for change, mode in restored)


def _restore_message(changes) -> str:
    put = [c.path for c in changes if c.changed and c.after is not None]
    gone = [c.path for c in changes if c.changed and c.after is None]
    parts = (["put back %s from the backups" % ", ".join(put)] if put else []) + (["removed %s (created)" % ", ".join(gone)] if gone else [])
    return "; ".join(parts) or "the files are as their backups, and the created ones are gone"


def restore(params: dict, host, check_mode: bool = False, diff: bool = False) -> dict:
    """``state=restored``: the module's result once the backups are back and the created files gone.

    Written through the host adapter (``common.io``): a configuration reached through a symbolic link
    is written where the link points (the link stays), keeping its mode and owner; a file that is gone
    comes back with its backup's mode. All files change together or not at all (``apply_plan``).
    """
    plan, modes = restore_plan(params, host)
    if plan.changed and not check_mode:
        check_writable(plan, host)
        apply_plan(plan, host, modes=modes)
    return _result(
        plan, diff, config_version=None, plugin_table=None, runtime_table=None, restart_needed=plan.changed,
        validation={"ran": False, "reason": "state=restored puts back files that were there before"},
        backup_files={}, containerd_version=None, warnings=[])
