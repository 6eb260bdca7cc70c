# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Add (or remove) the ``nvidia`` runtime in Docker's ``/etc/docker/daemon.json``.

A plain function over the file's text; :func:`plan_docker` returns a
:class:`~ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit.Plan`.

The JSON is merged, never replaced: the user's other keys and their order survive, the
file's indentation is kept (compact one-line files stay on one line), and nothing is
written when the parsed content already holds what is asked, so formatting the module
would choose differently is not a reason to rewrite the file.

Written: ``runtimes.<name> = {"path": "nvidia-container-runtime", "args": []}`` (what
nvidia-ctk writes; keys the user added to that entry stay), ``default-runtime`` when asked,
``features.cdi = true`` for CDI (Docker >= 25).

What was there before is recorded, when there is something to give back, in a state file of
the collection's own, :data:`STATE_FILE`, outside every folder Docker or a runtime reads
(daemon.json is Docker's and the admin's: it holds only keys Docker defines). The file is one
JSON object, ``{"<daemon.json path>": {"<runtime name>": record}}``; a record is
``{"created": true}`` when the module created daemon.json, ``{"default-runtime": "<the one
before>"}`` when ``set_as_default`` replaced another default, ``{"features.cdi": ...}`` for what
``enable_cdi`` replaced, and ``undo``, the note that gives the user's bytes back.
``state=absent`` removes the runtime and its record (the state file goes when it holds no
record), gives back that default when ``default-runtime`` still names the runtime (else removes
it: Docker falls back to runc; a default changed since is left), removes an empty ``runtimes``,
``features.cdi`` only when ``enable_cdi`` is given too, and the file itself when the module
created it and nothing else is in it.

No state file is no record (a daemon.json the module never wrote, or one written before the
record moved out of it); a state file that is not such an object is refused by name, nothing
written: guessing would give back the wrong default or remove a file the user made.

Earlier versions kept the record in daemon.json itself, under :data:`STATE_KEY` in the
runtime's entry. Such a record is still read (merged over the state file's, as the newer
one), and the next run that writes, ``state=absent`` included, moves it into the state file
and takes it out of daemon.json.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit import without_empty
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.files import check_handler_name, FileChange, parse_json, Plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.managed import same
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.undo import apply_undo, recover_origin, UNDO_KEY, undo_note

DEFAULT_BINARY = "nvidia-container-runtime"
DEFAULT_CONFIG = "/etc/docker/daemon.json"
#: The key of the runtime's entry where earlier versions kept their record in daemon.json (read,
#: and moved into :data:`STATE_FILE` by the next run that writes).
STATE_KEY = "gpufleet.nvidia.container_runtime state"
#: The state file of the records, by daemon.json path and runtime name (a host path; see the docstring).
STATE_FILE = "/var/lib/gpufleet.nvidia/container_runtime/docker.json"
#: The state file's mode when the module creates it: only root reads it (an undo note holds bytes of daemon.json).
STATE_MODE = 0o600
STATE_SHAPE = "a JSON object {daemon.json path: {runtime name: record object}}"


_HANDLER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*", re.ASCII)
HANDLER_NAME_WORDS = "a handler name (ASCII letters, digits and . _ -, starting with a letter or digit)"


def handler_name(value):
    """A runtime handler's name as every runtime's file takes it as a plain key (no quote, space or newline)."""
    if not isinstance(value, str) or not _HANDLER_NAME.fullmatch(value):
        raise inputs.Invalid(HANDLER_NAME_WORDS)
    return value


def check_names(runtime_name, binary_name, taken):
    """Refuse, by name, a handler name or a runtime binary that would change what the file says.

    ``taken``: the names the runtime keeps for itself. The binary is a path or a name looked up
    in ``PATH``: no whitespace, no control characters, no leading ``-``.
    """
    check_handler_name(runtime_name, taken)
    inputs.checked("runtime_name", handler_name, runtime_name)
    inputs.checked("binary_name", functools.partial(inputs.name, what="a runtime binary (a path or a name)"), binary_name)


@dataclasses.dataclass
class DockerOptions:
    """The settings that decide what the Docker editor writes (the module's argument spec checked them)."""

    state: str = "present"
    runtime_name: str = "nvidia"
    binary_name: str = DEFAULT_BINARY
    set_as_default: bool = False
    enable_cdi: bool = False

    def __post_init__(self) -> None:
        check_names(self.runtime_name, self.binary_name, ("runc", "io.containerd.runc.v2"))
        self.set_as_default = bool(self.set_as_default)
        self.enable_cdi = bool(self.enable_cdi)


