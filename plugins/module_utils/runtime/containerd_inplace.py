# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""containerd's main file (or a k3s / RKE2 template) edited in place, and put back.

The top-level keys (``version``, ``imports``, ``disabled_plugins``) and the runtime tables of the
CRI plugin, each change recorded in the runtime's state comment so that ``state=absent`` undoes
exactly what ``state=present`` did. The planners are ``runtime.containerd`` and ``runtime.k3s``.
"""

from __future__ import annotations

import collections
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.containerd_config import (
    check_default_table, check_shape, CRI_PLUGIN_NAMES, desired_runtime, RUNC_TYPE, runtimes_of, toml_path_str,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit import is_table, shows_no_header, tk_value, toml_item
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.managed import unwrap, same
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.toml_edit import (
    add_table, delete_path, ensure_tables, hide_headers, insert_top_kv, lookup, note_change, parse_raw, prune_created, put_table, record_comment,
    record_entry, replace_path, restore_entry, set_scalar, write_record_comment,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.undo import checked_record


def edit_top(doc, version, version_source, opts, record, style, warnings, with_import) -> None:
    """The main file's top-level keys: the version when the file has none, the disabled plugins, the import."""
    written = version_source in ("file", "v1")  # the file's version is the one it says, or 1
    if not written and "version" not in doc:
        note_change(record, ["version"], doc, "version", version)
        insert_top_kv(doc, "version", toml_item(version), first=True)
    _edit_disabled_plugins(doc, written, opts, record, style, warnings)
    if with_import:
        _add_import(doc, opts, record, style)


#: A plugin's URI as containerd 1.6 / 1.7 take it in a version 2 file's disabled_plugins / required_plugins.
_PLUGIN_URI = re.compile(r"io\.containerd\.[A-Za-z0-9_-]+\.v[0-9]+\.[A-Za-z0-9_.-]+")


def check_plugin_uris(main) -> None:
    """Refuse, before the module writes a version into a file that had none, a plugin name that version 2 does
    not take (version 1 takes any name; "cri" is given its full name)."""
    if main.source in ("file", "v1"):
        return
    for key in ("disabled_plugins", "required_plugins"):
        names = unwrap(main.doc.get(key)) or []
        for name in names if isinstance(names, list) else []:
            if name != "cri" and not (isinstance(name, str) and _PLUGIN_URI.fullmatch(name)):
                raise GpuFleetError(
                    "%s: %s entry %r is not a plugin URI (expected e.g. io.containerd.grpc.v1.cri): the file has no "
                    "version, and containerd refuses that name once the module writes version = %s; nothing was written"
                    % (main.path, key, name, main.version), path=main.path, key=key, value=name)


def _holds_a_value(tree) -> bool:
    """Whether a table holds a setting anywhere (tables of empty tables set nothing)."""
    return any(_holds_a_value(v) for v in tree.values()) if isinstance(tree, dict) else True


def check_ignored_tables(main) -> None:
    """Refuse, before the module writes a version into a file that had none, a table under a version 2 or 3
    plugin name: containerd (1.6, 1.7 and 2.1, seen in their ``config dump``) reads a file without version as
    version 1 and ignores such a table; the written version would turn its settings on."""
    if main.source in ("file", "v1"):
        return
    plugins = unwrap(main.doc.get("plugins")) or {}
    for name, table in plugins.items() if isinstance(plugins, dict) else ():
        if "." in str(name) and _holds_a_value(table):
            raise GpuFleetError(
                "%s: the table [plugins.%s] is ignored today: the file has no version, so containerd reads it as "
                "version 1, which does not know that plugin name; the version = %s the module writes would turn "
                "its settings on. Add the version line yourself if they are meant, or remove the table; nothing "
                "was written" % (main.path, toml_path_str([name]), main.version),
                path=main.path, key="plugins.%s" % name)


def _edit_disabled_plugins(doc, version_written, opts, record, style, warnings) -> None:
    """Give ``disabled_plugins`` what the version and ``enable_cri`` need; warn while CRI stays off."""
    disabled = doc.get("disabled_plugins")
    if disabled is None or not isinstance(unwrap(disabled), list):
        return
    names = unwrap(disabled)
    wanted = wanted_disabled_plugins(names, version_written, opts.enable_cri)
    if wanted != names:
        note_change(record, ["disabled_plugins"], doc, "disabled_plugins", wanted)
        # Edit the array itself: the key keeps its place and its comment.
        while len(disabled):
            del disabled[0]
        for name in wanted:
            disabled.append(tk_value(name, style))
    still = [n for n in wanted if n in CRI_PLUGIN_NAMES]
    if still:
        warnings.append(
            "the CRI plugin is disabled (disabled_plugins = %s): Kubernetes cannot use this "
            "containerd until it is enabled (option enable_cri)" % still
        )


