# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Add (or remove) the ``nvidia`` runtime handler of CRI-O.

Plain functions over file texts; :func:`plan_crio` returns a
:class:`~ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit.Plan`.

* Drop-in mode (default): ``/etc/crio/crio.conf.d/99-nvidia.toml`` holds only
  ``[crio.runtime.runtimes.nvidia]`` (and ``crio.runtime.default_runtime`` when asked):
  CRI-O applies its drop-ins key by key, so nothing else needs repeating.
* In-place mode edits ``/etc/crio/crio.conf`` and keeps the rest of it. *beats nvidia-ctk*,
  whose 1.20.0 replaces the whole ``crio.conf`` with the one table when run in place.
* The handler copies the settings of ``runc`` (else the default runtime, else ``crun``)
  from the merged configuration, with ``runtime_path`` = the NVIDIA runtime and
  ``runtime_type = "oci"``. ``runc`` comes first because nvidia-container-runtime runs
  runc underneath. A ``monitor_path`` that belongs to another runtime type (conmon-rs for
  ``pod``) is not copied.
* CDI: CRI-O (>= 1.23) always reads CDI specs, so ``enable_cdi`` changes nothing here.
"""

from __future__ import annotations

import copy
import dataclasses

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import deep_merge
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.docker import check_names
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit import dump_toml, is_table, parse_toml, toml_settings, TomlStyle
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.files import FileChange, message, Plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.managed import get_path, OWNER_MARK, unwrap, same
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.toml_edit import (
    check_edited_toml, delete_path, ensure_tables, lookup, note_change, parse_raw, prune_created, put_table, record_comment, record_entry,
    refusing_tomlkit_errors, restore_entry, set_scalar, write_record_comment,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.undo import (
    apply_undo, checked_record, keep_undo_note, recover_origin, UNDO_KEY, undo_note,
)

DEFAULT_BINARY = "/usr/bin/nvidia-container-runtime"
DEFAULT_CONFIG = "/etc/crio/crio.conf"
DEFAULT_DROPIN = "/etc/crio/crio.conf.d/99-nvidia.toml"
RUNTIMES_PATH = ("crio", "runtime", "runtimes")


@dataclasses.dataclass
class CrioOptions:
    """The settings that decide what the CRI-O editor writes (the module's argument spec checked them)."""

    state: str = "present"
    mode: str = "dropin"
    runtime_name: str = "nvidia"
    binary_name: str = DEFAULT_BINARY
    set_as_default: bool = False
    dropin_path: str = DEFAULT_DROPIN

    def __post_init__(self) -> None:
        check_names(self.runtime_name, self.binary_name, ("runc", "crun"))
        self.set_as_default = bool(self.set_as_default)


def merged_config(texts) -> dict:
    """CRI-O's view of several files applied in order (later keys win, tables merge); each file's
    tables on the way to a runtime handler checked (:func:`check_shape`)."""
    merged = {}
    for path, text in texts:
        if text is None:
            continue
        merged = deep_merge(merged, check_shape(path, unwrap(parse_toml(text, path))))
    return merged


def check_shape(path: str, data: dict) -> dict:
    """``data`` (one file of CRI-O's) when ``crio``, ``crio.runtime``, ``crio.runtime.runtimes`` and each
    handler in it are tables (or absent); else a refusal naming the file, the key and what it holds."""
    node, where = data, []
    for key in RUNTIMES_PATH:
        where.append(key)
        node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            return data
        _table_or_refuse(path, where, node)
    for name, entry in node.items():
        _table_or_refuse(path, list(RUNTIMES_PATH) + [name], entry)
    return data


def _table_or_refuse(path, where, value) -> None:
    if not isinstance(value, dict):
        raise GpuFleetError(
            "%s: %s is not a table (found %s %r; expected [%s]); the file was left untouched"
            % (path, ".".join(where), type(value).__name__, value, ".".join(where)),
            path=path, key=".".join(where))


def desired_runtime(merged: dict, opts: CrioOptions, record=None) -> tuple:
    """``(source name, table)`` for ``crio.runtime.runtimes.<name>``.

    ``record``: the handler's state record. Once ``set_as_default`` made the handler the
    default, the default it replaced (the record's) stays the candidate, so that every run
    copies the runtime the first one copied.
    """
    runtimes = get_path(merged, RUNTIMES_PATH, {}) or {}
    default = get_path(merged, ("crio", "runtime", "default_runtime"))
    entry = _default_entry(record)
    if entry is not None:
        default = unwrap(parse_raw(entry["raw"])) if entry.get("raw") else None
    source_name, source = None, {}
    for candidate in ("runc", default, "crun"):
        if isinstance(candidate, str) and candidate != opts.runtime_name and isinstance(runtimes.get(candidate), dict):
            source_name, source = candidate, copy.deepcopy(runtimes[candidate])
            break
    source.pop("runtime_path", None)
    source_type = source.pop("runtime_type", "oci")
    if source_type != "oci":
        source.pop("monitor_path", None)
    table = {"runtime_path": opts.binary_name, "runtime_type": "oci"}
    table.update(source)
    return source_name, table


def _default_entry(record):
    """The record's entry of ``crio.runtime.default_runtime`` (None: the module did not set it)."""
    for entry in (record or {}).get("keys", []) if isinstance(record, dict) else []:
        if isinstance(entry, dict) and entry.get("path") == DEFAULT_PATH:
            return entry
    return None


def _dropin_text(table: dict, opts: CrioOptions) -> str:
    runtime = {}
    if opts.set_as_default:
        runtime["default_runtime"] = opts.runtime_name
    runtime["runtimes"] = {opts.runtime_name: table}
    header = [
        OWNER_MARK + ": the NVIDIA runtime handler for CRI-O.",
        "# Removed by the module with state=absent; edits here are overwritten.",
    ]
    return dump_toml({"crio": {"runtime": runtime}}, header_comments=header)


DEFAULT_PATH = ["crio", "runtime", "default_runtime"]


def _handler(doc, name, path):
    """``(runtimes table, record)``; ``(None, {})`` when the file has no runtimes; a damaged record is refused."""
    runtimes = lookup(doc, RUNTIMES_PATH)
    if runtimes is None or name not in runtimes or not is_table(runtimes[name]):
        return runtimes, {}
    return runtimes, checked_record(record_comment(runtimes[name])[1], path) or {}


def _remove_handler(doc, main_text, runtimes, name, record, warnings):
    """Remove the handler from crio.conf and undo its record; the new text of crio.conf."""
    if runtimes is not None and name in runtimes:
        delete_path(doc, list(RUNTIMES_PATH) + [name])
        entry = record_entry(record, DEFAULT_PATH) if record else None
        runtime = lookup(doc, DEFAULT_PATH[:-1])
        if entry is not None:
            restore_entry(doc, entry, warnings)
        elif not record and runtime is not None and same(runtime.get("default_runtime"), name):
            # Not written by this module: no record; CRI-O falls back to its default.
            delete_path(doc, DEFAULT_PATH)
        prune_created(doc, record.get("created", []))
    new_main = doc.as_string() if main_text is not None else None
    if record.get("created_file") and new_main is not None and not new_main.strip():
        new_main = None  # the module created crio.conf: remove it again
    return new_main


def plan_crio(main_path: str, main_text, dropin_text, other_dropins, opts: CrioOptions) -> Plan:
    """Plan the edits of CRI-O's configuration.

    ``other_dropins``: ``(path, text)`` of the other files in ``crio.conf.d``, in the order
    CRI-O reads them (the source runtime may be defined there, e.g. ``10-crio.conf``).
    """
    name = opts.runtime_name
    warnings = []
    doc = parse_toml(main_text, main_path)
    check_shape(main_path, unwrap(doc))
    if dropin_text is not None:
        check_shape(opts.dropin_path, unwrap(parse_toml(dropin_text, opts.dropin_path)))
    others = [(p, t) for p, t in other_dropins if p != opts.dropin_path]
    merged = merged_config([(main_path, main_text)] + others)
    facts = {"runtime_table": "crio.runtime.runtimes.%s" % name}
    runtimes, record = _handler(doc, name, main_path)
    with refusing_tomlkit_errors(main_path, doc, list(RUNTIMES_PATH) + [name]):
        if opts.state == "absent":
            new_main = _remove_handler(doc, main_text, runtimes, name, record, warnings)
            exact = apply_undo(new_main, record.get(UNDO_KEY))
            files = [FileChange(main_path, main_text, exact if exact is not None else new_main), FileChange(opts.dropin_path, dropin_text, None)]
            return Plan(files, msg=message(files, "removed the %s runtime" % name, "the %s runtime is not configured" % name),
                        warnings=warnings, **facts)
        source_name, table = desired_runtime(merged, opts, record)
        _refuse_overriding_default(others, main_path, opts)
        if opts.mode == "dropin":
            new_main = main_text
            if record:
                # Switching from in-place: take the module's handler out of crio.conf.
                new_main = _remove_handler(doc, main_text, runtimes, name, record, warnings)
            files = [FileChange(opts.dropin_path, dropin_text, _dropin_text(table, opts)), FileChange(main_path, main_text, new_main)]
        else:
            origin = recover_origin(main_text, _absent_text(main_path, main_text, name) if record else None, record.get(UNDO_KEY))
            _handler_in_place(doc, main_text, record or {"keys": []}, table, opts, warnings)
            _note_undo(main_path, doc, name, origin)
            files = [FileChange(main_path, main_text, doc.as_string()), FileChange(opts.dropin_path, dropin_text, None)]
    check_edited_toml(main_path, main_text, files[0].after if opts.mode == "inplace" else files[1].after, list(RUNTIMES_PATH) + [name])
    msg = message(files, "configured the %s runtime" % name, "the %s runtime is already configured" % name)
    return Plan(files, msg=msg, warnings=warnings, source_runtime=source_name, **facts)


def _absent_text(path, text, name):
    """crio.conf's ``text`` as ``state=absent`` leaves it by settings (before the byte-exact undo)."""
    doc = parse_toml(text, path)
    runtimes, record = _handler(doc, name, path)
    return _remove_handler(doc, text, runtimes, name, record, [])


def _note_undo(path, doc, name, origin) -> None:
    """Keep in the handler's record what gives ``origin`` back byte for byte once its keys are out."""
    if origin is None:
        return  # a note for another text (the user edited the file): kept as it is
    item, record = record_comment(lookup(doc, RUNTIMES_PATH)[name])
    keep_undo_note(item, record, undo_note(_absent_text(path, doc.as_string(), name), origin, toml_settings))


def read_order(path: str) -> list:
    """The key that sorts the files of ``crio.conf.d`` as CRI-O reads them (``filepath.Walk``: by name,
    folder by folder)."""
    return path.split("/")


def _refuse_overriding_default(others, main_path, opts) -> None:
    """set_as_default cannot work when a file CRI-O reads after the one that sets it (crio.conf in place,
    the drop-in) sets another default."""
    if not opts.set_as_default:
        return
    mine = main_path if opts.mode == "inplace" else opts.dropin_path
    overriding = [
        p for p, t in others
        if (opts.mode == "inplace" or read_order(p) > read_order(mine))
        and get_path(unwrap(parse_toml(t, p)), DEFAULT_PATH) not in (None, opts.runtime_name)
    ]
    if overriding:
        raise GpuFleetError(
            "%s sets crio.runtime.default_runtime, which overrides %s (CRI-O reads it later): set_as_default cannot "
            "work; %s (nothing was written)" % (", ".join(overriding), mine, "use config_mode=dropin" if opts.mode == "inplace"
                                                else "remove the setting from it, or give dropin_path a name read last"),
            overriding=overriding,
        )


def _handler_in_place(doc, main_text, record, table, opts, warnings) -> None:
    """Add or update the handler (and the default) in crio.conf's ``doc``, noting it in ``record``."""
    name = opts.runtime_name
    style = TomlStyle.detect(main_text or "", default_step="")
    if main_text is None:
        record["created_file"] = True
    created = []
    runtimes = ensure_tables(doc, RUNTIMES_PATH, style, created)
    depth = len(RUNTIMES_PATH) + 1
    put_table(runtimes, name, deep_merge(unwrap(runtimes[name]) if name in runtimes else {}, table), depth, style)
    _default_in_place(doc, record, opts, style, warnings)
    if created:
        record["created"] = created
    write_record_comment(runtimes[name], record, style.key_indent(depth))


def _default_in_place(doc, record, opts, style, warnings) -> None:
    """Make the handler the default (noting the old value), or give back a default the module set."""
    runtime = lookup(doc, DEFAULT_PATH[:-1])
    entry = record_entry(record, DEFAULT_PATH)
    if opts.set_as_default and not same(runtime.get("default_runtime"), opts.runtime_name):
        note_change(record, DEFAULT_PATH, runtime, "default_runtime", opts.runtime_name)
        set_scalar(runtime, "default_runtime", opts.runtime_name, 2, style)
    elif not opts.set_as_default and entry is not None:
        restore_entry(doc, entry, warnings)
        record["keys"].remove(entry)