def read_config(text, path: str) -> dict:
    """daemon.json's object (``{}`` for no file), or a refusal naming the file and what is wrong.

    Beyond :func:`parse_json`'s checks (which refuse ``NaN`` and ``Infinity``, as Docker does): a
    string or key holding a lone surrogate (a ``\\ud800`` escape of half a character) is not
    Unicode and could not be written back as UTF-8.
    """
    config = parse_json(text, path)
    if not config:
        return config
    where = _lone_surrogate(config, "")
    if where is not None:
        raise GpuFleetError(
            "%s: %s holds a lone surrogate (a \\u escape of half a character: not Unicode); the file was left untouched"
            % (path, where), path=path, key=where,
        )
    _check_objects(config, path)
    return config


def _check_objects(config: dict, path: str) -> None:
    """Refuse a ``runtimes``, ``features`` or runtime entry that is not a JSON object, naming the file, key and value."""
    runtimes = config.get("runtimes")
    found = [(k, config[k]) for k in ("runtimes", "features") if config.get(k) is not None and not isinstance(config[k], dict)]
    if isinstance(runtimes, dict):
        found += [("runtimes.%s" % n, e) for n, e in runtimes.items() if not isinstance(e, dict)]
    if found:
        key, value = found[0]
        raise GpuFleetError("%s: %s must be a JSON object, found %s; the file was left untouched"
                            % (path, key, json.dumps(value)[:200] if not isinstance(value, str) else repr(value)),
                            path=path, key=key)


def _not_unicode(text) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _lone_surrogate(value, where):
    """Where (``runtimes.nvidia.path``, ``labels[0]``) the first key or string that is not Unicode is, else None."""
    if isinstance(value, str):
        return where if _not_unicode(value) else None
    if isinstance(value, dict):
        items = [(key, "%s%s%s" % (where, "." if where else "", json.dumps(key)[1:-1])) for key in value]
    elif isinstance(value, list):
        items = [(i, "%s[%d]" % (where, i)) for i in range(len(value))]
    else:
        return None
    for key, label in items:
        found = label if isinstance(key, str) and _not_unicode(key) else _lone_surrogate(value[key], label)
        if found is not None:
            return found
    return None


def json_layout(text):
    """``(indent, trailing newline)`` of a JSON text; indent ``None`` means one line."""
    if text is None or not text.strip() or text.strip() in ("{}",):
        return 4, True
    trailing = text.endswith("\n")
    m = re.search(r"\n([ \t]+)\S", text)
    if m:
        indent = m.group(1)
        return (indent if "\t" in indent else len(indent)), trailing
    return None, trailing


def top_level_slices(text: str):
    """``{key: exact text of its value}`` for the top-level object of ``text``.

    ``None`` when the text is not one plain object (then it is re-serialised instead).
    """
    decoder = json.JSONDecoder()
    slices = {}
    ws = re.compile(r"[ \t\r\n]*")
    try:
        pos = ws.match(text, 0).end()
        if text[pos] != "{":
            return None
        pos = ws.match(text, pos + 1).end()
        if text[pos] == "}":
            return slices
        while True:
            key, pos = decoder.raw_decode(text, pos)
            pos = ws.match(text, pos).end()
            if text[pos] != ":":
                return None
            start = ws.match(text, pos + 1).end()
            end = decoder.raw_decode(text, start)[1]
            if key in slices:
                return None  # a duplicate key: let json decide, re-serialise
            slices[key] = text[start:end]
            pos = ws.match(text, end).end()
            if text[pos] == "}":
                return slices
            if text[pos] != ",":
                return None
            pos = ws.match(text, pos + 1).end()
    except (ValueError, IndexError):
        return None


def render_json(value: dict, indent, trailing_newline: bool, original=None) -> str:
    """Serialise ``value``; top-level values that did not change keep their original text."""
    if indent is None:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        return text + ("\n" if trailing_newline else "")
    unit = indent if isinstance(indent, str) else " " * indent
    slices = top_level_slices(original) if original else None
    old = json.loads(original) if slices is not None else {}
    parts = []
    for key, item in value.items():
        if slices is not None and key in slices and same(old.get(key), item) and _same_order(old.get(key), item):
            rendered = slices[key]
        else:
            rendered = json.dumps(item, indent=indent, ensure_ascii=False, allow_nan=False).replace("\n", "\n" + unit)
        parts.append("%s%s: %s" % (unit, json.dumps(key, ensure_ascii=False, allow_nan=False), rendered))
    text = "{\n%s\n}" % ",\n".join(parts) if parts else "{}"
    return text + ("\n" if trailing_newline else "")


def _same_order(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same_order(a[k], b[k]) for k in a)
    return True


def desired_config(current: dict, opts: DockerOptions, record=None) -> dict:
    """The daemon.json content asked for, built from ``current`` (``record``: the runtime's record);
    an old in-file record (:data:`STATE_KEY`) is left out."""
    config = copy.deepcopy(current)
    if opts.state == "absent":
        return _without_runtime(config, opts, record or {})
    return _with_runtime(config, opts)


