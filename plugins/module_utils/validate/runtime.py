# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host validation's check of the container runtime: a handler (``nvidia`` unless told)
running nvidia-container-runtime, read from containerd's ``config dump`` (so drop-ins count),
k3s' and RKE2's generated config, CRI-O's config and drop-ins, or Docker's ``daemon.json``.
"""

from __future__ import annotations

import glob
import json
import os
import posixpath

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import toml_subset
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import deep_merge, dig as _dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.container import (
    CONTAINERD_CONFIG,
    CRIO_CONFIG,
    CRIO_DROPIN_DIR,
    CRI_PLUGINS,
    DOCKER_CONFIG,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import first_line
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import (
    FAILED,
    OK,
    SKIPPED,
    _executable,
    _read,
    _read_toml_file,
)

RANCHER_CONTAINERD = {
    "k3s": (
        "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
        ("/var/lib/rancher/k3s/data/current/bin/containerd",),
    ),
    "rke2": (
        "/var/lib/rancher/rke2/agent/etc/containerd/config.toml",
        ("/var/lib/rancher/rke2/bin/containerd",),
    ),
}


def _runtime_binary_problem(host, binary, where):
    """Why ``binary`` cannot be the NVIDIA runtime, or None."""
    if not binary:
        return "%s is not set: the handler runs runc, not nvidia-container-runtime" % where
    name = posixpath.basename(str(binary))
    if not name.startswith("nvidia-container-runtime"):
        return "%s runs %s, not nvidia-container-runtime" % (where, binary)
    if _executable(host, str(binary)) is None:
        return "%s is %s, which does not exist on the node" % (where, binary)
    return None


def host_glob(host, pattern):
    """The host paths of the files matching ``pattern`` (a host path), sorted as containerd does."""
    root = host.root
    local = pattern if root == "/" else os.path.join(root, pattern.lstrip("/"))
    matches = sorted(m for m in glob.glob(local) if os.path.isfile(m))
    if root == "/":
        return matches
    return ["/" + os.path.relpath(m, root) for m in matches]


def containerd_imports(host, path, data):
    """The files that ``imports`` of ``data`` (read from ``path``) name, in containerd's order."""
    found = []
    for pattern in data.get("imports") or []:
        if not isinstance(pattern, str):
            continue
        if not pattern.startswith("/"):
            pattern = posixpath.join(posixpath.dirname(path), pattern)
        found.extend(m for m in host_glob(host, pattern) if m not in found)
    return found


def _containerd_files(host, path):
    """``(files, datas, error)``: the config and its imports, each read."""
    data, error = _read_toml_file(host, path)
    if error:
        return [path], [], error
    files = [path] if host.exists(path) else []
    datas = [data] if files else []
    for extra in containerd_imports(host, path, data):
        more, error = _read_toml_file(host, extra)
        files.append(extra)
        if error:
            return files, datas, error
        datas.append(more)
    return files, datas, None


def _cri_table(config):
    for plugin in CRI_PLUGINS:
        table = _dig(config, "plugins", plugin)
        if isinstance(_dig(table, "containerd", "runtimes"), dict):
            return plugin, table
    return None, None


def _explicit_cdi(files_data):
    return any(_dig(data, "plugins", plugin, "enable_cdi") is True for data in files_data for plugin in CRI_PLUGINS)


def check_containerd(host, facts, flavor, handler):
    """``(status, msg, info)`` of the handler in containerd's (or k3s / RKE2's) merged config."""
    info = {"config": None, "source": None, "cdi": False, "default_runtime": None}
    path, binary, problem = _locate_containerd(host, facts, flavor)
    if problem:
        return FAILED, problem, info
    info["config"] = path
    merged, problem = _containerd_config(host, path, binary, info)
    if problem:
        return FAILED, problem, info
    status, msg = _containerd_handler(host, merged, path, handler, info)
    return status, msg, info


def _locate_containerd(host, facts, flavor):
    """``(config, binary, problem)``: the config file and the containerd binary of ``flavor``
    (containerd, k3s or rke2), or why there is none."""
    if flavor == "containerd":
        binary = host.which("containerd")
        if binary is None:
            return None, None, "containerd is not installed (container_runtime containerd)"
        return CONTAINERD_CONFIG, binary, None
    path, bundled = RANCHER_CONTAINERD[flavor]
    if not (_dig(facts, "container", flavor, "installed") or host.which(flavor)):
        return None, None, "%s is not installed (container_runtime %s)" % (flavor, flavor)
    if not host.exists(path):
        return None, None, "%s has not generated %s yet (is %s running?)" % (flavor, path, flavor)
    return path, next((b for b in bundled if host.exists(b)), None), None


def _containerd_config(host, path, binary, info):
    """``(merged, problem)``: containerd's config with its imports, as containerd itself merges it
    where its binary is there, else merged here; ``info`` gets its source and whether it enables CDI."""
    files, datas, error = _containerd_files(host, path)
    info["cdi"] = _explicit_cdi(datas)
    info["source"] = " + ".join(files) if files else "%s (absent: containerd's defaults)" % path
    if binary is not None and files:
        return _containerd_dump(host, binary, path, info)
    if error:
        return None, error
    merged = {}
    for data in datas:
        merged = deep_merge(merged, data)
    return merged, None


def _containerd_dump(host, binary, path, info):
    """``(merged, problem)`` from ``containerd config dump``."""
    # What containerd itself makes of the config and its imports: the authority. (containerd
    # 1.x refuses a --config that does not exist; without a file it runs on its defaults,
    # which have no nvidia handler.)
    rc, out, err = host.run([binary, "--config", path, "config", "dump"])
    if rc != 0:
        detail = first_line(err) or first_line(out) or "exit %s" % rc
        return None, "containerd cannot load %s: %s" % (path, detail)
    try:
        merged = toml_subset.loads(out)
    except ValueError as exc:
        return None, "cannot read the output of containerd config dump: %s" % exc
    info["source"] = "%s --config %s config dump" % (binary, path)
    return merged, None


