# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container_runtime module's flow: read the host's files, plan, check, write.

:func:`configure` reads the files of the runtime asked for through a host object
(``common.host.Host`` over an ``AnsibleModule``, or a fake in the tests), has the runtime's
editor (``runtime.containerd``, ``runtime.crio``, ``runtime.docker``) plan the change,
checks a containerd configuration with ``containerd config dump``, and writes. What the
editors share is ``runtime.edit``.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import shutil
import stat
import tempfile

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs, io as safe_io
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import containerd as ctd
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import crio, docker
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit import (
    OWNER_MARK,
    FileChange,
    Plan,
    get_path,
    parse_toml,
    plain,
    read_text,
    require_tomlkit,
    toml_data,
)

# --------------------------------------------------------------------------------------
# The module's flow: read the host, plan, check with containerd, write
# --------------------------------------------------------------------------------------

RUNTIMES = ("containerd", "crio", "docker", "k3s", "rke2")

#: The options of ``gpufleet.nvidia.container_runtime``, and the suboptions of
#: ``gpufleet.nvidia.toolkit_packages``' ``runtime`` (both run :func:`configure` with them).
ARGUMENT_SPEC = dict(
    runtime=dict(type="str", required=True, choices=list(RUNTIMES)),
    state=dict(type="str", default="present", choices=["present", "absent"]),
    config_mode=dict(type="str", choices=["dropin", "inplace"]),
    config_path=dict(type="path"),
    dropin_path=dict(type="path"),
    runtime_name=dict(type="str", default="nvidia"),
    binary_name=dict(type="path"),
    set_as_default=dict(type="bool", default=False),
    enable_cdi=dict(type="bool", default=False),
    enable_cri=dict(type="bool", default=False),
    config_version=dict(type="int", choices=[2, 3]),
    containerd_binary=dict(type="path"),
    validate=dict(type="bool", default=True),
    backup=dict(type="bool", default=False),
)

#: The options of ``gpufleet.nvidia.container_runtime`` itself: ARGUMENT_SPEC, and ``state=restored``
#: (:func:`restore`) with what it puts back.
MODULE_ARGUMENT_SPEC = dict(
    ARGUMENT_SPEC,
    state=dict(type="str", default="present", choices=["present", "absent", "restored"]),
    restore_backups=dict(type="dict"),
    restore_created=dict(type="list", elements="path"),
)
MODULE_REQUIRED_IF = [("state", "restored", ("restore_backups", "restore_created"), True)]

#: containerd bundled with k3s / RKE2 (used to check a template without Go actions).
BUNDLED_CONTAINERD = {
    "k3s": ("/var/lib/rancher/k3s/data/current/bin/containerd",),
    "rke2": ("/var/lib/rancher/rke2/bin/containerd", "/var/lib/rancher/rke2/data/current/bin/containerd"),
}

