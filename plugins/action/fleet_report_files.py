# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of gpufleet.nvidia.fleet_report_files: write the report on the control host.

The report is the run's output on the control host, so it is written there directly, by the
controller's own process: no module is shipped or started for it (three local module runs,
about a second each, before). Each file is written to a temporary file beside it and renamed
into place; an unchanged file is not rewritten.
"""

from __future__ import annotations

import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import argspec
from ansible_collections.gpufleet.nvidia.plugins.module_utils.report import fleet as fleet_report

RENDER = {"json": fleet_report.to_json, "html": fleet_report.render_html}
ARGUMENT_SPEC = argspec.from_stub(__file__)  # the options documented in plugins/modules/fleet_report_files.py


def write_report_files(report, path, formats, mode=0o644):
    """Write ``path.<format>`` for each format; returns ``(written, unchanged)`` paths."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o755, exist_ok=True)
    written, unchanged = [], []
    for fmt in formats:
        target = "%s.%s" % (path, fmt)
        text = RENDER[fmt](report)
        try:
            with open(target, encoding="utf-8") as handle:
                if handle.read() == text:
                    unchanged.append(target)
                    continue
        except FileNotFoundError:
            pass
        fd, tmp = tempfile.mkstemp(prefix=".gpufleet-report-", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        written.append(target)
    return written, unchanged


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # no longer has any effect
        try:
            dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        except AnsibleActionFail as exc:
            result.update(failed=True, msg=str(exc))
            return result
        try:
            mode = int(str(args["mode"]), 8)
        except ValueError:
            result.update(failed=True, msg="mode: %r is not an octal file mode (expected e.g. 0644)" % args["mode"])
            return result
        try:
            written, unchanged = write_report_files(args["report"], args["path"], args["formats"], mode)
        except (OSError, IOError) as exc:
            result.update(failed=True, msg="could not write the report under %s: %s" % (args["path"], exc))
            return result
        result.update(changed=False, written=written, unchanged=unchanged,
                      files=["%s.%s" % (args["path"], f) for f in args["formats"]])
        return result
