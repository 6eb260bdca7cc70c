# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A containerd plan checked by the installed containerd before anything is written (``runtime.config``'s second step).

:func:`validate_plan` writes the planned files to a work folder and asks ``containerd config dump``
what it makes of them: the handler, runc and the default runtime must be where the module put them,
and nothing else of the effective configuration may move (:func:`effective_changes`).
"""

from __future__ import annotations

import os
import shutil
import tempfile

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit import parse_toml, toml_data
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.managed import get_path, unwrap


def _candidate_imports(doc, context, tmp_dropin, main_dir):
    """The main file's imports, pointed at the candidate drop-in (and absolute)."""
    imports = unwrap(doc.get("imports")) or []
    out = []
    for entry in imports:
        if entry == context.get("import_glob"):
            # The glob's files in containerd's (sorted) order, the drop-in in its place.
            matched = sorted(set(context.get("others") or []) | {context["dropin_path"]})
            out.extend(
                (tmp_dropin if p == context["dropin_path"] else p)
                for p in matched
                if p != context["dropin_path"] or tmp_dropin
            )
        elif entry == context.get("dropin_path"):
            if tmp_dropin:
                out.append(tmp_dropin)
        else:
            out.append(entry if os.path.isabs(entry) else os.path.join(main_dir, entry))
    return out


def validate_plan(plan, params: dict, context: dict, host) -> dict:
    """Check the planned containerd configuration with ``containerd config dump``.

    The candidate files are written to a temporary directory (the drop-in import pointed
    at the candidate drop-in); a configuration containerd refuses, or one in which the
    handler or the default runtime is missing after containerd merged it, raises.
    """
    reason = _why_not_validated(plan, params, context)
    if reason:
        return {"ran": False, "reason": reason}
    binary = context["containerd_binary"]
    workdir = tempfile.mkdtemp(prefix="gpufleet-ctd-", dir=host.tmpdir)
    try:
        rc, out, err = host.run([binary, "--config", _write_candidate(plan, context, workdir), "config", "dump"])
        before = host.run([binary, "--config", _write_current(plan, context, workdir), "config", "dump"])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report = {
        "ran": True,
        "binary": binary,
        "version": context.get("containerd_version"),
        "command": "%s --config <candidate> config dump" % binary,
    }
    _check_dump(rc, out, err, params, context, report)
    _check_effective(before, out, params, context, report)
    return report


def _write_main(text, context, workdir, name, imports) -> str:
    """The main file's ``text`` written into ``workdir`` as ``name``, its ``imports`` what ``imports(doc)`` says
    (absolute: containerd reads the imported files where they are); its path."""
    doc = parse_toml(text or "", context["main_path"])
    if "imports" in doc:
        doc["imports"] = imports(doc)
    path = os.path.join(workdir, name)
    with open(path, "w") as handle:
        handle.write(doc.as_string())
    return path


def _write_current(plan, context, workdir) -> str:
    """The main file as it is now in ``workdir``; its path."""
    main_dir = os.path.dirname(context["main_path"])
    change = plan.file(context["main_path"])
    return _write_main(change.before if change else None, context, workdir, "current.toml",
                       lambda doc: [e if os.path.isabs(e) else os.path.join(main_dir, e) for e in unwrap(doc["imports"]) or []])


#: Go's zero values: containerd decodes a missing key as its zero value, so the two mean the same.
_ZERO = ("", 0, False, [], {})


def _flat(tree, prefix=()) -> dict:
    """``{key path: value}`` of the leaves of a plain ``tree`` that containerd reads as set (a zero value
    is the same as no key; an empty runtime ``sandbox_mode`` is ``podsandbox``, which containerd 1.7's CRI
    plugin fills in when it checks its configuration, after ``config dump`` printed it)."""
    leaves = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            leaves.update(_flat(value, prefix + (key,)))
        elif key == "sandbox_mode" and value == "podsandbox" and prefix[-2:-1] == ("runtimes",):
            continue
        elif not any(value == zero and type(value) is type(zero) for zero in _ZERO):
            leaves[prefix + (key,)] = value
    return leaves


def _handler_keys(params, cri) -> list:
    """The key paths of a ``config dump`` that the module may change: the handler, and what its options ask."""
    name = params.get("runtime_name") or "nvidia"
    allowed = [("imports",), ("version",), ("plugins", cri, "containerd", "runtimes", name)]
    absent = (params.get("state") or "present") == "absent"
    if params.get("set_as_default") or absent:
        allowed.append(("plugins", cri, "containerd", "default_runtime_name"))
    if params.get("enable_cdi") is not None or absent:
        allowed += [("plugins", cri, "enable_cdi"), ("plugins", cri, "cdi_spec_dirs")]
    if params.get("enable_cri") or absent:
        allowed.append(("disabled_plugins",))
    return allowed