def wanted_disabled_plugins(names, version_written: bool, enable_cri: bool) -> list:
    """``disabled_plugins`` as the file needs it.

    A file that was version 1 (no version key) and gets a version: "cri" is a v1 short name
    that version 2 refuses ("invalid disabled plugin URI"), so it gets its full name.
    ``enable_cri``: no name of the CRI plugin is left.
    """
    wanted = list(names)
    if not version_written:
        wanted = ["io.containerd.grpc.v1.cri" if n == "cri" else n for n in wanted]
    if enable_cri:
        wanted = [n for n in wanted if n not in CRI_PLUGIN_NAMES]
    return wanted


def _add_import(doc, opts, record, style) -> None:
    """Make the main file import the drop-in's folder (appended to the imports it has)."""
    imports = doc.get("imports")
    if imports is None:
        value = tk_value([opts.import_glob], style)
        note_change(record, ["imports"], doc, "imports", [opts.import_glob])
        insert_top_kv(doc, "imports", value)
    elif opts.import_glob not in (unwrap(imports) or []):
        new = list(unwrap(imports)) + [opts.import_glob]
        note_change(record, ["imports"], doc, "imports", new)
        imports.append(tk_value(opts.import_glob, style))


def undo_top(doc, record, opts, warnings) -> None:
    """Undo the recorded changes of top-level keys (imports, disabled_plugins, version)."""
    entry = record_entry(record, ["imports"])
    if entry is not None:
        _undo_import(doc, entry, opts, warnings)
    for name in ("disabled_plugins", "version"):
        entry = record_entry(record, [name])
        if entry is not None:
            restore_entry(doc, entry, warnings)


def _undo_import(doc, entry, opts, warnings) -> None:
    if "imports" not in doc:
        return
    if opts.other_dropins:
        warnings.append(
            "kept %s in imports: other files match it (%s)"
            % (opts.import_glob, ", ".join(sorted(opts.other_dropins)))
        )
        return
    if same(doc["imports"], entry.get("set")):
        if entry.get("raw") is None:
            del doc["imports"]
        else:
            doc["imports"] = parse_raw(entry["raw"])
        return
    current = unwrap(doc["imports"]) or []
    original = unwrap(parse_raw(entry["raw"])) if entry.get("raw") else []
    if opts.import_glob in current and opts.import_glob not in original:
        arr = doc["imports"]
        del arr[current.index(opts.import_glob)]


def present_inplace(
    doc, cri_path, opts, style, record, warnings, allow_runc=True, skip=(), source_cri=None
):
    """Add / update the handler in ``doc``; ``record`` collects what was changed.

    ``source_cri``: the CRI table to copy the default runtime from when it is not ``doc``'s
    own (a k3s base template, whose runtimes only the rendered config.toml shows).
    """
    name = opts.runtime_name
    created = []
    default_entry = record_entry(record, list(cri_path) + ["containerd", "default_runtime_name"])
    source_name, desired = _desired_in_place(doc, cri_path, opts, default_entry, source_cri)
    runtimes_path = list(cri_path) + ["containerd", "runtimes"]
    if "runtime" not in skip:
        _put_runtime(doc, runtimes_path, name, desired, allow_runc, record, style, created)
    edit = _Edit(doc, record, style, created, warnings)
    default = name if opts.set_as_default else None
    _set_recorded(edit, list(cri_path) + ["containerd"], "default_runtime_name", default, default_entry)
    cdi_entry = record_entry(record, list(cri_path) + ["enable_cdi"])
    _set_recorded(edit, list(cri_path), "enable_cdi", True if opts.enable_cdi else None, cdi_entry)
    if created:
        record.setdefault("created", [])
        for path in created:
            if path not in record["created"]:
                record["created"].append(path)
    if "runtime" not in skip:
        runtimes = lookup(doc, runtimes_path)
        write_record_comment(runtimes[name], record, style.key_indent(len(runtimes_path) + 1))
    return source_name


