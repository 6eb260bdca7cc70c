# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA Container Toolkit's own configuration, ``/etc/nvidia-container-runtime/config.toml``,
edited: isolation of unprivileged containers is the pair of top-level keys that
``runtime.toolkit_settings`` describes (with :func:`isolation_of` and :func:`runtime_mode`, which
read the file's data for validation without tomlkit).

The file is edited in place with the runtime layer's style-preserving TOML helpers
(``runtime.edit``: comments, order and every other key kept); the original text of each key the
module changes is recorded in one comment line at the top of the file, so that ``state=absent``
puts back exactly what was there (or removes a key that was not).
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import edit, files, managed, toml_edit, undo
# The settings as the toolkit reads them, without tomlkit; here too for this editor's callers.
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.toolkit_settings import (  # noqa: F401  pylint: disable=unused-import
    CONFIG_PATH,
    ENVVAR_KEY,
    ISOLATED,
    VOLUME_MOUNTS_KEY,
    isolation_of,
    runtime_mode,
)


#: The comment that carries what the module changed, at the top of the file.
RECORD_MARK = "gpufleet.nvidia.toolkit_config state:"


def read_record(text) -> dict:
    """What the module recorded in ``text`` (``{}`` when nothing)."""
    return managed.find_record_in_text(text, RECORD_MARK)


def _without_record(text: str) -> str:
    return "".join(line for line in text.splitlines(True) if managed.decode_record_line(line, RECORD_MARK) is None)


def _with_record(text: str, record: dict) -> str:
    """``text`` with the record as its first line (none when it records nothing)."""
    body = _without_record(text)
    if not record.get("keys"):
        return body
    return managed.encode_record(record, RECORD_MARK) + "\n" + body


def plan_isolation(text, path: str, state: str) -> tuple:
    """``(new text, warnings)`` of the file ``text`` (None: no file) with isolation ``state``.

    ``present`` sets the pair, recording each key's original text the first time it is changed;
    ``absent`` puts back what the record holds where the key still has the value set (a key
    changed by hand since is left, with a warning), and removes the file if the module created
    it and nothing else is in it now. The file is not created for ``absent``.
    """
    if state == "absent" and text is None:
        return None, []
    doc = edit.parse_toml(_without_record(text or ""), path)
    record = undo.checked_record(read_record(text), path, owner="gpufleet.nvidia.toolkit_config", mark=RECORD_MARK,
                                 created="flag")
    record.setdefault("keys", [])
    warnings = []
    if state == "present":
        _check_types(doc, path)
        _set_isolation(doc, record, edit.TomlStyle.detect(text or "", default_step=""))
        if text is None:
            record["created"] = True
        return _with_record(doc.as_string(), record), warnings
    for entry in record["keys"]:
        toml_edit.restore_entry(doc, entry, warnings)
    after = doc.as_string()
    if record.get("created") and record["keys"] and not after.strip():
        return None, warnings  # the module created the file for these keys alone
    return after, warnings


def _set_isolation(doc, record: dict, style) -> None:
    for key, value in ISOLATED:
        if key in doc and managed.same(doc[key], value):
            continue
        toml_edit.note_change(record, [key], doc, key, value)
        if key in doc:
            toml_edit.replace_path(doc, [key], edit.tk_value(value, style))
        else:
            toml_edit.insert_top_kv(doc, key, edit.tk_value(value, style))


def _check_types(doc, path: str) -> None:
    """Refuse a file whose isolation keys are not booleans: the toolkit cannot read the file, and
    replacing the value would hide the mistake from whoever made it."""
    for key, unused in ISOLATED:
        if key in doc and not isinstance(managed.unwrap(doc[key]), bool):
            raise GpuFleetError(
                "toolkit_config: %s in %s is %s, not a boolean (true or false); the file was left untouched"
                % (key, path, toml_edit.raw_text(doc, key)),
                path=path,
                key=key,
            )


def converge(host, params: dict, check_mode: bool = False, want_diff: bool = False) -> dict:
    """Read, plan, write (unless check mode); the module's result (without the CDI part)."""
    path = params["path"]
    edit.require_tomlkit()
    before = files.read_text(host, path)
    if params["isolate_unprivileged"] is None:
        after, warnings = before, []
    else:
        after, warnings = plan_isolation(before, path, "present" if params["isolate_unprivileged"] else "absent")
    change = files.FileChange(path, before, after)
    data = managed.unwrap(edit.parse_toml(after, path)) if after else {}
    if change.changed and not check_mode:
        _write(host, path, after)
    result = {
        "changed": change.changed,
        "path": path,
        "exists": after is not None,
        "isolation": isolation_of(data),
        "mode": runtime_mode(data),
        "msg": _message(change, params["isolate_unprivileged"], data),
        "warnings": warnings,
    }
    if want_diff:
        result["diff"] = change.diff()
    return result


def _write(host, path: str, text) -> None:
    """Write ``text`` to ``path``; None removes the file (the module created it for the keys alone)."""
    try:
        if text is None:
            host.remove(path)
        else:
            host.write(path, text, mode=0o644)
    except (GpuFleetError, OSError) as exc:
        raise GpuFleetError("toolkit_config: cannot %s %s: %s" % ("remove" if text is None else "write", path,
                                                                  getattr(exc, "msg", exc)), path=path)


def _message(change, wanted, data) -> str:
    isolated = isolation_of(data)["isolated"]
    now = "unprivileged containers get GPUs only through the device plugin's volume mounts" if isolated else (
        "unprivileged containers can ask for GPUs with NVIDIA_VISIBLE_DEVICES"
    )
    if wanted is None:
        return "%s: isolation not managed; %s" % (change.path, now)
    if not change.changed:
        return "%s: unchanged; %s" % (change.path, now)
    return "%s: %s; %s" % (change.path, "isolation set" if wanted else "isolation undone", now)
