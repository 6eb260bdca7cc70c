# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's runtime files read, and the plan of the runtime's editor for them (``runtime.config``'s first step).

:func:`build_plan` reads, through a host object (``common.host.Host`` over an ``AnsibleModule``, or a
fake in the tests), the files of the runtime asked for (containerd's main file and the files it
imports, found by containerd's own rules; CRI-O's drop-ins; daemon.json; the k3s / RKE2 template)
and the installed containerd's version, and has the runtime's editor (``runtime.containerd``,
``runtime.k3s``, ``runtime.crio``, ``runtime.docker``) plan the change.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs, io as safe_io
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import containerd as ctd, containerd_config, crio, docker, k3s
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit import parse_toml, require_tomlkit
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.files import FileChange, read_text
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.managed import OWNER_MARK, unwrap


#: The runtimes the module configures (a planner each, :data:`_PLANNERS`).
RUNTIMES = ("containerd", "crio", "docker", "k3s", "rke2")


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
        binary_name=params.get("binary_name") or containerd_config.DEFAULT_BINARY,
        enable_cdi=params.get("enable_cdi"),
        enable_cri=params.get("enable_cri"),
        config_version=params.get("config_version"),
        containerd_version=version,
        **common
    )


def _containerd_paths(params) -> tuple:
    """``(main file, drop-in, the drop-in's import glob)``; the drop-in is beside the main file
    (in its ``conf.d``) unless ``dropin_path`` says where."""
    main_path = params.get("config_path") or containerd_config.DEFAULT_CONFIG
    default_dropin = os.path.join(os.path.dirname(main_path), "conf.d", os.path.basename(containerd_config.DEFAULT_DROPIN))
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
    opts = containerd_config.ContainerdOptions(
        mode=mode, dropin_path=dropin_path, import_glob=import_glob, other_dropins=others, import_order=order, **options
    )
    context.update(main_path=main_path, dropin_path=dropin_path, import_glob=import_glob, others=others)
    return ctd.plan_containerd(main_path, main_text, read_text(host, dropin_path), opts, texts)


#: The most files the module follows through ``imports`` (links can make a chain of them endless).
MAX_IMPORTS = 256


def _import_entries(main_text, main_path, import_glob) -> list:
    """The main file's ``imports`` (made absolute against its folder, as containerd does), then
    ``import_glob`` when the drop-in mode adds it."""
    doc = parse_toml(main_text or "", main_path)
    entries = unwrap(doc.get("imports")) or []
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
    opts = containerd_config.ContainerdOptions(mode="inplace", **options)
    context.update(main_path=template, generated_path=generated)
    return k3s.plan_k3s(
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
    template, generated = k3s.k3s_paths(params["runtime"])
    generated_text = read_text(host, generated)
    base = os.path.dirname(template)
    existing = [p for p in (base + "/config-v3.toml.tmpl", base + "/config.toml.tmpl") if host.exists(p)]
    template, generated = k3s.k3s_paths(params["runtime"], _generated_version(generated_text), existing)
    return template, generated, generated_text


def _generated_version(text):
    m = re.search(r"^version\s*=\s*(\d+)", text or "", re.M)
    return int(m.group(1)) if m else None


def _autodetected(host):
    """The NVIDIA runtime that k3s and RKE2 find (and add) by themselves, or None."""
    candidates = (os.path.join(directory, "nvidia-container-runtime") for directory in k3s.K3S_AUTODETECT_DIRS)
    return next((path for path in candidates if host.exists(path)), None)


#: The planner of each runtime: ``(params, host, common options, context) -> Plan``.
_PLANNERS = {
    "containerd": _plan_containerd,
    "crio": _plan_crio,
    "docker": _plan_docker,
    "k3s": _plan_k3s,
    "rke2": _plan_k3s,
}