def _containerd_handler(host, merged, path, handler, info):
    """``(status, msg)`` of the handler in the merged config: the CRI plugin enabled, the handler
    there with a runtime_type, running nvidia-container-runtime; ``info`` gets the default runtime."""
    disabled = [p for p in (merged.get("disabled_plugins") or []) if p in CRI_PLUGINS]
    if disabled:
        return (
            FAILED,
            "containerd's CRI plugin is disabled (disabled_plugins = %s in %s): Kubernetes cannot use it"
            % (json.dumps(disabled), path),
        )
    plugin, cri = _cri_table(merged)
    runtimes = _dig(cri, "containerd", "runtimes") or {}
    info["default_runtime"] = _dig(cri, "containerd", "default_runtime_name")
    where = 'plugins."%s".containerd.runtimes.%s' % (plugin or CRI_PLUGINS[1], handler)
    if handler not in runtimes:
        return (
            FAILED,
            "containerd has no runtime handler %r (%s not in %s; handlers: %s)"
            % (handler, where, info["source"], ", ".join(sorted(runtimes)) or "none"),
        )
    entry = runtimes[handler] if isinstance(runtimes[handler], dict) else {}
    if not entry.get("runtime_type"):
        return FAILED, "%s has no runtime_type (containerd 2.3 refuses to start)" % where
    problem = _runtime_binary_problem(host, _dig(entry, "options", "BinaryName"), where + ".options.BinaryName")
    if problem:
        return FAILED, problem
    return OK, "containerd runtime handler %r runs %s (from %s)" % (handler, _dig(entry, "options", "BinaryName"), info["source"])


def check_docker(host, facts, handler):
    info = {"config": DOCKER_CONFIG, "source": DOCKER_CONFIG, "cdi": False, "default_runtime": None}
    if not (_dig(facts, "container", "docker", "installed") or host.which("dockerd")):
        return FAILED, "dockerd is not installed (container_runtime docker)", info
    path = DOCKER_CONFIG
    if not host.exists(path):
        return FAILED, "%s does not exist: Docker has no runtime %r" % (path, handler), info
    text, error = _read(host, path)
    if error:
        return FAILED, error, info
    try:
        data = json.loads(text or "{}")
    except ValueError as exc:
        return FAILED, "%s is not valid JSON (dockerd will not start): %s" % (path, exc), info
    if not isinstance(data, dict):
        return FAILED, "%s is not a JSON object" % path, info
    info["cdi"] = _dig(data, "features", "cdi") is True
    info["default_runtime"] = data.get("default-runtime")
    runtimes = data.get("runtimes") if isinstance(data.get("runtimes"), dict) else {}
    if handler not in runtimes:
        return FAILED, "Docker has no runtime %r in %s (runtimes: %s)" % (handler, path, ", ".join(sorted(runtimes)) or "none"), info
    problem = _runtime_binary_problem(host, _dig(runtimes, handler, "path"), "%s runtimes.%s.path" % (path, handler))
    if problem:
        return FAILED, problem, info
    return OK, "Docker runtime %r runs %s (%s)" % (handler, _dig(runtimes, handler, "path"), path), info


def check_crio(host, facts, handler):
    info = {"config": CRIO_CONFIG, "source": None, "cdi": False, "default_runtime": None}
    if not (_dig(facts, "container", "crio", "installed") or host.which("crio")):
        return FAILED, "crio is not installed (container_runtime crio)", info
    files = [CRIO_CONFIG] if host.exists(CRIO_CONFIG) else []
    if host.isdir(CRIO_DROPIN_DIR):
        try:
            names = host.listdir(CRIO_DROPIN_DIR)
        except OSError as exc:
            return FAILED, "%s: %s" % (CRIO_DROPIN_DIR, exc), info
        files += [posixpath.join(CRIO_DROPIN_DIR, n) for n in names if not n.startswith(".")]
    merged = {}
    for path in files:
        data, error = _read_toml_file(host, path)
        if error:
            return FAILED, error, info
        merged = deep_merge(merged, data)
    info["source"] = " + ".join(files) or "none"
    info["default_runtime"] = _dig(merged, "crio", "runtime", "default_runtime")
    runtimes = _dig(merged, "crio", "runtime", "runtimes") or {}
    if handler not in runtimes:
        return (
            FAILED,
            "CRI-O has no runtime %r ([crio.runtime.runtimes.%s] not in %s)" % (handler, handler, info["source"]),
            info,
        )
    problem = _runtime_binary_problem(
        host, _dig(runtimes, handler, "runtime_path"), "crio.runtime.runtimes.%s.runtime_path" % handler
    )
    if problem:
        return FAILED, problem, info
    return OK, "CRI-O runtime %r runs %s (%s)" % (handler, _dig(runtimes, handler, "runtime_path"), info["source"]), info


def check_runtime(checks, host, facts, runtime, handler):
    """The runtime check; returns what the CDI check needs to know of the runtime."""
    if runtime == "none":
        checks.add("runtime", SKIPPED, "runtime handler: not checked: no container runtime declared (container_runtime none)")
        return {"name": runtime, "handler": handler, "present": None, "cdi": False}
    if runtime == "docker":
        status, msg, info = check_docker(host, facts, handler)
    elif runtime == "crio":
        status, msg, info = check_crio(host, facts, handler)
    else:
        status, msg, info = check_containerd(host, facts, runtime, handler)
    checks.add("runtime", status, msg)
    info.update({"name": runtime, "handler": handler, "present": status == OK})
    return info
