# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Add (or remove) the ``nvidia`` runtime handler in a containerd configuration.

Plain functions over file texts, no Ansible: :func:`plan_containerd` for
``/etc/containerd/config.toml`` (+ drop-in) returns a ``runtime.files.Plan``; ``runtime.k3s``
is the same for the ``config.toml.tmpl`` of k3s / RKE2. What they are asked for and read is
``runtime.containerd_config``; the main file's edits in place, ``runtime.containerd_inplace``.

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

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import deep_merge, dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.containerd_config import (
    check_default_table, check_shape, check_unrelated, check_version_fits, ContainerdOptions, desired_runtime, detect_version, facts,
    plugin_path, RUNC_TYPE,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.containerd_inplace import (
    absent_inplace, check_ignored_tables, check_main, check_plugin_uris, edit_top, inplace_record, present_inplace, undo_top,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit import dump_toml, parse_toml, toml_settings, TomlStyle
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.files import FileChange, message, Plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.managed import encode_record, find_record_in_text, OWNER_MARK, unwrap
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.toml_edit import lookup, record_comment, refusing_tomlkit_errors
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.undo import (
    apply_undo, checked_record, keep_undo_note, recover_origin, UNDO_KEY, undo_note,
)


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


def _merge_order(opts, others) -> list:
    """The paths of ``others`` and the drop-in in the order containerd merges them."""
    if opts.import_order:
        return opts.import_order
    return sorted(set(path for path, _text in others or ()) | {opts.dropin_path})


def _effective_cri(doc, cri_path, opts, others, warnings) -> dict:
    """The CRI plugin table containerd would use before the drop-in: the main file's, then
    each other imported file in containerd's order (containerd < 2.1: the last table replaces
    the earlier ones; 2.1 and later: merged). The drop-in must carry it all."""
    tree = copy.deepcopy(unwrap(lookup(doc, cri_path)) or {})
    merge = opts.containerd_version is not None and not opts.version_below(2, 1)
    texts = dict(others or ())
    after_dropin = False
    for path in _merge_order(opts, others):
        after_dropin = after_dropin or path == opts.dropin_path
        text = texts.get(path)
        if text is None:
            continue
        data = unwrap(parse_toml(text, path))
        check_shape(data, path, cri_path)
        sub = dig(data, *cri_path)
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
    check_plugin_uris(main)
    check_ignored_tables(main)
    with refusing_tomlkit_errors(main_path, main.doc, list(main.cri_path) + ["containerd", "runtimes", name]):
        if opts.mode == "inplace":
            origin = _origin(main, opts)
            source_name = _handler_in_main(main, dropin_text, dropin_record, opts, warnings)
            _note_undo(main, opts, origin)
            files = [FileChange(main_path, main_text, _render(main.doc, main_text)), FileChange(opts.dropin_path, dropin_text, None)]
        else:
            new_dropin, source_name = _handler_in_dropin(main, dropin_record, opts, others, warnings)
            files = [FileChange(opts.dropin_path, dropin_text, new_dropin), FileChange(main_path, main_text, _render(main.doc, main_text))]
    check_unrelated(main_path, main_text, files[0 if opts.mode == "inplace" else 1].after, main.cri_path, name)
    if opts.enable_cdi and opts.version_below(1, 7):
        warnings.append(
            "containerd %s ignores enable_cdi (CDI in the CRI plugin needs containerd 1.7 or later)"
            % opts.containerd_version
        )
    return Plan(
        files,
        msg=message(files, "configured the %s runtime" % name, "the %s runtime is already configured" % name),
        warnings=warnings,
        **facts(main.version, main.cri_path, opts, source_runtime=source_name, version_source=main.source)
    )


def _read_main(path, text, opts) -> _Main:
    """The main file parsed, its version detected and its shape checked."""
    doc = parse_toml(text, path)
    version, source = detect_version(doc, opts.containerd_major, opts.config_version, path=path)
    check_main(doc, path, plugin_path(version), opts)
    return _Main(path, text, doc, version, source, plugin_path(version), TomlStyle.detect(text or ""))


def _plan_absent(main, dropin_text, dropin_record, opts, warnings) -> Plan:
    """Take the handler out (the drop-in, or the main file's tables) and undo what the records say."""
    name = opts.runtime_name
    note = (inplace_record(main.doc, main.cri_path, name) or {}).get(UNDO_KEY)
    with refusing_tomlkit_errors(main.path, main.doc, list(main.cri_path) + ["containerd", "runtimes", name]):
        new_main = _removed_from_main(main, dropin_text, dropin_record, opts, warnings)
    exact = apply_undo(new_main, note)
    check_unrelated(main.path, main.text, new_main, main.cri_path, name)
    files = [FileChange(main.path, main.text, exact if exact is not None else new_main), FileChange(opts.dropin_path, dropin_text, None)]
    return Plan(
        files,
        msg=message(files, "removed the %s runtime" % name, "the %s runtime is not configured" % name),
        warnings=warnings,
        **facts(main.version, main.cri_path, opts)
    )


def _absent_text(path, text, opts):
    """The main file ``text`` as ``state=absent`` leaves it by settings (before the byte-exact undo)."""
    main = _read_main(path, text, opts)
    return _removed_from_main(main, None, {}, opts, [])


def _origin(main, opts):
    """The user's main file before the module's first in-place edit (see ``undo.recover_origin``)."""
    record = inplace_record(main.doc, main.cri_path, opts.runtime_name)
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
        undo_top(main.doc, dropin_record, opts, warnings)
        created_file = bool(dropin_record.get("created_file"))
    if lookup(main.doc, list(main.cri_path) + ["containerd", "runtimes", opts.runtime_name]) is not None:
        created_file = bool(absent_inplace(main.doc, main.cri_path, opts, warnings).get("created_file")) or created_file
    new_main = _render(main.doc, main.text)
    if created_file and new_main is not None and not new_main.strip():
        return None  # the module created the file: remove it again
    if dropin_record.get("no_final_newline") is True and new_main and new_main.endswith("\n"):
        return new_main[:-1]
    return new_main


def _handler_in_main(main, dropin_text, dropin_record, opts, warnings):
    """Edit the handler into the main file itself; the name of the runtime it copies."""
    record = inplace_record(main.doc, main.cri_path, opts.runtime_name) or {}
    if main.text is None or dropin_record.get("created_file"):
        record["created_file"] = True
    if dropin_text is not None:
        # Switching from drop-in to in-place: undo the drop-in's main-file changes.
        undo_top(main.doc, dropin_record, opts, warnings)
    edit_top(main.doc, main.version, main.source, opts, record, main.style, warnings, with_import=False)
    return present_inplace(main.doc, main.cri_path, opts, main.style, record, warnings)


def _handler_in_dropin(main, dropin_record, opts, others, warnings):
    """The drop-in's new text (the main file only imports it), and the name of the runtime it copies."""
    if inplace_record(main.doc, main.cri_path, opts.runtime_name) is not None:
        # Switching from in-place to drop-in: take the in-place edits out first.
        absent_inplace(main.doc, main.cri_path, opts, warnings)
    record = copy.deepcopy(dropin_record)
    record.setdefault("keys", [])
    if main.text is None:
        record["created_file"] = True
    elif main.text and not main.text.endswith("\n") and not dropin_record:
        record["no_final_newline"] = True  # the edit adds one: state=absent takes it out again
    edit_top(main.doc, main.version, main.source, opts, record, main.style, warnings, with_import=True)
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
