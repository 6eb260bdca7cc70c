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

import os
import re
import shutil
import tempfile

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import containerd as ctd
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import crio, docker
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit import (
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


def _names(host, pattern) -> list:
    """The files matching ``pattern``, without hidden ones (as the shell's glob lists them)."""
    return [p for p in host.glob(pattern) if not os.path.basename(p).startswith(".")]


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


def build_plan(params: dict, host):
    """Read the host's files and plan the change; returns ``(plan, context)``."""
    runtime = params["runtime"]
    if runtime not in RUNTIMES:
        raise GpuFleetError("runtime %r is not one of %s" % (runtime, ", ".join(RUNTIMES)))
    common = dict(
        state=params.get("state") or "present",
        runtime_name=params.get("runtime_name") or "nvidia",
        set_as_default=params.get("set_as_default"),
    )
    context = {"runtime": runtime}

    if runtime == "docker":
        _mode(params, "inplace", ("inplace",))
        path = params.get("config_path") or docker.DEFAULT_CONFIG
        opts = docker.DockerOptions(
            binary_name=params.get("binary_name") or docker.DEFAULT_BINARY,
            enable_cdi=params.get("enable_cdi"),
            **common
        )
        return docker.plan_docker(path, read_text(host, path), opts), context

    if runtime == "crio":
        require_tomlkit()
        mode = _mode(params, "dropin", ("dropin", "inplace"))
        main_path = params.get("config_path") or crio.DEFAULT_CONFIG
        dropin_path = params.get("dropin_path") or crio.DEFAULT_DROPIN
        others = [
            (p, read_text(host, p))
            for p in _names(host, os.path.join(os.path.dirname(dropin_path), "*"))
            if p != dropin_path
        ]
        opts = crio.CrioOptions(
            mode=mode,
            binary_name=params.get("binary_name") or crio.DEFAULT_BINARY,
            dropin_path=dropin_path,
            **common
        )
        return crio.plan_crio(main_path, read_text(host, main_path), read_text(host, dropin_path), others, opts), context

    require_tomlkit()
    binary, version = (None, None)
    if params.get("validate", True) or runtime == "containerd":
        binary, version = _containerd_binary(params, host)
    context.update(containerd_binary=binary, containerd_version=version)
    major = int(version.split(".")[0]) if version else None
    opts_kw = dict(
        binary_name=params.get("binary_name") or ctd.DEFAULT_BINARY,
        enable_cdi=params.get("enable_cdi"),
        enable_cri=params.get("enable_cri"),
        config_version=params.get("config_version"),
        containerd_major=major,
        containerd_version=version,
        **common
    )

    if runtime == "containerd":
        mode = _mode(params, "dropin", ("dropin", "inplace"))
        main_path = params.get("config_path") or ctd.DEFAULT_CONFIG
        dropin_path = params.get("dropin_path") or ctd.DEFAULT_DROPIN
        import_glob = os.path.join(os.path.dirname(dropin_path), "*.toml")
        others = [p for p in _names(host, import_glob) if p != dropin_path]
        opts = ctd.ContainerdOptions(
            mode=mode, dropin_path=dropin_path, import_glob=import_glob, other_dropins=others, **opts_kw
        )
        context.update(main_path=main_path, dropin_path=dropin_path, import_glob=import_glob, others=others)
        other_texts = [(p, read_text(host, p)) for p in others]
        plan = ctd.plan_containerd(main_path, read_text(host, main_path), read_text(host, dropin_path), opts, other_texts)
        return plan, context

    # k3s / RKE2
    _mode(params, "inplace", ("inplace",))
    if params.get("config_path"):
        template = params["config_path"]
        generated = os.path.join(os.path.dirname(template), "config.toml")
    else:
        template, generated = ctd.k3s_paths(runtime)
    generated_text = read_text(host, generated)
    gen_version = None
    m = re.search(r"^version\s*=\s*(\d+)", generated_text or "", re.M)
    if m:
        gen_version = int(m.group(1))
    if not params.get("config_path"):
        base = os.path.dirname(template)
        existing = [p for p in (base + "/config-v3.toml.tmpl", base + "/config.toml.tmpl") if host.exists(p)]
        template, generated = ctd.k3s_paths(runtime, gen_version, existing)
    autodetected = None
    for directory in ctd.K3S_AUTODETECT_DIRS:
        candidate = os.path.join(directory, "nvidia-container-runtime")
        if host.exists(candidate):
            autodetected = candidate
            break
    opts = ctd.ContainerdOptions(mode="inplace", **opts_kw)
    context.update(main_path=template, generated_path=generated)
    plan = ctd.plan_k3s(
        runtime, template, read_text(host, template), generated, generated_text, opts, autodetected=autodetected
    )
    return plan, context


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
    runtime = context["runtime"]
    if runtime not in ("containerd", "k3s", "rke2"):
        return {"ran": False, "reason": "only containerd configurations are checked"}
    if not params.get("validate", True):
        return {"ran": False, "reason": "validate=false"}
    binary = context.get("containerd_binary")
    if not binary:
        return {"ran": False, "reason": "no containerd binary found on the host"}
    main = plan.file(context["main_path"])
    main_text = main.after if main is not None else None
    if runtime in ("k3s", "rke2") and main_text and "{{" in main_text:
        return {
            "ran": False,
            "reason": "%s is a Go template; %s renders it only when it starts" % (context["main_path"], runtime),
        }
    dropin = plan.file(context.get("dropin_path")) if context.get("dropin_path") else None
    dropin_text = dropin.after if dropin is not None else None

    workdir = tempfile.mkdtemp(prefix="gpufleet-ctd-", dir=host.tmpdir)
    try:
        tmp_dropin = None
        if dropin_text is not None:
            tmp_dropin = os.path.join(workdir, "99-nvidia.toml")
            with open(tmp_dropin, "w") as handle:
                handle.write(dropin_text)
        doc = parse_toml(main_text or "", context["main_path"])
        if "imports" in doc:
            doc["imports"] = _candidate_imports(
                doc, context, tmp_dropin, os.path.dirname(context["main_path"])
            )
        tmp_main = os.path.join(workdir, "config.toml")
        with open(tmp_main, "w") as handle:
            handle.write(doc.as_string())
        argv = [binary, "--config", tmp_main, "config", "dump"]
        rc, out, err = host.run(argv)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report = {
        "ran": True,
        "binary": binary,
        "version": context.get("containerd_version"),
        "command": "%s --config <candidate> config dump" % binary,
    }
    if rc != 0:
        raise GpuFleetError(
            "containerd %s refused the new configuration, nothing was written: %s"
            % (context.get("containerd_version") or binary, (err or out).strip()),
            validation=dict(report, rc=rc, stderr=err),
        )
    problems = dump_problems(out, params.get("runtime_name") or "nvidia", params.get("state") or "present")
    if problems:
        raise GpuFleetError(
            "containerd %s would not have a usable runtime with the new configuration (%s); "
            "nothing was written" % (context.get("containerd_version") or binary, "; ".join(problems)),
            validation=report,
        )
    return report


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


def apply_plan(plan, host, backup: bool = False) -> dict:
    """Write the planned files in order; returns ``{path: backup path}``."""
    backups = {}
    for change in plan.files:
        if not change.changed:
            continue
        if change.after is None:
            saved = host.remove(change.path, backup=backup)
        else:
            saved = host.write(change.path, change.after, backup=backup)
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
        backups = apply_plan(plan, host, backup=bool(params.get("backup")))
    result = {
        "changed": plan.changed,
        "msg": plan.msg,
        "changed_files": plan.changed_files,
        "files": [{"path": f.path, "action": f.action or "unchanged"} for f in plan.files],
        "config_version": plan.facts.get("config_version"),
        "plugin_table": plan.facts.get("plugin_table"),
        "runtime_table": plan.facts.get("runtime_table"),
        "restart_needed": plan.changed,
        "validation": validation,
        "backup_files": backups,
        "containerd_version": context.get("containerd_version"),
        "warnings": plan.warnings,
    }
    if diff:
        result["diff"] = plan.diff
    return result