def effective_changes(before_text, after_text, params) -> list:
    """The settings of containerd's merged view (``config dump``) that change outside the module's keys,
    as ``key: before -> after``."""
    before, after = _flat(toml_data(before_text)), _flat(toml_data(after_text))
    cri = {2: "io.containerd.grpc.v1.cri"}.get(toml_data(after_text).get("version"), "io.containerd.cri.v1.runtime")
    allowed = _handler_keys(params, cri)
    changed = []
    for key in sorted(set(before) | set(after), key=lambda k: tuple(str(p) for p in k)):
        if before.get(key) == after.get(key) or any(key[:len(a)] == a for a in allowed):
            continue
        changed.append("%s: %s -> %s" % (".".join(str(p) for p in key), _shown(key, before), _shown(key, after)))
    return changed


def _shown(key, leaves):
    return repr(leaves[key]) if key in leaves else "(unset)"


def _check_effective(before, after_text, params, context, report) -> None:
    """Refuse a candidate whose merged view changes a setting outside the handler (the dumps of now and after)."""
    rc, out, err = before
    report["compared"] = rc == 0
    if rc != 0:
        report["not_compared"] = "containerd does not load the current configuration: %s" % (err or out).strip()[-500:]
        return
    changes = effective_changes(out, after_text, params)
    if changes:
        raise GpuFleetError(
            "containerd %s: the new configuration would change settings outside the %s runtime, as containerd "
            "config dump prints them (%s); nothing was written (expected only the handler's keys to change)"
            % (context.get("containerd_version") or report["binary"], params.get("runtime_name") or "nvidia",
               "; ".join(changes[:20]) + ("; and %d more" % (len(changes) - 20) if len(changes) > 20 else "")),
            validation=dict(report, changes=changes), changes=changes)


def _why_not_validated(plan, params, context):
    """Why the plan is not checked with containerd (None: it is)."""
    runtime = context["runtime"]
    if runtime not in ("containerd", "k3s", "rke2"):
        return "only containerd configurations are checked"
    if not params.get("validate", True):
        return "validate=false"
    if not context.get("containerd_binary"):
        return "no containerd binary found on the host"
    main_text = _planned_text(plan, context["main_path"])
    if runtime in ("k3s", "rke2") and main_text and "{{" in main_text:
        return "%s is a Go template; %s renders it only when it starts" % (context["main_path"], runtime)
    return None


def _planned_text(plan, path):
    """The text ``plan`` gives the file ``path`` (None: no such file, or none planned)."""
    change = plan.file(path) if path else None
    return change.after if change is not None else None


def _write_candidate(plan, context, workdir) -> str:
    """Write the planned files into ``workdir``, the main file importing the candidate drop-in; its path."""
    dropin_text = _planned_text(plan, context.get("dropin_path"))
    tmp_dropin = None
    if dropin_text is not None:
        tmp_dropin = os.path.join(workdir, "99-nvidia.toml")
        with open(tmp_dropin, "w") as handle:
            handle.write(dropin_text)
    main_dir = os.path.dirname(context["main_path"])
    return _write_main(_planned_text(plan, context["main_path"]), context, workdir, "config.toml",
                       lambda doc: _candidate_imports(doc, context, tmp_dropin, main_dir))


def _check_dump(rc, out, err, params, context, report) -> None:
    """Raise when containerd refused the candidate, or its merged view has no usable runtime."""
    who = context.get("containerd_version") or report["binary"]
    if rc != 0:
        raise GpuFleetError(
            "containerd %s refused the new configuration, nothing was written: %s" % (who, (err or out).strip()),
            validation=dict(report, rc=rc, stderr=err),
        )
    problems = dump_problems(out, params.get("runtime_name") or "nvidia", params.get("state") or "present")
    if problems:
        raise GpuFleetError(
            "containerd %s would not have a usable runtime with the new configuration (%s); "
            "nothing was written" % (who, "; ".join(problems)),
            validation=report,
        )


def dump_problems(dump_text: str, name: str, state: str) -> list:
    """What is wrong with the runtimes in a ``containerd config dump`` output."""
    try:
        dump = toml_data(dump_text)
    except Exception:  # pragma: no cover - containerd printed something else
        return []
    version = dump.get("version", 1)
    try:
        key = {1: "cri", 2: "io.containerd.grpc.v1.cri"}.get(int(version), "io.containerd.cri.v1.runtime")
    except (TypeError, ValueError):
        return []
    disabled = dump.get("disabled_plugins") or []
    cri_off = key in disabled or (
        key != "io.containerd.cri.v1.runtime" and ("cri" in disabled or "io.containerd.grpc.v1.cri" in disabled)
    )
    if cri_off:
        return []  # CRI switched off: containerd does not load its runtimes (warned already)
    containerd = get_path(dump, ("plugins", key, "containerd"), {}) or {}
    runtimes = containerd.get("runtimes") or {}
    default = containerd.get("default_runtime_name") or "runc"
    problems = []
    if state == "present" and name not in runtimes:
        problems.append("no runtime %r under plugins.%s.containerd.runtimes" % (name, key))
    if default not in runtimes:
        problems.append(
            "default_runtime_name = %r is not among the runtimes (%s)" % (default, ", ".join(sorted(runtimes)) or "none")
        )
    return problems