def _desired_in_place(doc, cri_path, opts, default_entry, source_cri) -> tuple:
    """``(source name, table)`` of the handler, copied from the default before the module changed it."""
    cri_plain = unwrap(lookup(doc, cri_path)) or {}
    original_default = None
    if default_entry is not None:
        original_default = unwrap(parse_raw(default_entry["raw"])) if default_entry.get("raw") else "runc"
    existing = runtimes_of(cri_plain)[1].get(opts.runtime_name)
    return desired_runtime(
        source_cri if source_cri is not None else cri_plain, opts, original_default, existing or {}
    )


def _put_runtime(doc, runtimes_path, name, desired, allow_runc, record, style, created) -> None:
    """The handler's table as ``desired`` (other keys kept), and runc when the file has none."""
    depth = len(runtimes_path) + 1
    runtimes = ensure_tables(doc, runtimes_path, style, created)
    if allow_runc and "runc" not in runtimes:
        add_table(runtimes, "runc", {"runtime_type": RUNC_TYPE}, depth, style)
        record["runc"] = True
    put_table(runtimes, name, desired, depth, style)


#: A file being edited in place: its document, the record of what changed, its style, the key
#: paths of the tables the edit made, the warnings.
_Edit = collections.namedtuple("_Edit", "doc record style created warnings")


def _set_recorded(edit, table_path, key, value, entry) -> None:
    """Set ``key`` of the table at ``table_path`` to ``value``, its old text noted in the record;
    with ``value`` None, put back what the record's ``entry`` (if any) says was there."""
    if value is not None:
        table = ensure_tables(edit.doc, table_path, edit.style, edit.created)
        if not same(table.get(key), value):
            note_change(edit.record, table_path + [key], table, key, value)
            _note_header(edit.record, table, table_path, edit.created)
            set_scalar(table, key, value, len(table_path), edit.style)
    elif entry is not None:
        restore_entry(edit.doc, entry, edit.warnings)
        edit.record["keys"].remove(entry)


def _note_header(record, table, path, created) -> None:
    """Record that a table the file did not write out (``[a.b.c]`` made ``a.b`` exist)
    gets a header because a key is added to it, so that ``state=absent`` hides it again."""
    if path in created or not shows_no_header(table):
        return
    headered = record.setdefault("headered", [])
    if list(path) not in headered:
        headered.append(list(path))


def absent_inplace(doc, cri_path, opts, warnings) -> dict:
    """Remove the handler and undo what its record says; returns the record."""
    name = opts.runtime_name
    runtimes_path = list(cri_path) + ["containerd", "runtimes"]
    runtimes = lookup(doc, runtimes_path)
    record = {}
    if runtimes is not None and name in runtimes and is_table(runtimes[name]):
        record = record_comment(runtimes[name])[1] or {}
        delete_path(doc, runtimes_path + [name])
        runtimes = lookup(doc, runtimes_path)
        if record.get("runc") and "runc" in runtimes and same(
            runtimes["runc"], {"runtime_type": RUNC_TYPE}
        ):
            delete_path(doc, runtimes_path + ["runc"])
        if not record:
            # Not written by this module (e.g. nvidia-ctk): no record to follow. Give the
            # default back to runc if it pointed at the handler being removed.
            containerd = lookup(doc, list(cri_path) + ["containerd"])
            if containerd is not None and same(containerd.get("default_runtime_name"), name):
                replace_path(doc, list(cri_path) + ["containerd", "default_runtime_name"], toml_item("runc"))
    for entry in list(record.get("keys", [])):
        if entry.get("path", [None])[0] == "plugins":
            restore_entry(doc, entry, warnings)
    undo_top(doc, record, opts, warnings)
    prune_created(doc, record.get("created", []))
    hide_headers(doc, record.get("headered", []))
    return record


def inplace_record(doc, cri_path, name):
    runtimes = lookup(doc, list(cri_path) + ["containerd", "runtimes"])
    if runtimes is None or name not in runtimes or not is_table(runtimes[name]):
        return None
    return record_comment(runtimes[name])[1]


def check_main(doc, path, cri_path, opts) -> None:
    """Refuse a main file the editor cannot read safely: wrong types, a damaged state comment, a
    ``default_runtime`` table that would stay the default."""
    data = unwrap(doc)
    check_shape(data, path, cri_path)
    checked_record(inplace_record(doc, cri_path, opts.runtime_name), path)
    check_default_table(dig(data, *cri_path) or {}, path, cri_path, opts)