def state_record(config: dict, name: str) -> dict:
    """The record an earlier version left in the runtime's entry of daemon.json (``{}`` when there is none)."""
    runtimes = config.get("runtimes")
    entry = runtimes.get(name) if isinstance(runtimes, dict) else None
    record = entry.get(STATE_KEY) if isinstance(entry, dict) else None
    return record if isinstance(record, dict) else {}


def read_state(text, path: str = STATE_FILE) -> dict:
    """The state file's object (``{}`` for no file), or a refusal naming the file and what was expected."""
    try:
        state = parse_json(text, path)
    except GpuFleetError as exc:
        raise GpuFleetError("%s (expected %s; remove the file to go on without records)"
                            % (exc.msg.replace("the file was left untouched", "nothing was written"), STATE_SHAPE),
                            **exc.details)
    for daemon_path, runtimes in state.items():
        if isinstance(runtimes, dict):
            bad = next(("%s.%s" % (daemon_path, n) for n, r in runtimes.items() if not isinstance(r, dict)), None)
        else:
            bad = daemon_path
        if bad is not None:
            raise GpuFleetError(
                "%s: %s is not an object; nothing was written (expected %s; remove the file to go on without records)"
                % (path, bad, STATE_SHAPE), path=path, key=bad)
    return state


def state_text(state: dict):
    """The state file's text for ``state`` (``None``: no record left, no file)."""
    if not state:
        return None
    return json.dumps(state, indent=4, ensure_ascii=False, allow_nan=False) + "\n"


def _with_record(state: dict, path: str, name: str, record) -> dict:
    """``state`` with the record of ``path``'s runtime ``name`` set to ``record`` (none when empty)."""
    state = copy.deepcopy(state)
    runtimes = state.setdefault(path, {})
    if record:
        runtimes[name] = record
    else:
        runtimes.pop(name, None)
    if not runtimes:
        del state[path]
    return state


def _without_runtime(config: dict, opts: DockerOptions, record: dict) -> dict:
    """``config`` less the runtime, a default that names it and the CDI feature it turned on, each
    given back as the record says it was (without a record, ``enable_cdi`` removes ``features.cdi``)."""
    name = opts.runtime_name
    runtimes = config.get("runtimes")
    if isinstance(runtimes, dict) and name in runtimes:
        del runtimes[name]
        if not runtimes:
            del config["runtimes"]
    if config.get("default-runtime") == name:
        if "default-runtime" in record:
            config["default-runtime"] = record["default-runtime"]
        else:
            del config["default-runtime"]
    _cdi_back(config, record, opts)
    return config


def _cdi_back(config: dict, record: dict, opts: DockerOptions) -> None:
    """Give ``features.cdi`` back: the value the record kept, if the feature is still what the module set
    (``true``); none recorded, removed when ``enable_cdi`` is given (the module added it)."""
    features = config.get("features")
    if not isinstance(features, dict) or features.get("cdi") is not True:
        return
    kept = record.get("features.cdi")
    if isinstance(kept, dict) and "before" in kept:
        features["cdi"] = kept["before"]
        return
    if opts.enable_cdi or isinstance(kept, dict):
        del features["cdi"]
        if not features:
            del config["features"]


def _with_runtime(config: dict, opts: DockerOptions) -> dict:
    """``config`` with the runtime (its other keys kept, an old in-file record left out), the default and CDI as asked."""
    name = opts.runtime_name
    runtimes = _object(config, "runtimes")
    entry = runtimes.get(name)
    entry = dict(entry) if isinstance(entry, dict) else {}
    entry.pop(STATE_KEY, None)
    entry["path"] = opts.binary_name
    entry.setdefault("args", [])
    runtimes[name] = _ordered(entry, ("path", "args"))
    if opts.set_as_default:
        config["default-runtime"] = name
    if opts.enable_cdi:
        _object(config, "features")["cdi"] = True
    return config


def _record(before: dict, config: dict, opts: DockerOptions, created: bool) -> dict:
    """The record ``before``, with the file's creation and what ``set_as_default`` and ``enable_cdi`` replace added.

    ``default-runtime``: the default before (any JSON value; none: there was none);
    ``features.cdi``: ``{"before": value}`` when the file had one (``{}``: it had none, the module added it).
    """
    record = dict(before)
    if created:
        record["created"] = True
    if opts.set_as_default and "default-runtime" in config and config["default-runtime"] != opts.runtime_name:
        record.setdefault("default-runtime", config["default-runtime"])
    features = config.get("features")
    if opts.enable_cdi and "features.cdi" not in record:
        has = isinstance(features, dict) and "cdi" in features
        record["features.cdi"] = {"before": features["cdi"]} if has else {}
    return record


