# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of gpufleet.nvidia.fleet_report_files: write the report on the control host.

The report is the run's output on the control host, so it is written there directly, by the
controller's own process: no module is shipped or started for it (three local module runs,
about a second each, before), with the collection's one writer (common/io.py's replace_file: a
temporary file beside it, renamed into place); an unchanged file is not rewritten.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.common import argspec
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import io as safe_io
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import fleet as fleet_report
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import html, junit, prometheus, text

# format: (file extension, renderer)
RENDER = {
    "json": ("json", fleet_report.to_json),
    "html": ("html", html.render_html),
    "txt": ("txt", text.render_text),
    "junit": ("junit.xml", junit.render_junit),
    "prom": ("prom", prometheus.render_prometheus),
}
ARGUMENT_SPEC = argspec.from_stub(__file__)  # the options documented in plugins/modules/fleet_report_files.py


def write_report_files(report, path, formats, mode=0o644):
    """Write ``path.<format>`` for each format; returns ``(written, unchanged)`` paths."""
    written, unchanged = [], []
    for fmt in formats:
        extension, render = RENDER[fmt]
        target = "%s.%s" % (path, extension)
        content = render(report)
        if _current(target) == content:
            unchanged.append(target)
            continue
        safe_io.replace_file(target, content, mode=mode)
        written.append(target)
    return written, unchanged


def _current(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (FileNotFoundError, UnicodeDecodeError):
        return None


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
                      files=["%s.%s" % (args["path"], RENDER[f][0]) for f in args["formats"]])
        return result
