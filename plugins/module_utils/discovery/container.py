# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container stack of a host: containerd (and its config's CRI plugin and runtimes), Docker,
CRI-O, k3s and RKE2, and the NVIDIA Container Toolkit.
"""

from __future__ import annotations

import json

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import toml_subset
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import run_version

CONTAINERD_CONFIG = "/etc/containerd/config.toml"
DOCKER_CONFIG = "/etc/docker/daemon.json"
CRIO_CONFIG = "/etc/crio/crio.conf"
CRIO_DROPIN_DIR = "/etc/crio/crio.conf.d"
TOOLKIT_CONFIG = "/etc/nvidia-container-runtime/config.toml"
RANCHER = {
    "k3s": ("/usr/local/bin/k3s", "/usr/bin/k3s"),
    "rke2": ("/usr/local/bin/rke2", "/usr/bin/rke2", "/opt/rke2/bin/rke2"),
}
TOOLKIT_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1")
# The toolkit's binaries that say its version where no package does, first found first asked.
TOOLKIT_VERSIONS = (("nvidia_ctk", "nvidia-ctk", r"version\s+v?(\d[^\s]*)"),
                    ("nvidia_container_cli", "nvidia-container-cli", r"cli-version:\s*v?(\S+)"))
# The tables containerd's CRI plugin has had, newest first (the order validation looks them up in).
CRI_PLUGINS = ("io.containerd.cri.v1.runtime", "io.containerd.grpc.v1.cri", "cri")


def _str_list(value):
    return [str(v) for v in value] if isinstance(value, list) else []


def parse_containerd_config(text):
    """Top-level ``version``, ``disabled_plugins``, ``imports`` and the runtimes of a config.toml.

    Read with ``common.toml_subset.loads``: the Python's TOML library where it has one, else the
    collection's subset reader, and then ``runtimes`` stays None (gpu_facts returns them only
    where Python has a TOML library).
    Raises ValueError on a file that is not TOML.
    """
    data = toml_subset.loads(text)
    version = data.get("version")
    result = {
        "version": version if isinstance(version, int) else None,
        "disabled_plugins": _str_list(data.get("disabled_plugins")),
        "imports": _str_list(data.get("imports")),
        "runtimes": None,
        "parser": toml_subset.tomllib.__name__ if toml_subset.tomllib is not None else "subset",
    }
    if toml_subset.tomllib is not None:
        result["runtimes"] = _runtime_names(data, cri_plugin_name(result["version"], empty=not text.strip()))
    return result


def _runtime_names(data, plugin):
    """The runtime handlers of the CRI plugin's table ``plugin`` (a version 1 config's ``cri``,
    or the grpc plugin's table where it has none)."""
    runtimes = _dig(data, "plugins", plugin, "containerd", "runtimes")
    if runtimes is None and plugin == "cri":
        runtimes = _dig(data, "plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes")
    return sorted(runtimes) if isinstance(runtimes, dict) else []


def cri_plugin_name(version, empty=False):
    """The CRI plugin's table for a config version (nvidia-container-toolkit's rules)."""
    if version is None:
        return "io.containerd.grpc.v1.cri" if empty else "cri"
    if version >= 3:
        return "io.containerd.cri.v1.runtime"
    return "io.containerd.grpc.v1.cri"


def _binary(host, probes, probe, name, pattern):
    """``{installed, path, version}`` of the runtime binary ``name`` (its ``--version`` read with ``pattern``)."""
    path = host.which(name)
    if not path:
        probes.missing(probe, "%s not found" % name)
        return {"installed": False, "path": None, "version": None}
    return {"installed": True, "path": path, "version": run_version(host, probes, probe, [path, "--version"], pattern)}


def gather_containerd(host, probes):
    facts = _binary(host, probes, "containerd", "containerd", r"containerd\s+\S+\s+v?(\S+)")
    facts.update({
        "config_path": CONTAINERD_CONFIG,
        "config_exists": False,
        "config_version": None,
        "cri_plugin": None,
        "disabled_plugins": [],
        "cri_disabled": False,
        "imports": [],
        "runtimes": None,
    })
    facts["config_exists"] = host.exists(CONTAINERD_CONFIG)
    if not facts["config_exists"]:
        probes.missing("containerd_config", "%s does not exist" % CONTAINERD_CONFIG)
        facts["cri_plugin"] = "io.containerd.grpc.v1.cri" if facts["path"] else None
        return facts
    try:
        text = host.read_text(CONTAINERD_CONFIG)
        parsed = parse_containerd_config(text)
    except (IOError, OSError) as exc:
        probes.error("containerd_config", "%s: %s" % (CONTAINERD_CONFIG, exc))
        return facts
    except (ValueError, RecursionError) as exc:  # tomllib.TOMLDecodeError is a ValueError; nesting too deep, a RecursionError
        probes.error("containerd_config", "%s is not valid TOML: %s" % (CONTAINERD_CONFIG, exc))
        return facts
    facts["config_version"] = parsed["version"]
    facts["cri_plugin"] = cri_plugin_name(parsed["version"], empty=not text.strip())
    facts["disabled_plugins"] = parsed["disabled_plugins"]
    facts["cri_disabled"] = any(p in CRI_PLUGINS for p in parsed["disabled_plugins"])
    facts["imports"] = parsed["imports"]
    facts["runtimes"] = parsed["runtimes"]
    probes.ok(
        "containerd_config",
        "%s: version %s, disabled_plugins %s (%s)"
        % (CONTAINERD_CONFIG, parsed["version"], parsed["disabled_plugins"], parsed["parser"]),
    )
    return facts


