# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Add (or remove) the ``nvidia`` runtime handler in a containerd configuration.

Plain functions over file texts, no Ansible: :func:`plan_containerd` for
``/etc/containerd/config.toml`` (+ drop-in) and :func:`plan_k3s` for the
``config.toml.tmpl`` of k3s / RKE2. Both return a
:class:`~ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit.Plan`.

What is written, and why (NVIDIA Container Toolkit 1.20.0 ``nvidia-ctk`` is the reference;
the places where this does better are marked *beats nvidia-ctk*):

* The CRI plugin table follows the file's top-level ``version``: none -> 1 (``cri``),
  2 -> ``io.containerd.grpc.v1.cri`` (containerd 1.x), 3 and 4 ->
  ``io.containerd.cri.v1.runtime`` (containerd 2.x). A file without ``version`` and without
  version-1 content gets the version of the installed containerd (``containerd --version``).
* ``runtimes.<name>`` is a copy of the default runtime (``default_runtime_name``'s table,
  else ``runc``, else ``crun``; only runc-type runtimes), so ``SystemdCgroup`` carries
  over, with ``runtime_type = "io.containerd.runc.v2"`` and ``options.BinaryName``.
* *beats nvidia-ctk*: ``runc`` stays defined. containerd 1.6 / 1.7 replace their built-in
  runtimes map by the one in the file, so a file (or drop-in) that defines only ``nvidia``
  leaves CRI without ``runc`` and it fails to start with
  ``no corresponding runtime configured in `containerd.runtimes` for `containerd`
  `default_runtime_name = "runc"```. When the input has no ``runc`` table, one is added.
* Drop-in mode writes the whole CRI plugin table into the drop-in (containerd < 2.1 merges
  plugin tables from imports by key, not by content), with the main file's ``version``; the
  main file only gains the ``imports`` entry. *beats nvidia-ctk*: the main file is edited in
  place (comments, order and formatting kept), not re-serialised.
* In-place mode edits the main file. *beats nvidia-ctk*, whose 1.20.0 writes no runtime at
  all in place for version 2 and 3 files.
* Every change to a file the module does not own is recorded (one comment line holding the
  value it replaced), so ``state=absent`` gives back the original bytes.
