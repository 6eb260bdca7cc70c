"""A fake AnsibleModule for the host adapter's tests: ``FakeModule``."""

from __future__ import annotations

import os


class FakeModule(object):
    """What the adapter uses of an AnsibleModule, recording the commands and the writes."""

    def __init__(self, tmpdir):
        self.tmpdir = str(tmpdir)
        self.params = {}
        self.commands = []
        self.cleanup = []

    def run_command(self, argv, environ_update=None):
        self.commands.append((argv, environ_update))
        return 0, "out", ""

    def add_cleanup_file(self, path):
        self.cleanup.append(path)

    def atomic_move(self, src, dest, unsafe_writes=False):
        os.rename(src, dest)

    def backup_local(self, path):
        backup = path + ".bak"
        with open(path, "rb") as src, open(backup, "wb") as dst:
            dst.write(src.read())
        return backup