def _object(config: dict, key: str) -> dict:
    """``config[key]``, a new object when there is none (:func:`read_config` refused any other value)."""
    value = config.get(key)
    if value is None:
        value = config[key] = {}
    return value


def _ordered(entry: dict, first) -> dict:
    out = dict((k, entry[k]) for k in first if k in entry)
    out.update((k, v) for k, v in entry.items() if k not in out)
    return out


def _new_text(text, current: dict, wanted: dict, opts: DockerOptions, record: dict):
    """daemon.json's new text: None (no file) when the runtime is removed from a file the module created that holds nothing else."""
    if opts.state == "absent" and not wanted and record.get("created") is True:
        return None
    indent, trailing = json_layout(text)
    return render_json(wanted, indent, trailing, original=text)


def runtime_record(current: dict, state: dict, path: str, name: str) -> dict:
    """The record of ``path``'s runtime ``name``: the state file's, an old in-file one merged over it."""
    record = dict(state.get(path, {}).get(name) or {})
    record.update(state_record(current, name))
    return record


def plan_docker(path: str, text, opts: DockerOptions, state=None, state_path: str = STATE_FILE) -> Plan:
    """Plan the edit of daemon.json (``text`` is ``None`` when the file is missing) and of the state file
    (``state``: its text, ``None`` when missing), when there is one before or after.

    The record is written before the change it describes and taken out after that change is undone:
    ``state=present`` writes the state file first, ``state=absent`` daemon.json first. A run killed
    between the two writes leaves at most a record of a change not (or no longer) in daemon.json, which
    the next run makes again or takes out, never a changed daemon.json without its record."""
    current = read_config(text, path)
    records = read_state(state, state_path)
    before = runtime_record(current, records, path, opts.runtime_name)
    wanted = desired_config(current, opts, before)
    record = None
    if opts.state == "present":
        record = _record(before, current, opts, created=text is None)
        record = _note_undo(path, text, current, wanted, opts, before, record)
    kept = _state_change(state_path, state, records, _with_record(records, path, opts.runtime_name, record))
    facts = {"runtime_table": "runtimes.%s" % opts.runtime_name, "state_file": state_path, "modes": {state_path: STATE_MODE}}
    if same(wanted, current) and list(wanted) == list(current):
        files = _in_order(FileChange(path, text, text), kept, opts)
        status = "already configured" if opts.state == "present" else "not configured"
        return Plan(files, msg="the %s runtime is %s" % (opts.runtime_name, status), **facts)
    after = _new_text(text, current, wanted, opts, before)
    if opts.state == "absent":
        exact = apply_undo(after, before.get(UNDO_KEY))
        after = exact if exact is not None else after
    change = FileChange(path, text, after)
    files = _in_order(change, kept, opts)
    verb = "configured" if opts.state == "present" else "removed"
    return Plan(files, msg="%s the %s runtime (%s %s)" % (verb, opts.runtime_name, change.action, path), **facts)


def _state_change(state_path, state, records: dict, new_records: dict) -> list:
    """The state file's change, ``[]`` when there is no file before or after."""
    after = state if new_records == records else state_text(new_records)
    return [FileChange(state_path, state, after)] if state is not None or after is not None else []


def _in_order(change, kept: list, opts: DockerOptions) -> list:
    """daemon.json's ``change`` and the state file's (``kept``), the record written before the change it
    describes (``state=present``) and taken out after it is undone (``state=absent``)."""
    return kept + [change] if opts.state == "present" else [change] + kept


def _absent_text(path, text, opts: DockerOptions, record: dict):
    """daemon.json's ``text`` as ``state=absent`` leaves it by settings, given the runtime's ``record``
    (before the byte-exact undo)."""
    gone = dataclasses.replace(opts, state="absent")
    current = read_config(text, path)
    return _new_text(text, current, _without_runtime(copy.deepcopy(current), gone, record), gone, record)


def _settings(text):
    """daemon.json's settings, empty objects left out (``undo.undo_note``'s ``data``)."""
    return without_empty(json.loads(text)) if text.strip() else {}


def _note_undo(path, text, current: dict, wanted: dict, opts: DockerOptions, before: dict, record: dict) -> dict:
    """``record`` with the note that gives the user's file back byte for byte once the module's keys are
    out of ``wanted`` (``undo.undo_note``); a note made for another text is kept as it is."""
    origin = recover_origin(text, _absent_text(path, text, opts, before) if before else None, before.get(UNDO_KEY))
    if origin is None:
        return record
    record = dict(record)
    record.pop(UNDO_KEY, None)
    note = undo_note(_absent_text(path, _new_text(text, current, wanted, opts, record), opts, record), origin, _settings)
    if note is not None:
        record[UNDO_KEY] = note
    return record
