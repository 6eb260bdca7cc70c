# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What ``state=absent`` needs beyond the settings: the state record checked, and the byte-exact undo.

The editors leave a one-line state record in the files they edit (its format is ``runtime.managed``):
:func:`checked_record` refuses one that is damaged; the undo note (:func:`undo_note`) is the patch
that turns the file as ``state=absent`` leaves it back into the user's file byte for byte.
"""

from __future__ import annotations

import difflib
import hashlib
import json

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.managed import STATE_MARK, encode_record, same


def _valid_record_entry(entry) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("path"), list) and bool(entry["path"]) and all(
        isinstance(k, str) for k in entry["path"]
    ) and isinstance(entry.get("raw"), (str, type(None)))


def _valid_paths(value) -> bool:
    return isinstance(value, list) and all(isinstance(p, list) and all(isinstance(k, str) for k in p) for p in value)


def checked_record(record, path, owner="gpufleet.nvidia.container_runtime", mark=STATE_MARK, created="paths"):
    """``record`` (a state comment the module wrote), or a refusal naming ``path`` when it is damaged.

    ``created``: what the record's ``created`` is, ``paths`` (the key paths the module added, as the
    runtime editors record them) or ``flag`` (a boolean: the module created the file)."""
    if record is None:
        return None
    fine = isinstance(record, dict) and isinstance(record.get("keys", []), list)
    fine = fine and all(_valid_record_entry(e) for e in record.get("keys", []))
    if created == "paths":
        fine = fine and all(_valid_paths(record.get(k, [])) for k in ("created", "headered"))
    else:
        fine = fine and isinstance(record.get("created", False), bool)
    if not fine:
        raise GpuFleetError(
            "%s: the state comment of %s (%s) is damaged (expected a JSON object whose keys is a list of "
            "{path: [key, ...], raw}, %s; found %s); put the file back from a backup, or remove the comment and "
            "what the module added; the file was left untouched"
            % (path, owner, mark, "created and headered lists of key paths" if created == "paths" else "created a boolean",
               json.dumps(record)[:200]),
            path=path,
        )
    return record


#: The record's key that holds :func:`undo_note`'s note.
UNDO_KEY = "undo"


def _digest(text: str) -> str:
    """A fingerprint of ``text`` (change detection, not security: 64 bits of SHA-256)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def keep_undo_note(item, record, note):
    """Store ``note`` (None: no note) in a handler's record, the comment on ``item``, unless it is
    the one already there."""
    if note == record.get(UNDO_KEY):
        return
    record.pop(UNDO_KEY, None)
    if note is not None:
        record[UNDO_KEY] = note
    item.trivia.comment = encode_record(record)


def undo_note(removed, origin, data):
    """What turns ``removed`` back into ``origin`` byte for byte: ``{"sha": .., "patch": [[i1, i2, text], ..]}``.

    ``removed`` is the file as ``state=absent`` leaves it by settings (the editor's own keys taken
    out: tomlkit and ``json`` may drop a blank line, a final newline, an empty table), ``origin``
    the user's file before the module's first edit. The patch replaces lines ``i1:i2`` of
    ``removed`` by ``text``; ``sha`` fingerprints ``removed``, so that the patch is applied only to
    the very text it was made for (the user changed nothing but the module's own keys since).
    ``None`` when no note is to be kept: the texts are the same, there is no file on one side, or
    they differ in settings (``data``: a text's settings, empty tables left out; e.g. a handler
    another tool wrote before the module: the patch must not put it back).
    """
    if removed is None or origin is None or removed == origin or not same(data(removed), data(origin)):
        return None
    a, b = removed.splitlines(True), origin.splitlines(True)
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    patch = [[i1, i2, "".join(b[j1:j2])] for tag, i1, i2, j1, j2 in opcodes if tag != "equal"]
    return {"sha": _digest(removed), "patch": patch}


def apply_undo(removed, note):
    """``removed`` with ``note``'s patch applied; ``None`` when the note is not for this text (or damaged)."""
    if removed is None or not isinstance(note, dict) or note.get("sha") != _digest(removed):
        return None
    patch = note.get("patch")
    lines = removed.splitlines(True)
    if not isinstance(patch, list) or not all(_patch_step(step, len(lines)) for step in patch):
        return None
    for i1, i2, text in sorted(patch, reverse=True):
        lines[i1:i2] = [text]
    return "".join(lines)


def _patch_step(step, size: int) -> bool:
    """Whether ``step`` is ``[i1, i2, text]`` with ``0 <= i1 <= i2 <= size``."""
    if not isinstance(step, list) or len(step) != 3 or not isinstance(step[2], str):
        return False
    i1, i2 = step[0], step[1]
    valid = all(isinstance(i, int) and not isinstance(i, bool) for i in (i1, i2))
    return valid and 0 <= i1 <= i2 <= size


def recover_origin(text, removed, note):
    """The user's file before the module's first edit, as far as it is known.

    ``removed`` is ``text`` with the module's keys out (None: the file holds no edit of the module,
    ``text`` is the origin). ``note`` applied to ``removed`` when it is the text the note was made
    for; ``removed`` itself when there is no note (its bytes are all that is known). ``None`` when
    a note is there but made for another text (the user edited the file since): the note is kept
    as it is, so that a second run changes nothing and the note works again if the edit is undone.
    """
    if note is None and removed is None:
        return text
    if note is None:
        return removed
    return apply_undo(removed, note)
