# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The driver's plan and its execution: :class:`Plan` (the files to write and the commands to run, in
order, each saying what it does and why), :class:`Executor` (files through the host's atomic writer,
commands through its runner) and :class:`Journal` (what a failed step puts back).
"""

from __future__ import annotations

import errno
import os

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.packages import command_line, tail


class Plan(object):
    """The actions that bring the host to the desired state, in the order they run.

    Each action is a dict: ``{'kind': 'write', 'path', 'content', 'before', 'mode'}``,
    ``{'kind': 'remove', 'path', 'before'}`` or ``{'kind': 'run', 'argv', 'env'}``, with a
    ``summary`` (one line saying what it does and why) and the ``group`` it belongs to (sources,
    repository, packages, hold, pin, unattended-upgrades, versionlock, nouveau, initramfs...).
    """

    def __init__(self):
        self.actions = []
        self.notes = []

    def __bool__(self):
        return bool(self.actions)

    __nonzero__ = __bool__

    def write(self, group, path, content, before, summary, mode=0o644):
        if content == before:
            return
        self.actions.append(
            {"kind": "write", "group": group, "path": path, "content": content, "before": before, "mode": mode,
             "summary": summary}
        )

    def remove(self, group, path, before, summary):
        if before is None:
            return
        self.actions.append({"kind": "remove", "group": group, "path": path, "before": before, "summary": summary})

    def run(self, group, argv, summary, env=None, undo=None):
        """A command; ``undo`` puts back what it changes (a hold it releases) when a later step fails."""
        action = {"kind": "run", "group": group, "argv": list(argv), "env": dict(env or {}), "summary": summary}
        if undo:
            action["undo"] = list(undo)
        self.actions.append(action)

    def note(self, text):
        if text not in self.notes:
            self.notes.append(text)

    def steps(self):
        """The plan as lines a person reads: the command, or what is written where."""
        lines = []
        for action in self.actions:
            if action["kind"] == "run":
                lines.append(command_line(action["argv"]))
            elif action["kind"] == "write":
                verb = "create" if action["before"] is None else "update"
                lines.append("%s %s (%s)" % (verb, action["path"], action["summary"]))
            else:
                lines.append("remove %s (%s)" % (action["path"], action["summary"]))
        return lines

    def files(self):
        return [a for a in self.actions if a["kind"] in ("write", "remove")]


# The commands after which the files written before them say what the host has: once the
# packages moved (or the initramfs holds the nouveau blacklist) those files stay, whatever fails
# later.
COMMITTING = ("packages", "initramfs")


class Executor(object):
    """Carries a plan out: files through the host's atomic writer (``Host.write``), commands through its runner.

    A step that fails puts back what the steps before it changed and no committing command has
    made good yet (:class:`Journal`), then raises.
    """

    def __init__(self, system):
        self.system = system

    def execute(self, plan):
        done = []
        journal = Journal(self.system)
        commits = commit_points(plan.actions)
        for index, action in enumerate(plan.actions):
            try:
                self._carry_out(action, journal, done)
            except GpuFleetError as exc:
                raise journal.undo(exc)
            done.append(_step(action))
            if index in commits:
                journal.commit()
            elif action.get("undo"):
                journal.command(action["undo"])
        return done

    def _carry_out(self, action, journal, done):
        if action["kind"] == "run":
            self._run(action, done)
            return
        journal.save(action["path"])
        try:
            if action["kind"] == "write":
                self.system.write(action["path"], action["content"], mode=action["mode"])
            else:
                self.system.remove(action["path"])
        except (IOError, OSError) as exc:
            raise GpuFleetError("could not %s %s: %s%s" % (action["kind"], action["path"], exc, _done(done)),
                                path=action["path"], done=done)
        except GpuFleetError as exc:
            raise GpuFleetError(exc.msg + _done(done), **dict(exc.details, done=done))

    def _run(self, action, done):
        rc, out, err = self.system.run(action["argv"], env=action["env"] or None)
        if rc != 0:
            raise GpuFleetError(
                "`%s` failed (exit %s): %s%s" % (command_line(action["argv"]), rc, failure_output(out, err), _done(done)),
                command=action["argv"],
                rc=rc,
                stdout=out,
                stderr=err,
                done=done,
            )


def failure_output(out, err):
    """What a failed command said: its stderr's end, then its stdout's when it printed both.

    apt-get says why it refused on stdout ("The following packages have unmet dependencies: ...")
    and only "E: Unable to correct problems, you have held broken packages." on stderr.
    """
    said = tail(err, 10)
    if said and tail(out):
        return "%s (its output ended: %s)" % (said, tail(out))
    return said or tail(out, 10) or "no output"


def _done(done):
    """What was done before a step that failed, for its message."""
    return "; done before it: %s" % "; ".join(done) if done else "; nothing had been changed yet"


def commit_points(actions):
    """The indexes of the committing commands (COMMITTING): the last of each group in the plan."""
    last = dict((a["group"], i) for i, a in enumerate(actions) if a["kind"] == "run" and a["group"] in COMMITTING)
    return set(last.values())


def _step(action):
    if action["kind"] == "run":
        return command_line(action["argv"])
    return "%s %s" % ("wrote" if action["kind"] == "write" else "removed", action["path"])


class Journal(object):
    """What a run changed that a failure puts back: each file's bytes and mode before its first change
    (None: it was not there), and the commands that restore the holds and locks it released."""

    def __init__(self, system):
        self.system = system
        self.entries = []  # ("file", path, bytes or None, mode) and ("run", argv), in the order they happened
        self.saved = set()

    def save(self, path):
        """Keep ``path`` as it is now, before the run first changes it."""
        if path in self.saved:
            return
        data, mode = self._snapshot(path)
        self.saved.add(path)
        self.entries.append(("file", path, data, mode))

    def _snapshot(self, path):
        try:
            return self.system.read_bytes(path), os.stat(self.system.local(path)).st_mode & 0o7777
        except (IOError, OSError) as exc:
            if exc.errno == errno.ENOENT:
                return None, None
            raise GpuFleetError("could not read %s before changing it: %s" % (path, exc), path=path)

    def command(self, argv):
        self.entries.append(("run", list(argv)))

    def commit(self):
        """The changes so far stay: a committing command made them good."""
        self.entries = []
        self.saved = set()

    def undo(self, exc):
        """``exc`` once every change of the journal is put back, newest first, saying what was put back."""
        if not self.entries:
            return exc
        restored, words, failed = [], [], []
        for entry in reversed(self.entries):
            try:
                said = self._put_back(entry)
            except GpuFleetError as error:
                failed.append(error.msg)
                continue
            if said:
                restored.append(entry[1] if entry[0] == "file" else command_line(entry[1]))
                words.append(said)
        self.commit()
        msg = exc.msg + ("; put back as they were: %s" % ", ".join(words) if words else "")
        msg += "; could not put back: %s" % "; ".join(failed) if failed else ""
        return GpuFleetError(msg, **dict(exc.details, restored=restored, not_restored=failed))

    def _put_back(self, entry):
        """Undo one change; the words saying so (None when there was nothing to undo)."""
        if entry[0] == "run":
            rc, out, err = self.system.run(entry[1])
            if rc != 0:
                raise GpuFleetError("`%s` exited %s: %s" % (command_line(entry[1]), rc, tail(err) or tail(out)))
            return command_line(entry[1])
        dummy, path, data, mode = entry
        try:
            if data is None:
                if not os.path.lexists(self.system.local(path)):
                    return None
                self.system.remove(path)
                return "%s (removed: it was not there)" % path
            self.system.write(path, data, mode=mode)
        except (IOError, OSError) as exc:
            raise GpuFleetError("%s: %s" % (path, exc))
        return path