_VERSION_RE = re.compile(r"(?:^|\s)v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_containerd_version(text):
    """``"1.7.24"`` from ``containerd --version`` output (``None`` when not found).

    Handles Debian's (``containerd github.com/containerd/containerd 1.6.20~ds1 ...``),
    containerd 2's (``.../containerd/v2 2.1.9+unknown``) and Docker's containerd.io
    (``containerd containerd.io 1.7.27 <commit>``).
    """
    for line in (text or "").splitlines():
        m = _VERSION_RE.search(line)
        if m:
            return "%s.%s.%s" % (m.group(1), m.group(2), m.group(3) or "0")
    return None


def _which(host, name):
    """The host path of the executable ``name``, found as the module finds it.

    ``get_bin_path`` looks in PATH and the sbin folders; ``Host.which`` also looks in folders
    where k3s, RKE2 and the GPU operator keep their own binaries, which must not decide the
    containerd whose version the configuration is written for. A host without a module (a
    test's) answers itself.
    """
    module = getattr(host, "module", None)
    return module.get_bin_path(name) if module is not None else host.which(name)


def _containerd_binary(params, host):
    """``(path, version)`` of the containerd binary to use (``(None, None)``: none)."""
    wanted = params.get("containerd_binary")
    runtime = params["runtime"]
    if wanted:
        if not host.exists(wanted):
            raise GpuFleetError(
                "containerd_binary %s does not exist" % wanted, containerd_binary=wanted
            )
        path = wanted
    elif runtime in BUNDLED_CONTAINERD:
        path = next((p for p in BUNDLED_CONTAINERD[runtime] if host.exists(p)), None)
    else:
        path = _which(host, "containerd")
    if not path:
        return None, None
    rc, out, err = host.run([path, "--version"])
    version = parse_containerd_version(out) if rc == 0 else None
    return path, version


def _mode(params, default: str, allowed) -> str:
    mode = params.get("config_mode") or default
    if mode not in allowed:
        raise GpuFleetError(
            "config_mode=%s is not supported for runtime=%s (expected %s)"
            % (mode, params["runtime"], " or ".join(allowed))
        )
    return mode


#: The options that are paths on the host: absolute, checked before anything is read.
PATH_OPTIONS = ("config_path", "dropin_path", "binary_name", "containerd_binary")


def check_params(params: dict) -> None:
    """Refuse a relative (or otherwise unusable) path option, before anything is read, in check mode too."""
    inputs.check("container_runtime", {option: inputs.absolute_path for option in PATH_OPTIONS}, params)


def build_plan(params: dict, host):
    """Read the host's files and plan the change; returns ``(plan, context)``."""
    runtime = params["runtime"]
    if runtime not in RUNTIMES:
        raise GpuFleetError("runtime %r is not one of %s" % (runtime, ", ".join(RUNTIMES)))
    check_params(params)
    common = dict(
        state=params.get("state") or "present",
        runtime_name=params.get("runtime_name") or "nvidia",
        set_as_default=params.get("set_as_default"),
    )
    context = {"runtime": runtime}
    plan = _PLANNERS[runtime](params, host, common, context)
    _keep_foreign_dropin(plan, host, context.get("dropin_path"))
    _take_away_partials(plan, host)
    return plan, context


def _foreign(host, path, text):
    """Why the file at ``path`` is not the module's (None: it is): the module writes regular files that
    start with its mark."""
    if text is None:
        return None
    if hasattr(host, "islink") and host.islink(path):
        return "is a symbolic link"
    if OWNER_MARK not in text:
        return "has no %r line" % OWNER_MARK
    return None


def _keep_foreign_dropin(plan, host, path) -> None:
    """A drop-in at ``path`` that the module did not write is never overwritten (a refusal, before
    anything is written) nor deleted (left as it is, with a warning): its settings are the site's."""
    change = plan.file(path) if path else None
    why = _foreign(host, path, change.before) if change is not None and change.changed else None
    if why is None:
        return
    if change.after is not None:
        raise GpuFleetError(
            "%s was not written by gpufleet.nvidia (it %s): the module does not overwrite a file it does not own; "
            "nothing was written (expected no file there: move its settings into the main file or another "
            "drop-in, or set dropin_path to another file)" % (path, why), path=path)
    change.after = change.before
    plan.warnings.append("%s was not written by gpufleet.nvidia (it %s): left as it is, its settings still apply" % (path, why))


def _take_away_partials(plan, host) -> None:
    """Plan the removal of the partial files that writes of the plan's files killed mid-way left: CRI-O
    reads every file of ``crio.conf.d``, dotfiles included, and does not start on one; a run that
    changes nothing else takes them away too."""
    planned = {f.path for f in plan.files}
    for change in list(plan.files):
        for folder, pattern in safe_io.partial_patterns(change.path):
            for path in host.glob(posixpath.join(folder, pattern)):
                if path in planned:
                    continue
                planned.add(path)
                try:
                    text = read_text(host, path) or ""
                except GpuFleetError:
                    text = "(not UTF-8 text)\n"
                plan.files.append(FileChange(path, text, None))
                plan.warnings.append("%s is the partial file of a write of %s killed mid-way: removed" % (path, change.path))


def _plan_docker(params, host, common, context):
    _mode(params, "inplace", ("inplace",))
    path = params.get("config_path") or docker.DEFAULT_CONFIG
    opts = docker.DockerOptions(
        binary_name=params.get("binary_name") or docker.DEFAULT_BINARY,
        enable_cdi=params.get("enable_cdi"),
        **common
    )
    state_path = docker.STATE_FILE
    return docker.plan_docker(path, read_text(host, path), opts, read_text(host, state_path), state_path)


def _plan_crio(params, host, common, context):
    require_tomlkit()
    mode = _mode(params, "dropin", ("dropin", "inplace"))
    main_path = params.get("config_path") or crio.DEFAULT_CONFIG
    dropin_path = params.get("dropin_path") or crio.DEFAULT_DROPIN
    others = [
        (p, read_text(host, p))
        for p in _crio_dropins(host, os.path.dirname(dropin_path))
        if p != dropin_path and not p.endswith(safe_io.PARTIAL_SUFFIX)
    ]
    context.update(dropin_path=dropin_path)
    opts = crio.CrioOptions(
        mode=mode,
        binary_name=params.get("binary_name") or crio.DEFAULT_BINARY,
        dropin_path=dropin_path,
        **common
    )
    return crio.plan_crio(main_path, read_text(host, main_path), read_text(host, dropin_path), others, opts)


def _crio_dropins(host, folder) -> list:
    """Every file CRI-O reads from its drop-in ``folder``, in its order (``filepath.Walk``: names sorted,
    dotfiles included, a sub-folder's files in its place; a link to a folder is not followed)."""
    if not hasattr(host, "names"):  # a host that lists its files by pattern (a test's)
        return sorted(host.glob(posixpath.join(folder, "*")), key=crio.read_order)
    found = []
    for name in host.names(folder):
        path = posixpath.join(folder, name)
        if host.isdir(path) and not host.islink(path):
            found.extend(_crio_dropins(host, path))
        elif host.isfile(path):
            found.append(path)
    return found


def _containerd_options(params, host, common, context) -> dict:
    """The options of both containerd editors; the binary found and its version go into ``context``."""
    require_tomlkit()
    binary, version = (None, None)
    if params.get("validate", True) or params["runtime"] == "containerd":
        binary, version = _containerd_binary(params, host)
    context.update(containerd_binary=binary, containerd_version=version)
    return dict(
        binary_name=params.get("binary_name") or ctd.DEFAULT_BINARY,
        enable_cdi=params.get("enable_cdi"),
        enable_cri=params.get("enable_cri"),
        config_version=params.get("config_version"),
        containerd_version=version,
        **common
    )


def _containerd_paths(params) -> tuple:
    """``(main file, drop-in, the drop-in's import glob)``; the drop-in is beside the main file
    (in its ``conf.d``) unless ``dropin_path`` says where."""
    main_path = params.get("config_path") or ctd.DEFAULT_CONFIG
    default_dropin = os.path.join(os.path.dirname(main_path), "conf.d", os.path.basename(ctd.DEFAULT_DROPIN))
    dropin_path = params.get("dropin_path") or default_dropin
    return main_path, dropin_path, os.path.join(os.path.dirname(dropin_path), "*.toml")


def _plan_containerd(params, host, common, context):
    options = _containerd_options(params, host, common, context)
    mode = _mode(params, "dropin", ("dropin", "inplace"))
    main_path, dropin_path, import_glob = _containerd_paths(params)
    main_text = read_text(host, main_path)
    entries = _import_entries(main_text, main_path, import_glob if mode == "dropin" else None)
    order, texts = _imported_files(host, entries, dropin_path)
    others = [p for p in _glob_all(host, import_glob) if p != dropin_path]
    opts = ctd.ContainerdOptions(
        mode=mode, dropin_path=dropin_path, import_glob=import_glob, other_dropins=others, import_order=order, **options
    )
    context.update(main_path=main_path, dropin_path=dropin_path, import_glob=import_glob, others=others)
    return ctd.plan_containerd(main_path, main_text, read_text(host, dropin_path), opts, texts)


# --------------------------------------------------------------------------------------
# The files containerd imports, found by its own rules
# --------------------------------------------------------------------------------------


#: The most files the module follows through ``imports`` (links can make a chain of them endless).
MAX_IMPORTS = 256


def _import_entries(main_text, main_path, import_glob) -> list:
    """The main file's ``imports`` (made absolute against its folder, as containerd does), then
    ``import_glob`` when the drop-in mode adds it."""
    doc = parse_toml(main_text or "", main_path)
    entries = plain(doc.get("imports")) or []
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return []  # refused by the editor, which names the key
    entries = [posixpath.normpath(posixpath.join(posixpath.dirname(main_path), e)) for e in entries]
    if import_glob and import_glob not in entries:
        entries.append(import_glob)
    return entries


def _go_pattern(name) -> str:
    """A Go ``filepath.Match`` pattern as ``fnmatch`` reads it (``[^a]`` is ``[!a]``)."""
    return name.replace("[^", "[!")


def _glob_all(host, pattern) -> list:
    """What Go's ``filepath.Glob`` (containerd's) matches, sorted: dotfiles, folders, FIFOs and links included."""
    folder, name = posixpath.split(pattern)
    if any(ch in folder for ch in "*?["):
        raise GpuFleetError(
            "imports entry %r has a pattern in a folder name; the module follows patterns in the last part "
            "only, nothing was written" % pattern, path=pattern)
    if hasattr(host, "names"):
        names = host.names(folder)
    else:  # a host that lists regular files only
        names = [posixpath.basename(p) for p in host.glob(pattern)]
    return sorted(posixpath.join(folder, n) for n in names if fnmatch.fnmatchcase(n, _go_pattern(name)))


def _matches(host, entry, dropin_path) -> list:
    """The files one ``imports`` entry makes containerd load (a glob only with ``*``, as containerd)."""
    if "*" not in entry:
        return [entry]
    found = _glob_all(host, entry)
    if fnmatch.fnmatchcase(posixpath.basename(dropin_path), _go_pattern(posixpath.basename(entry))) and (
        posixpath.dirname(dropin_path) == posixpath.dirname(entry)
    ):
        found = sorted(set(found) | {dropin_path})
    return found


def _imported_files(host, entries, dropin_path) -> tuple:
    """``(order, [(path, text)])``: every file containerd merges after the main file, in its
    order (each once: the main file's imports, then theirs, as containerd's queue takes them),
    and the texts of those other than the drop-in; a file it could not load stops the module
    here, before anything is written."""
    found = {}
    texts = []
    pending = [(path, entry) for entry in entries for path in _matches(host, entry, dropin_path)]
    while pending:
        path, entry = pending.pop(0)
        if path in found:
            continue
        if len(found) >= MAX_IMPORTS:
            raise GpuFleetError("containerd would import more than %d files (imports entry %r leads to %s); nothing "
                                "was written" % (MAX_IMPORTS, entry, path), path=path)
        found[path] = entry
        if path == dropin_path:
            continue
        text = _imported_text(host, path, entry)
        texts.append((path, text))
        pending.extend((p, e) for e in _import_entries(text, path, None) for p in _matches(host, e, dropin_path))
    return list(found), texts


def _imported_text(host, path, entry):
    """The text of a file containerd imports, or a refusal naming it (a folder, a FIFO, unreadable, missing)."""
    try:
        text = read_text(host, path)
    except GpuFleetError as exc:
        why = exc.msg
    else:
        if text is not None:
            return text
        why = "%s does not exist" % path
    raise GpuFleetError(
        "containerd imports %s (imports entry %r) and could not load it, so it would not start: %s; "
        "nothing was written" % (path, entry, why), path=path)


def _plan_k3s(params, host, common, context):
    """k3s and RKE2: their containerd template (in place only)."""
    runtime = params["runtime"]
    options = _containerd_options(params, host, common, context)
    _mode(params, "inplace", ("inplace",))
    template, generated, generated_text = _k3s_files(params, host)
    opts = ctd.ContainerdOptions(mode="inplace", **options)
    context.update(main_path=template, generated_path=generated)
    return ctd.plan_k3s(
        runtime, template, read_text(host, template), generated, generated_text, opts, autodetected=_autodetected(host)
    )


def _k3s_files(params, host) -> tuple:
    """``(template, generated config.toml, its text)``: config_path, else the template k3s reads.

    That is the one that exists (config-v3.toml.tmpl first), else the one for the version of
    the generated file.
    """
    if params.get("config_path"):
        template = params["config_path"]
        generated = os.path.join(os.path.dirname(template), "config.toml")
        return template, generated, read_text(host, generated)
    template, generated = ctd.k3s_paths(params["runtime"])
    generated_text = read_text(host, generated)
    base = os.path.dirname(template)
    existing = [p for p in (base + "/config-v3.toml.tmpl", base + "/config.toml.tmpl") if host.exists(p)]
    template, generated = ctd.k3s_paths(params["runtime"], _generated_version(generated_text), existing)
    return template, generated, generated_text


def _generated_version(text):
    m = re.search(r"^version\s*=\s*(\d+)", text or "", re.M)
    return int(m.group(1)) if m else None


def _autodetected(host):
    """The NVIDIA runtime that k3s and RKE2 find (and add) by themselves, or None."""
    candidates = (os.path.join(directory, "nvidia-container-runtime") for directory in ctd.K3S_AUTODETECT_DIRS)
    return next((path for path in candidates if host.exists(path)), None)


#: The planner of each runtime: ``(params, host, common options, context) -> Plan``.
_PLANNERS = {
    "containerd": _plan_containerd,
    "crio": _plan_crio,
    "docker": _plan_docker,
    "k3s": _plan_k3s,
    "rke2": _plan_k3s,
}


def _candidate_imports(doc, context, tmp_dropin, main_dir):
    """The main file's imports, pointed at the candidate drop-in (and absolute)."""
    imports = plain(doc.get("imports")) or []
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


def _write_current(plan, context, workdir) -> str:
    """The main file as it is now, its imports made absolute, in ``workdir``; its path (containerd reads the
    imported files where they are)."""
    text = plan.file(context["main_path"]).before if plan.file(context["main_path"]) else None
    doc = parse_toml(text or "", context["main_path"])
    main_dir = os.path.dirname(context["main_path"])
    if "imports" in doc:
        doc["imports"] = [e if os.path.isabs(e) else os.path.join(main_dir, e) for e in plain(doc["imports"]) or []]
    path = os.path.join(workdir, "current.toml")
    with open(path, "w") as handle:
        handle.write(doc.as_string())
    return path


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
    doc = parse_toml(_planned_text(plan, context["main_path"]) or "", context["main_path"])
    if "imports" in doc:
        doc["imports"] = _candidate_imports(doc, context, tmp_dropin, os.path.dirname(context["main_path"]))
    tmp_main = os.path.join(workdir, "config.toml")
    with open(tmp_main, "w") as handle:
        handle.write(doc.as_string())
    return tmp_main


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


def _apply_change(change, host, backup, mode=None):
    if change.after is None:
        return host.remove(change.path, backup=backup)
    if mode is not None:
        return host.write(change.path, change.after, backup=backup, mode=mode)
    return host.write(change.path, change.after, backup=backup)


def _put_back(done, host) -> list:
    """Give the files of ``done`` (changes written) their text from before, last first; what could not be."""
    failed = []
    for change in reversed(done):
        try:
            if change.before is None:
                host.remove(change.path)
            else:
                host.write(change.path, change.before)
        except Exception as exc:  # noqa: BLE001 - say which file is left as it is
            failed.append("%s (%s)" % (change.path, exc))
    return failed


def _write_failed(change, exc, done, failed) -> GpuFleetError:
    why = exc.msg if isinstance(exc, GpuFleetError) else "%s: %s" % (type(exc).__name__, exc)
    msg = "could not %s %s: %s" % ("remove" if change.after is None else "write", change.path, why)
    if done:
        msg += "; %s put back as %s" % (", ".join(c.path for c in done), "they were" if not failed else "far as it went")
    if failed:
        msg += "; NOT put back: %s" % ", ".join(failed)
    return GpuFleetError(msg, path=change.path)


def _unwritable(host, path):
    """Why ``path`` could not be written on ``host`` (None: it can, as far as one can tell beforehand)."""
    local = host.local(path)
    if os.path.isdir(local):
        return "%s is a folder" % path
    folder = posixpath.dirname(path)
    while not os.path.lexists(host.local(folder)) and folder != posixpath.dirname(folder):
        folder = posixpath.dirname(folder)
    if not os.path.isdir(host.local(folder)):
        return "%s is not a folder" % folder
    if not os.access(host.local(folder), os.W_OK | os.X_OK):
        return "%s cannot be written" % folder
    return None


def check_writable(plan, host) -> None:
    """Refuse before the first write when a planned file cannot be written (a folder in its place, a
    file where its folder should be, a folder without write access): several files change together."""
    if not hasattr(host, "local"):
        return  # a host without local paths (a test's) checks nothing beforehand
    for change in plan.files:
        why = _unwritable(host, change.path) if change.changed and change.after is not None else None
        if why:
            raise GpuFleetError("could not write %s: %s; nothing was written" % (change.path, why), path=change.path)


def apply_plan(plan, host, backup: bool = False, modes=None) -> dict:
    """Write the planned files in order; returns ``{path: backup path}``.

    The files change together or not at all: when one cannot be written, those written before
    it get their text back, and one GpuFleetError says what happened. ``modes``: the mode of a
    file that is created, by path (default the writer's 0644; an existing file keeps its own).
    """
    backups = {}
    done = []
    for change in plan.files:
        if not change.changed:
            continue
        try:
            saved = _apply_change(change, host, backup, (modes or {}).get(change.path))
        except Exception as exc:  # noqa: BLE001 - a module's fail_json in tests, an OSError, ...
            raise _write_failed(change, exc, done, _put_back(done, host))
        done.append(change)
        if saved:
            backups[change.path] = saved
    return backups


def configure(params: dict, host, check_mode: bool = False, diff: bool = False) -> dict:
    """The whole module: plan, validate, write (unless check mode); the module's result."""
    plan, context = build_plan(params, host)
    validation = validate_plan(plan, params, context, host) if plan.changed else {
        "ran": False,
        "reason": "nothing to change",
    }
    backups = {}
    if plan.changed and not check_mode:
        check_writable(plan, host)
        backups = apply_plan(plan, host, backup=bool(params.get("backup")), modes=plan.facts.get("modes"))
    result = {
        "changed": plan.changed,
        "msg": plan.msg,
        "changed_files": plan.changed_files,
        "files": [{"path": f.path, "action": f.action or "unchanged"} for f in plan.files],
        "config_version": plan.facts.get("config_version"),
        "plugin_table": plan.facts.get("plugin_table"),
        "runtime_table": plan.facts.get("runtime_table"),
        "restart_needed": any(f.changed for f in plan.files if f.path != plan.facts.get("state_file")),
        "validation": validation,
        "backup_files": backups,
        "containerd_version": context.get("containerd_version"),
        "warnings": plan.warnings,
    }
    if diff:
        result["diff"] = plan.diff
    return result


# --------------------------------------------------------------------------------------
# state=restored: put back the backups of a change, remove the files it created
# --------------------------------------------------------------------------------------


def _restored_change(host, path, backup) -> tuple:
    """``(change, mode)``: ``path`` given the text of its ``backup`` (a file of the host), and the
    backup's mode for a file that is gone (an existing one keeps its own mode and owner)."""
    for option, value in (("restore_backups", path), ("restore_backups[%s]" % path, backup)):
        inputs.checked(option, inputs.absolute_path, value)
    if not host.isfile(backup):
        raise GpuFleetError(
            "restore_backups: the backup %s of %s is not a file on the host; nothing was restored" % (backup, path),
            path=path, backup=backup,
        )
    text = read_text(host, backup)
    mode = stat.S_IMODE(os.stat(host.local(backup)).st_mode)
    return FileChange(path, read_text(host, path), text), mode


def restore_plan(params: dict, host) -> tuple:
    """``(plan, modes)``: each file of ``restore_backups`` (path -> backup) back to its backup, each
    of ``restore_created`` removed; checked (paths absolute, backups there) before anything is read."""
    backups = params.get("restore_backups") or {}
    created = [p for p in params.get("restore_created") or [] if p not in backups]
    for path in created:
        inputs.checked("restore_created", inputs.absolute_path, path)
    restored = [_restored_change(host, path, backups[path]) for path in sorted(backups)]
    changes = [change for change, unused in restored] + [FileChange(path, read_text(host, path), None) for path in created]
    return Plan(changes, msg=_restore_message(changes)), dict((change.path, mode) for change, mode in restored)


def _restore_message(changes) -> str:
    put = [c.path for c in changes if c.changed and c.after is not None]
    gone = [c.path for c in changes if c.changed and c.after is None]
    parts = (["put back %s from the backups" % ", ".join(put)] if put else []) + (["removed %s (created)" % ", ".join(gone)] if gone else [])
    return "; ".join(parts) or "the files are as their backups, and the created ones are gone"


def restore(params: dict, host, check_mode: bool = False, diff: bool = False) -> dict:
    """``state=restored``: the module's result once the backups are back and the created files gone.

    Written through the host adapter (``common.io``): a configuration reached through a symbolic link
    is written where the link points (the link stays), keeping its mode and owner; a file that is gone
    comes back with its backup's mode. All files change together or not at all (``apply_plan``).
    """
    plan, modes = restore_plan(params, host)
    if plan.changed and not check_mode:
        check_writable(plan, host)
        apply_plan(plan, host, modes=modes)
    result = {
        "changed": plan.changed,
        "msg": plan.msg,
        "changed_files": plan.changed_files,
        "files": [{"path": f.path, "action": f.action or "unchanged"} for f in plan.files],
        "config_version": None,
        "plugin_table": None,
        "runtime_table": None,
        "restart_needed": plan.changed,
        "validation": {"ran": False, "reason": "state=restored puts back files that were there before"},
        "backup_files": {},
        "containerd_version": None,
        "warnings": [],
    }
    if diff:
        result["diff"] = plan.diff
    return result