def gather_docker(host, probes):
    facts = _binary(host, probes, "docker", "dockerd", r"version\s+v?([0-9][^,\s]*)")
    facts.update({"config_path": DOCKER_CONFIG, "config_exists": host.exists(DOCKER_CONFIG), "runtimes": None, "default_runtime": None})
    if not facts["config_exists"]:
        probes.missing("docker_config", "%s does not exist" % DOCKER_CONFIG)
        return facts
    try:
        data = json.loads(host.read_text(DOCKER_CONFIG) or "{}")
    except (IOError, OSError) as exc:
        probes.error("docker_config", "%s: %s" % (DOCKER_CONFIG, exc))
        return facts
    except (ValueError, RecursionError) as exc:
        probes.error("docker_config", "%s is not valid JSON: %s" % (DOCKER_CONFIG, exc))
        return facts
    if not isinstance(data, dict):
        probes.error("docker_config", "%s is not a JSON object" % DOCKER_CONFIG)
        return facts
    runtimes = data.get("runtimes")
    facts["runtimes"] = sorted(runtimes) if isinstance(runtimes, dict) else []
    facts["default_runtime"] = data.get("default-runtime")
    probes.ok("docker_config", "%s: runtimes %s" % (DOCKER_CONFIG, facts["runtimes"]))
    return facts


def gather_crio(host, probes):
    facts = _binary(host, probes, "crio", "crio", r"(?im)(?:crio version|^Version:)\s*v?(\d[^\s]*)")
    facts.update({
        "config_path": CRIO_CONFIG,
        "config_exists": host.exists(CRIO_CONFIG),
        "dropin_dir": CRIO_DROPIN_DIR,
        "dropin_dir_exists": host.isdir(CRIO_DROPIN_DIR),
    })
    return facts


def gather_rancher(host, probes, name):
    base = "/var/lib/rancher/%s/agent/etc/containerd" % name
    binary = next((p for p in RANCHER[name] if host.exists(p)), None) or host.which(name)
    facts = {
        "installed": binary is not None,
        "path": binary,
        "config_path": base + "/config.toml",
        "config_exists": host.exists(base + "/config.toml"),
        "template_path": base + "/config.toml.tmpl",
        "template_exists": host.exists(base + "/config.toml.tmpl"),
    }
    if binary:
        probes.ok(
            name, "%s; generated containerd config %s" % (binary, "exists" if facts["config_exists"] else "absent")
        )
    else:
        probes.missing(name, "%s not found" % name)
    return facts


def gather_toolkit(host, probes, dpkg):
    facts = {
        "installed": False,
        "version": None,
        "version_source": None,
        "nvidia_ctk": host.which("nvidia-ctk"),
        "nvidia_container_cli": host.which("nvidia-container-cli"),
        "nvidia_container_runtime": host.which("nvidia-container-runtime"),
        "config_path": TOOLKIT_CONFIG,
        "config_exists": host.exists(TOOLKIT_CONFIG),
        "packages": None,
    }
    if dpkg is not None:
        facts["packages"] = {name: dpkg[name] for name in TOOLKIT_PACKAGES if name in dpkg}
        if "nvidia-container-toolkit" in dpkg:
            facts["version"] = dpkg["nvidia-container-toolkit"]
            facts["version_source"] = "dpkg"
            probes.ok("toolkit", "dpkg: nvidia-container-toolkit %s" % facts["version"])
    tools = [(facts[key], source, pattern) for key, source, pattern in TOOLKIT_VERSIONS if facts[key]]
    if facts["version"] is None and tools:
        path, source, pattern = tools[0]
        facts["version"] = run_version(host, probes, "toolkit", [path, "--version"], pattern)
        facts["version_source"] = source if facts["version"] else None
    elif facts["version"] is None:
        probes.missing("toolkit", "neither nvidia-ctk nor nvidia-container-cli found")
    facts["installed"] = bool(facts["version"] or facts["nvidia_ctk"] or facts["nvidia_container_cli"] or facts["nvidia_container_runtime"])
    return facts