"""

from __future__ import annotations

import collections
import copy
import os
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import deep_merge
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit import (
    checked_record,
    OWNER_MARK,
    UNDO_KEY,
    FileChange,
    GoTemplateMask,
    Plan,
    TomlStyle,
    add_table,
    apply_undo,
    check_edited_toml,
    check_handler_name,
    defined_tables,
    delete_path,
    dump_toml,
    encode_record,
    ensure_tables,
    find_record_in_text,
    hide_headers,
    insert_top_kv,
    keep_undo_note,
    is_table,
    lookup,
    note_change,
    parse_raw,
    parse_toml,
    plain,
    prune_created,
    recover_origin,
    record_comment,
    refusing_tomlkit_errors,
    record_entry,
    replace_path,
    restore_entry,
    same,
    set_scalar,
    shows_no_header,
    sync_table,
    tk_value,
    toml_data,
    toml_item,
    toml_settings,
    undo_note,
    write_record_comment,
)

RUNC_TYPE = "io.containerd.runc.v2"
DEFAULT_BINARY = "/usr/bin/nvidia-container-runtime"
DEFAULT_CONFIG = "/etc/containerd/config.toml"
DEFAULT_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"

#: CRI plugin table by config version.
CRI_PLUGINS = {
    1: "cri",
    2: "io.containerd.grpc.v1.cri",
    3: "io.containerd.cri.v1.runtime",
    4: "io.containerd.cri.v1.runtime",
}
#: Names under which ``disabled_plugins`` can switch the CRI plugin off.
CRI_PLUGIN_NAMES = (
    "cri",
    "io.containerd.grpc.v1.cri",
    "io.containerd.cri.v1.runtime",
    "io.containerd.cri.v1.images",
)

#: Where k3s / RKE2 look for an NVIDIA runtime to add on their own at start.
K3S_AUTODETECT_DIRS = ("/usr/local/nvidia/toolkit", "/usr/bin", "/usr/local/bin")


class ContainerdOptions:
    """The settings that decide what the containerd editor writes (the module's argument spec checked them)."""

    def __init__(
        self,
        state: str = "present",
        mode: str = "dropin",
        runtime_name: str = "nvidia",
        binary_name: str = DEFAULT_BINARY,
        set_as_default: bool = False,
        enable_cdi: bool = False,
        enable_cri: bool = False,
        dropin_path: str = DEFAULT_DROPIN,
        import_glob=None,
        config_version=None,
        containerd_major=None,
        other_dropins=(),
        containerd_version=None,
        import_order=None,
    ) -> None:
        check_handler_name(runtime_name, ("runc",))
        self.state = state
        self.mode = mode
        self.runtime_name = runtime_name
        self.binary_name = binary_name
        self.set_as_default = bool(set_as_default)
        self.enable_cdi = bool(enable_cdi)
        self.enable_cri = bool(enable_cri)
        self.dropin_path = dropin_path
        self.import_glob = import_glob or os.path.join(os.path.dirname(dropin_path), "*.toml")
        self.config_version = config_version
        self.containerd_version = containerd_version
        if containerd_major is None and containerd_version:
            containerd_major = int(str(containerd_version).split(".", 1)[0])
        self.containerd_major = containerd_major
        self.other_dropins = list(other_dropins or ())
        #: Every file containerd merges after the main file, in its order, the drop-in among them
        #: (None: the other files of the drop-in's folder, sorted, the drop-in in its place).
        self.import_order = list(import_order) if import_order else None

    def version_below(self, major: int, minor: int) -> bool:
        """Whether the containerd found is older than ``major.minor`` (unknown: no)."""
        try:
            parts = [int(p) for p in str(self.containerd_version).split(".")[:2]]
        except ValueError:
            return False
        return len(parts) == 2 and tuple(parts) < (major, minor)


# --------------------------------------------------------------------------------------
# Version and tables
# --------------------------------------------------------------------------------------


def _has_v1_content(doc) -> bool:
    """Whether a file without ``version`` relies on version-1 plugin names."""
    plugins = doc.get("plugins")
    if plugins is not None and is_table(plugins):
        if any("." not in str(k) for k in plain(plugins).keys()):
            return True
    for key in ("disabled_plugins", "required_plugins"):
        names = plain(doc.get(key)) or []
        if isinstance(names, list) and any("." not in str(n) and n != "cri" for n in names):
            return True
    return False


def detect_version(doc, containerd_major=None, override=None, path=None):
    """``(version, source)``: from the file, else version-1 content, else the binary.

    ``source`` is ``file`` when the file says it, ``v1`` when the file has version-1
    plugin names, otherwise ``option``, ``containerd`` or ``default`` and the version must
    be written into the file. ``path``: the file, named in a refusal.
    """
    if "version" in doc:
        version = plain(doc["version"])
        # An integer, as containerd reads it ("Can't convert 2(float64) to int", also for true and "2").
        if isinstance(version, bool) or not isinstance(version, int) or version not in CRI_PLUGINS:
            raise GpuFleetError(
                "%sunsupported containerd config version %r (expected 1, 2, 3 or 4)"
                % ("%s: " % path if path else "", plain(doc["version"])),
                path=path,
            )
        return version, "file"
    if _has_v1_content(doc):
        return 1, "v1"
    if override is not None:
        return int(override), "option"
    if containerd_major is not None:
        return (3 if int(containerd_major) >= 2 else 2), "containerd"
    return 2, "default"


def check_version_fits(path, version, source, opts) -> None:
    """Refuse a config version the installed containerd would not load the handler from.

    containerd 2.x maps no version 1 plugin table (``plugins.cri``, also a file without
    ``version`` that uses it): it starts, without the handler. containerd 1.x knows versions
    1 and 2 only and reads a version 3 or 4 file as its defaults. Either way the file loads and
    the runtime is not there: refused before anything is planned (unknown version: no check).
    """
    major = opts.containerd_major
    if major is None or opts.state != "present":
        return
    if int(major) >= 2 and version == 1:
        why = "containerd %s does not read the version 1 CRI table plugins.cri%s" % (
            opts.containerd_version or "2.x", " (a file without version that uses it is version 1)" if source == "v1" else "")
        fix = "migrate it (containerd config migrate) to version 3"
    elif int(major) < 2 and version >= 3:
        why = "containerd %s knows config versions 1 and 2 only (version %d is containerd 2.x's)" % (
            opts.containerd_version or "1.x", version)
        fix = "write it as version 2"
    else:
        return
    raise GpuFleetError(
        "%s: config version %d does not fit the installed containerd: %s, so the nvidia runtime would not "
        "be loaded; %s; nothing was written" % (path, version, why, fix),
        path=path,
        config_version=version,
    )


def plugin_path(version: int):
    return ("plugins", CRI_PLUGINS[version])


def toml_path_str(path) -> str:
    """A key path as TOML writes it in a header (``plugins."io.containerd.grpc.v1.cri"``)."""
    out = []
    for key in path:
        out.append(key if key.replace("_", "").replace("-", "").isalnum() else '"%s"' % key)
    return ".".join(out)


def _pick_source(runtimes: dict, name: str, preferred) -> tuple:
    """The runtime whose settings the new handler copies: ``(name, table)``."""
    for candidate in list(preferred) + ["runc", "crun"]:
        if not candidate or candidate == name:
            continue
        table = runtimes.get(candidate)
        if isinstance(table, dict) and table.get("runtime_type", RUNC_TYPE) == RUNC_TYPE:
            return candidate, table
    return None, {}


def _runtimes_of(cri: dict) -> tuple:
    containerd = cri.get("containerd") if isinstance(cri.get("containerd"), dict) else {}
    runtimes = containerd.get("runtimes") if isinstance(containerd.get("runtimes"), dict) else {}
    return containerd, runtimes


def desired_runtime(cri: dict, opts: ContainerdOptions, original_default=None, existing=None) -> tuple:
    """``(source name, table)`` the ``runtimes.<name>`` table must hold.

    ``cri`` is the CRI plugin table the source runtime is taken from; ``original_default``
    the default runtime before the module changed it (so that a second run copies the same
    runtime as the first); ``existing`` the handler's current table (its other keys stay).
    """
    containerd, runtimes = _runtimes_of(cri)
    preferred = [original_default] if original_default else [containerd.get("default_runtime_name")]
    source_name, source = _pick_source(runtimes, opts.runtime_name, preferred)
    if existing is None:
        existing = runtimes.get(opts.runtime_name)
    table = deep_merge(existing if isinstance(existing, dict) else {}, copy.deepcopy(source))
    table = deep_merge(table, {"runtime_type": RUNC_TYPE, "options": {"BinaryName": opts.binary_name}})
    return source_name, table


# --------------------------------------------------------------------------------------
# The shape of what is read: a refusal naming the file and the key, never a traceback
# --------------------------------------------------------------------------------------

#: ``(key path below the CRI table, what it must be)`` of the tables the editor walks.
_CRI_SHAPES = (
    (("containerd",), "table"),
    (("containerd", "runtimes"), "table"),
    (("containerd", "default_runtime_name"), "string"),
    (("containerd", "default_runtime"), "table"),
    (("enable_cdi",), "boolean"),
)
_KINDS = {"table": dict, "string": str, "list of strings": list, "boolean": bool}


def _shape_error(path, key_path, kind, value):
    return GpuFleetError(
        "%s: %s must be a %s, found %s %r; the file was left untouched"
        % (path, toml_path_str(key_path), kind, type(value).__name__, value),
        path=path,
        key=toml_path_str(key_path),
    )


def _check_kind(path, key_path, value, kind) -> None:
    """Refuse ``value`` (a plain value at ``key_path``) when it is not of ``kind``."""
    if value is None:
        return
    if not isinstance(value, _KINDS[kind]) or (kind == "list of strings" and not all(isinstance(v, str) for v in value)):
        raise _shape_error(path, key_path, kind, value)


def check_shape(data, path, cri_path) -> None:
    """Refuse a file whose keys the editor reads are not of the type containerd takes.

    ``data``: the file as plain values. The top-level lists, the plugin tables, the CRI table
    of ``cri_path``, its ``containerd`` table, the runtimes and each runtime's ``options``.
    """
    for key in ("imports", "disabled_plugins", "required_plugins"):
        _check_kind(path, [key], data.get(key), "list of strings")
    _check_kind(path, ["plugins"], data.get("plugins"), "table")
    plugins = data.get("plugins") or {}
    for name in CRI_PLUGINS.values():
        _check_kind(path, ["plugins", name], plugins.get(name), "table")
    cri = plugins.get(cri_path[1]) or {}
    for sub, kind in _CRI_SHAPES:
        _check_kind(path, list(cri_path) + list(sub), get_plain(cri, sub), kind)
    runtimes = get_plain(cri, ("containerd", "runtimes")) or {}
    for name, table in runtimes.items():
        _check_kind(path, list(cri_path) + ["containerd", "runtimes", name], table, "table")
        _check_kind(path, list(cri_path) + ["containerd", "runtimes", name, "options"], table.get("options"), "table")


def get_plain(tree, keys):
    """The plain value at ``keys`` below ``tree`` (None when a key is missing or a value on the way is no table)."""
    for key in keys:
        if not isinstance(tree, dict):
            return None
        tree = tree.get(key)
    return tree


def check_default_table(cri: dict, path, cri_path, opts) -> None:
    """Refuse ``set_as_default`` while a ``containerd.default_runtime`` table names a runtime:
    containerd 1.x uses that (deprecated) table as the default, whatever ``default_runtime_name`` says."""
    table = get_plain(cri, ("containerd", "default_runtime")) or {}
    if opts.set_as_default and opts.state == "present" and (table.get("runtime_type") or table.get("runtime_engine")):
        key = toml_path_str(list(cri_path) + ["containerd", "default_runtime"])
        raise GpuFleetError(
            "%s: %s is set, and containerd uses that table as its default runtime before "
            "default_runtime_name: set_as_default could not make %s the default. Remove the table "
            "(default_runtime_name names the default since containerd 1.3); nothing was written"
            % (path, key, opts.runtime_name),
            path=path,
            key=key,
        )


# --------------------------------------------------------------------------------------
# Top-level keys of the main file: version, imports, disabled_plugins
# --------------------------------------------------------------------------------------


def _edit_top(doc, version, version_source, opts, record, style, warnings, with_import) -> None:
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


def _check_plugin_uris(main) -> None:
    """Refuse, before the module writes a version into a file that had none, a plugin name that version 2 does
    not take (version 1 takes any name; "cri" is given its full name)."""
    if main.source in ("file", "v1"):
        return
    for key in ("disabled_plugins", "required_plugins"):
        names = plain(main.doc.get(key)) or []
        for name in names if isinstance(names, list) else []:
            if name != "cri" and not (isinstance(name, str) and _PLUGIN_URI.fullmatch(name)):
                raise GpuFleetError(
                    "%s: %s entry %r is not a plugin URI (expected e.g. io.containerd.grpc.v1.cri): the file has no "
                    "version, and containerd refuses that name once the module writes version = %s; nothing was written"
                    % (main.path, key, name, main.version), path=main.path, key=key, value=name)


def _holds_a_value(tree) -> bool:
    """Whether a table holds a setting anywhere (tables of empty tables set nothing)."""
    return any(_holds_a_value(v) for v in tree.values()) if isinstance(tree, dict) else True


def _check_ignored_tables(main) -> None:
    """Refuse, before the module writes a version into a file that had none, a table under a version 2 or 3
    plugin name: containerd (1.6, 1.7 and 2.1, seen in their ``config dump``) reads a file without version as
    version 1 and ignores such a table; the written version would turn its settings on."""
    if main.source in ("file", "v1"):
        return
    plugins = plain(main.doc.get("plugins")) or {}
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
    if disabled is None or not isinstance(plain(disabled), list):
        return
    names = plain(disabled)
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
    elif opts.import_glob not in (plain(imports) or []):
        new = list(plain(imports)) + [opts.import_glob]
        note_change(record, ["imports"], doc, "imports", new)
        imports.append(tk_value(opts.import_glob, style))


def _undo_top(doc, record, opts, warnings) -> None:
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
    current = plain(doc["imports"]) or []
    original = plain(parse_raw(entry["raw"])) if entry.get("raw") else []
    if opts.import_glob in current and opts.import_glob not in original:
        arr = doc["imports"]
        del arr[current.index(opts.import_glob)]


# --------------------------------------------------------------------------------------
# The runtime tables, edited in place
# --------------------------------------------------------------------------------------


def _present_inplace(
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
    cri_plain = plain(lookup(doc, cri_path)) or {}
    original_default = None
    if default_entry is not None:
        original_default = plain(parse_raw(default_entry["raw"])) if default_entry.get("raw") else "runc"
    existing = _runtimes_of(cri_plain)[1].get(opts.runtime_name)
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
    if name in runtimes and is_table(runtimes[name]):
        sync_table(runtimes[name], desired, depth, style)
    else:
        if name in runtimes:
            del runtimes[name]
        add_table(runtimes, name, desired, depth, style)


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


def _absent_inplace(doc, cri_path, opts, warnings) -> dict:
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
    _undo_top(doc, record, opts, warnings)
    prune_created(doc, record.get("created", []))
    hide_headers(doc, record.get("headered", []))
    return record


def _inplace_record(doc, cri_path, name):
    runtimes = lookup(doc, list(cri_path) + ["containerd", "runtimes"])
    if runtimes is None or name not in runtimes or not is_table(runtimes[name]):
        return None
    return record_comment(runtimes[name])[1]


# --------------------------------------------------------------------------------------
# The drop-in
# --------------------------------------------------------------------------------------


def _dropin_text(version, cri_path, tree, record, main_path) -> str:
    header = [
        OWNER_MARK + ": the NVIDIA runtime for containerd.",
        "# Holds the whole CRI plugin table of %s (containerd before 2.1" % main_path,
        "# replaces a plugin table from an import rather than merging it): change that file,",
        "# then run the module again, rather than editing this one.",
        encode_record(record),
    ]
    top = {}
    if version != 1:
        top["version"] = version
    top[cri_path[0]] = {cri_path[1]: tree}
    return dump_toml(top, header_comments=header)


def _edit_plain_tree(tree: dict, opts) -> str:
    """The drop-in's CRI table: ``tree`` with the handler, runc, default and CDI set."""
    source_name, desired = desired_runtime(tree, opts)
    containerd = tree.setdefault("containerd", {})
    runtimes = containerd.setdefault("runtimes", {})
    if "runc" not in runtimes:
        runtimes["runc"] = {"runtime_type": RUNC_TYPE}
    runtimes[opts.runtime_name] = desired
    if opts.set_as_default:
        containerd["default_runtime_name"] = opts.runtime_name
    if opts.enable_cdi:
        tree["enable_cdi"] = True
    return source_name


# --------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------


def _facts(version, cri_path, opts, **more) -> dict:
    facts = {
        "config_version": version,
        "plugin_table": toml_path_str(cri_path),
        "runtime_table": toml_path_str(list(cri_path) + ["containerd", "runtimes", opts.runtime_name]),
    }
    facts.update(more)
    return facts


def _merge_order(opts, others) -> list:
    """The paths of ``others`` and the drop-in in the order containerd merges them."""
    if opts.import_order:
        return opts.import_order
    return sorted(set(path for path, _text in others or ()) | {opts.dropin_path})


def _effective_cri(doc, cri_path, opts, others, warnings) -> dict:
    """The CRI plugin table containerd would use before the drop-in: the main file's, then
    each other imported file in containerd's order (containerd < 2.1: the last table replaces
    the earlier ones; 2.1 and later: merged). The drop-in must carry it all."""
    tree = copy.deepcopy(plain(lookup(doc, cri_path)) or {})
    merge = opts.containerd_version is not None and not opts.version_below(2, 1)
    texts = dict(others or ())
    after_dropin = False
    for path in _merge_order(opts, others):
        after_dropin = after_dropin or path == opts.dropin_path
        text = texts.get(path)
        if text is None:
            continue
        data = plain(parse_toml(text, path))
        check_shape(data, path, cri_path)
        sub = get_plain(data, cri_path)
        check_default_table(sub or {}, path, cri_path, opts)
        if not isinstance(sub, dict):
            continue
        if after_dropin:
            warnings.append(
                "%s sorts after %s and sets plugins.%s: containerd reads it last, so it "
                "overrides the nvidia drop-in" % (path, opts.dropin_path, cri_path[1])
            )
            continue
        tree = deep_merge(tree, sub) if merge else copy.deepcopy(sub)
    return tree


def _check_main(doc, path, cri_path, opts) -> None:
    """Refuse a main file the editor cannot read safely: wrong types, a damaged state comment, a
    ``default_runtime`` table that would stay the default."""
    data = plain(doc)
    check_shape(data, path, cri_path)
    checked_record(_inplace_record(doc, cri_path, opts.runtime_name), path)
    check_default_table(get_plain(data, cri_path) or {}, path, cri_path, opts)


#: The main file being planned: its path, text and document, its config version (and where that
#: came from: detect_version's source), the CRI plugin table of that version, the file's style.
_Main = collections.namedtuple("_Main", "path text doc version source cri_path style")


def plan_containerd(main_path: str, main_text, dropin_text, opts: ContainerdOptions, others=()) -> Plan:
    """Plan the edits of a containerd configuration (main file + drop-in).

    ``main_text`` / ``dropin_text`` are the files' contents, ``None`` when missing;
    ``others``: ``(path, text)`` of the other files the drop-in import matches.
    """
    main = _read_main(main_path, main_text, opts)
    if dropin_text is not None:
        parse_toml(dropin_text, opts.dropin_path)  # a drop-in that does not parse stops the plan too
    dropin_record = checked_record(find_record_in_text(dropin_text), opts.dropin_path) if dropin_text is not None else {}
    warnings = []
    name = opts.runtime_name
    if opts.state == "absent":
        return _plan_absent(main, dropin_text, dropin_record, opts, warnings)
    check_version_fits(main_path, main.version, main.source, opts)
    _check_plugin_uris(main)
    _check_ignored_tables(main)
    with refusing_tomlkit_errors(main_path, main.doc, list(main.cri_path) + ["containerd", "runtimes", name]):
        if opts.mode == "inplace":
            origin = _origin(main, opts)
            source_name = _handler_in_main(main, dropin_text, dropin_record, opts, warnings)
            _note_undo(main, opts, origin)
            files = [FileChange(main_path, main_text, _render(main.doc, main_text)), FileChange(opts.dropin_path, dropin_text, None)]
        else:
            new_dropin, source_name = _handler_in_dropin(main, dropin_record, opts, others, warnings)
            files = [FileChange(opts.dropin_path, dropin_text, new_dropin), FileChange(main_path, main_text, _render(main.doc, main_text))]
    _check_unrelated(main_path, main_text, files[0 if opts.mode == "inplace" else 1].after, main.cri_path, name)
    if opts.enable_cdi and opts.version_below(1, 7):
        warnings.append(
            "containerd %s ignores enable_cdi (CDI in the CRI plugin needs containerd 1.7 or later)"
            % opts.containerd_version
        )
    return Plan(
        files,
        msg=_message(files, "configured the %s runtime" % name, "the %s runtime is already configured" % name),
        warnings=warnings,
        **_facts(main.version, main.cri_path, opts, source_runtime=source_name, version_source=main.source)
    )


def _read_main(path, text, opts) -> _Main:
    """The main file parsed, its version detected and its shape checked."""
    doc = parse_toml(text, path)
    version, source = detect_version(doc, opts.containerd_major, opts.config_version, path=path)
    _check_main(doc, path, plugin_path(version), opts)
    return _Main(path, text, doc, version, source, plugin_path(version), TomlStyle.detect(text or ""))


def _plan_absent(main, dropin_text, dropin_record, opts, warnings) -> Plan:
    """Take the handler out (the drop-in, or the main file's tables) and undo what the records say."""
    name = opts.runtime_name
    note = (_inplace_record(main.doc, main.cri_path, name) or {}).get(UNDO_KEY)
    with refusing_tomlkit_errors(main.path, main.doc, list(main.cri_path) + ["containerd", "runtimes", name]):
        new_main = _removed_from_main(main, dropin_text, dropin_record, opts, warnings)
    exact = apply_undo(new_main, note)
    _check_unrelated(main.path, main.text, new_main, main.cri_path, name)
    files = [FileChange(main.path, main.text, exact if exact is not None else new_main), FileChange(opts.dropin_path, dropin_text, None)]
    return Plan(
        files,
        msg=_message(files, "removed the %s runtime" % name, "the %s runtime is not configured" % name),
        warnings=warnings,
        **_facts(main.version, main.cri_path, opts)
    )


def _absent_text(path, text, opts):
    """The main file ``text`` as ``state=absent`` leaves it by settings (before the byte-exact undo)."""
    main = _read_main(path, text, opts)
    return _removed_from_main(main, None, {}, opts, [])


def _origin(main, opts):
    """The user's main file before the module's first in-place edit (see ``edit.recover_origin``)."""
    record = _inplace_record(main.doc, main.cri_path, opts.runtime_name)
    if record is None:
        return main.text
    return recover_origin(main.text, _absent_text(main.path, main.text, opts), record.get(UNDO_KEY))


def _note_undo(main, opts, origin) -> None:
    """Keep in the handler's record what gives ``origin`` back byte for byte once its keys are out."""
    if origin is None:
        return  # a note for another text (the user edited the file): kept as it is
    table = lookup(main.doc, list(main.cri_path) + ["containerd", "runtimes", opts.runtime_name])
    item, record = record_comment(table)
    keep_undo_note(item, record, undo_note(_absent_text(main.path, main.doc.as_string(), opts), origin, toml_settings))


def _removed_from_main(main, dropin_text, dropin_record, opts, warnings):
    """The main file's new text once the handler and what the module changed are gone (None: remove it)."""
    created_file = False
    if dropin_text is not None:
        _undo_top(main.doc, dropin_record, opts, warnings)
        created_file = bool(dropin_record.get("created_file"))
    if lookup(main.doc, list(main.cri_path) + ["containerd", "runtimes", opts.runtime_name]) is not None:
        created_file = bool(_absent_inplace(main.doc, main.cri_path, opts, warnings).get("created_file")) or created_file
    new_main = _render(main.doc, main.text)
    if created_file and new_main is not None and not new_main.strip():
        return None  # the module created the file: remove it again
    if dropin_record.get("no_final_newline") is True and new_main and new_main.endswith("\n"):
        return new_main[:-1]
    return new_main


def _handler_in_main(main, dropin_text, dropin_record, opts, warnings):
    """Edit the handler into the main file itself; the name of the runtime it copies."""
    record = _inplace_record(main.doc, main.cri_path, opts.runtime_name) or {}
    if main.text is None or dropin_record.get("created_file"):
        record["created_file"] = True
    if dropin_text is not None:
        # Switching from drop-in to in-place: undo the drop-in's main-file changes.
        _undo_top(main.doc, dropin_record, opts, warnings)
    _edit_top(main.doc, main.version, main.source, opts, record, main.style, warnings, with_import=False)
    return _present_inplace(main.doc, main.cri_path, opts, main.style, record, warnings)


def _handler_in_dropin(main, dropin_record, opts, others, warnings):
    """The drop-in's new text (the main file only imports it), and the name of the runtime it copies."""
    if _inplace_record(main.doc, main.cri_path, opts.runtime_name) is not None:
        # Switching from in-place to drop-in: take the in-place edits out first.
        _absent_inplace(main.doc, main.cri_path, opts, warnings)
    record = copy.deepcopy(dropin_record)
    record.setdefault("keys", [])
    if main.text is None:
        record["created_file"] = True
    elif main.text and not main.text.endswith("\n") and not dropin_record:
        record["no_final_newline"] = True  # the edit adds one: state=absent takes it out again
    _edit_top(main.doc, main.version, main.source, opts, record, main.style, warnings, with_import=True)
    tree = _effective_cri(main.doc, main.cri_path, opts, others, warnings)
    source_name = _edit_plain_tree(tree, opts)
    return _dropin_text(main.version, main.cri_path, tree, record, main.path), source_name


def _render(doc, original):
    text = doc.as_string()
    if original is None and not text.strip():
        return None
    if original is not None and not text.strip() and not original.strip():
        return original
    return text


def _message(files, did, nothing) -> str:
    changed = [f for f in files if f.changed]
    if not changed:
        return nothing
    return "%s (%s)" % (did, ", ".join("%s %s" % (f.action, f.path) for f in changed))


def _strip(tree: dict, paths) -> dict:
    tree = copy.deepcopy(tree)
    for path in paths:
        node = tree
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
            if node is None:
                break
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return tree


def _prune_empty(tree):
    if not isinstance(tree, dict):
        return tree
    out = {}
    for k, v in tree.items():
        v = _prune_empty(v)
        if isinstance(v, dict) and not v:
            continue
        out[k] = v
    return out


def _check_unrelated(path, before, after, cri_path, name) -> None:
    """Refuse to write if anything but the keys this module manages would change."""
    if after is None:
        return
    check_edited_toml(path, before, after, list(cri_path) + ["containerd", "runtimes", name])
    new = toml_data(after)
    old = toml_data(before) if before else {}
    managed = [
        ["version"],
        ["imports"],
        ["disabled_plugins"],
        list(cri_path) + ["enable_cdi"],
        list(cri_path) + ["containerd", "default_runtime_name"],
        list(cri_path) + ["containerd", "runtimes", name],
        list(cri_path) + ["containerd", "runtimes", "runc"],
    ]
    if _prune_empty(_strip(old, managed)) != _prune_empty(_strip(new, managed)):
        raise GpuFleetError(
            "internal error: editing %s would change settings the module does not manage; "
            "nothing was written" % path
        )


# --------------------------------------------------------------------------------------
# k3s / RKE2
# --------------------------------------------------------------------------------------


def k3s_paths(flavor: str, generated_version=None, existing=()):
    """``(template, generated)`` paths of k3s / RKE2 (``existing``: paths that exist)."""
    base = "/var/lib/rancher/%s/agent/etc/containerd" % flavor
    generated = base + "/config.toml"
    v3 = base + "/config-v3.toml.tmpl"
    v2 = base + "/config.toml.tmpl"
    if v3 in existing:
        return v3, generated
    if v2 in existing:
        return v2, generated
    return (v3 if generated_version and generated_version >= 3 else v2), generated


def plan_k3s(
    flavor: str,
    template_path: str,
    template_text,
    generated_path: str,
    generated_text,
    opts: ContainerdOptions,
    autodetected=None,
) -> Plan:
    """Plan the edits of the containerd template of k3s / RKE2.

    k3s and RKE2 rewrite ``config.toml`` at every start, from ``config.toml.tmpl`` (or
    ``config-v3.toml.tmpl`` for containerd 2.x) when it exists. Without a template, one is
    created from the generated ``config.toml`` (marked as the module's, so that
    ``state=absent`` deletes it). A template that extends ``{{ template "base" . }}`` keeps
    doing so: only the tables that the base does not define are added after it.
    ``autodetected``: the NVIDIA runtime binary k3s will add by itself (base template only).
    """
    label = "k3s" if flavor == "k3s" else "RKE2"
    if opts.mode != "inplace":
        raise GpuFleetError(
            "%s: config_mode=dropin is not supported; the module edits %s (config_mode=inplace)"
            % (label, template_path)
        )
    generated_doc = parse_toml(generated_text, generated_path) if generated_text else None
    gen_version = _generated_version(generated_doc, generated_path)
    if template_text is None and opts.state == "absent":
        return Plan(
            [FileChange(template_path, None, None)],
            msg="the %s runtime is not configured (no %s)" % (opts.runtime_name, template_path),
            config_version=gen_version,
        )
    source_text, created_by_module = _template_source(label, template_path, template_text, generated_path, generated_text)
    if opts.state == "absent" and created_by_module:
        return Plan(
            [FileChange(template_path, template_text, None)],
            msg="removed %s (created by this module)" % template_path,
            config_version=gen_version,
        )
    mask = GoTemplateMask(source_text)
    doc = parse_toml(mask.masked, template_path)
    version = _template_version(doc, gen_version, template_path)
    template = _Template(label, template_path, template_text, mask, doc, version, plugin_path(version))
    _check_main(doc, template_path, template.cri_path, opts)
    if opts.state == "absent":
        return _k3s_removed(template, opts)
    return _k3s_configured(template, generated_text, generated_doc, opts, autodetected)


#: The k3s / RKE2 template being planned: k3s or RKE2, its path and text, the Go template mask,
#: the masked text's document, its config version and CRI plugin table.
_Template = collections.namedtuple("_Template", "label path text mask doc version cri_path")


def _generated_version(doc, path):
    """The version of k3s's generated config.toml (None: no file, or no version), its types checked."""
    try:
        version = _version_of(doc)
    except GpuFleetError as exc:
        raise GpuFleetError("%s: %s" % (path, exc.msg), path=path)
    if version is not None:
        check_shape(plain(doc), path, plugin_path(version))
    return version


def _version_of(doc):
    """The ``version`` a parsed file says (None without a file or a version)."""
    if doc is None or "version" not in doc:
        return None
    return detect_version(doc)[0]


def _template_source(label, template_path, template_text, generated_path, generated_text) -> tuple:
    """``(text to edit, whether the module made the template)``: the template, else one made from config.toml."""
    if template_text is not None:
        return template_text, template_text.startswith(OWNER_MARK)
    if generated_text is None:
        raise GpuFleetError(
            "%s has not written %s yet: start %s once so that the template can be made from "
            "it, or create %s" % (label, generated_path, label, template_path)
        )
    made = "%s: created from %s; delete it to go back to %s's own.\n%s" % (
        OWNER_MARK,
        os.path.basename(generated_path),
        label,
        generated_text,
    )
    return made, True


def _template_version(doc, generated_version, template_path) -> int:
    """The template's config version: its own, else the generated file's, else 2."""
    if "version" in doc:
        try:
            return detect_version(doc)[0]
        except GpuFleetError as exc:
            raise GpuFleetError("%s: %s" % (template_path, exc.msg), path=template_path)
    return 2 if generated_version is None else generated_version


def _k3s_removed(template, opts) -> Plan:
    """Take the handler and what the module changed out of a template the module did not make."""
    name = opts.runtime_name
    warnings = []
    with refusing_tomlkit_errors(template.path, template.doc, list(template.cri_path) + ["containerd", "runtimes", name]):
        _absent_inplace(template.doc, template.cri_path, opts, warnings)
    files = [FileChange(template.path, template.text, _unmasked(template, opts))]
    return Plan(
        files,
        msg=_message(files, "removed the %s runtime" % name, "the %s runtime is not configured" % name),
        warnings=warnings,
        **_facts(template.version, template.cri_path, opts, template=template.path)
    )


def _k3s_configured(template, generated_text, generated_doc, opts, autodetected) -> Plan:
    """Add the handler (and the default, CDI) to the template, leaving to a base template what it defines."""
    name = opts.runtime_name
    warnings = []
    if opts.enable_cri:
        warnings.append("%s: enable_cri does not apply (the CRI plugin is always on)" % template.label)
    record = _inplace_record(template.doc, template.cri_path, name) or {}
    skip, notes, allow_runc, source_cri = _left_to_the_base(template, generated_text, generated_doc, opts, autodetected)
    if skip == {"runtime"} and not opts.set_as_default and not opts.enable_cdi and not record:
        files = [FileChange(template.path, template.text, template.text)]
        return Plan(
            files,
            msg="; ".join(notes),
            warnings=warnings,
            **_facts(template.version, template.cri_path, opts, template=template.path)
        )
    style = TomlStyle.detect(template.mask.masked, default_step="")
    with refusing_tomlkit_errors(template.path, template.doc, list(template.cri_path) + ["containerd", "runtimes", name]):
        source_name = _present_inplace(
            template.doc, template.cri_path, opts, style, record, warnings, allow_runc=allow_runc, skip=skip,
            source_cri=source_cri,
        )
    files = [FileChange(template.path, template.text, _unmasked(template, opts))]
    msg = _message(files, "configured the %s runtime" % name, "the %s runtime is already configured" % name)
    if notes:
        msg = "%s; %s" % (msg, "; ".join(notes))
    return Plan(
        files,
        msg=msg,
        warnings=warnings,
        **_facts(template.version, template.cri_path, opts, template=template.path, source_runtime=source_name)
    )


def _unmasked(template, opts) -> str:
    """The edited template's text, its Go actions back, once nothing unrelated is seen to change."""
    masked_after = template.doc.as_string()
    _check_unrelated(template.path, template.mask.masked, masked_after, template.cri_path, opts.runtime_name)
    return template.mask.unmask(masked_after)


def _left_to_the_base(template, generated_text, generated_doc, opts, autodetected) -> tuple:
    """What a template that extends the base template leaves to it: ``(skip, notes, allow_runc, source_cri)``.

    ``source_cri``: the base's CRI table as rendered in config.toml, whose default runtime the
    handler copies (None: the template's own).
    """
    if not template.mask.uses_base:
        return set(), [], True, None
    base_tables = defined_tables(generated_text or "") - defined_tables(template.mask.masked)
    skip, notes = _runtime_of_the_base(template, base_tables, opts, autodetected)
    _refuse_second_definitions(template, base_tables, opts)
    allow_runc = (tuple(template.cri_path) + ("containerd", "runtimes", "runc")) not in base_tables
    source_cri = None
    if generated_doc is not None:
        source_cri = plain(lookup(generated_doc, template.cri_path)) or {}
    return skip, notes, allow_runc, source_cri


def _runtime_of_the_base(template, base_tables, opts, autodetected) -> tuple:
    """``({"runtime"}, [why])`` when the base defines the handler or k3s adds it itself, else nothing."""
    name = opts.runtime_name
    if tuple(template.cri_path) + ("containerd", "runtimes", name) in base_tables:
        return {"runtime"}, ["%s's base template already defines the %s runtime" % (template.label, name)]
    if autodetected and name == "nvidia":
        return {"runtime"}, [
            "%s adds the nvidia runtime by itself at its next start (found %s)" % (template.label, autodetected)
        ]
    return set(), []


def _refuse_second_definitions(template, base_tables, opts) -> None:
    """Refuse what would define again a table the base template defines (containerd would not start)."""
    blocked = []
    if opts.set_as_default and (tuple(template.cri_path) + ("containerd",)) in base_tables:
        blocked.append(
            "set_as_default (use %s's own option: default-runtime: %s in its config.yaml)"
            % (template.label, opts.runtime_name)
        )
    if opts.enable_cdi and tuple(template.cri_path) in base_tables:
        blocked.append("enable_cdi")
    if blocked:
        raise GpuFleetError(
            "%s extends %s's base template, which already defines the table that %s would "
            "change; a second definition would stop containerd. Use a full template instead "
            "(delete %s and run the module again to have it made from config.toml)"
            % (template.path, template.label, " and ".join(blocked), template.path)
        )
