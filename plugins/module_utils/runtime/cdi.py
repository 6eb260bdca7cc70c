# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CDI spec of a node's NVIDIA GPUs, and the guard that it still matches the node.

NVIDIA's ``nvidia-ctk cdi generate`` writes the spec (``runtime/cdi_spec.py`` runs it, or the
toolkit's refresh units do: ``runtime/cdi_refresh.py``). What no NVIDIA tool does is the guard,
here: the spec the container runtimes use (the highest-precedence one, ``/var/run/cdi`` before
``/etc/cdi``) must still match the node - its device nodes exist with the numbers it records, it
was written for the loaded driver, the GPUs it names by UUID are this node's, and its MIG devices
are exactly the node's MIG instances. A spec goes stale silently: a reboot can give
``nvidia-uvm`` another major number, a driver upgrade renames every library it mounts, a MIG
reconfiguration changes the devices; nothing says so until a container fails to start.

The node is read from ``/proc`` and ``/dev`` only (no NVML, no command), through the host adapter.
"""

from __future__ import annotations

import posixpath
import re

try:
    import yaml
    HAS_YAML = True
except ImportError:  # checked by require_yaml, where a spec is read
    HAS_YAML = False

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import day2, driver as driver_facts
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import Probes

KIND = "nvidia.com/gpu"
DEFAULT_OUTPUT = "/etc/cdi/nvidia.yaml"
#: Where the toolkit's nvidia-cdi-refresh.service writes (``NVIDIA_CTK_CDI_OUTPUT_FILE_PATH``'s default).
TOOLKIT_SPEC = "/var/run/cdi/nvidia.yaml"
#: The folders the CDI registries read, lowest precedence first: a device two specs define is the later folder's.
SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
#: The comment line after ``---`` that marks a spec cdi_spec wrote (cdi_refresh looks for it).
HEADER = "# Managed by gpufleet.nvidia.cdi_spec"
PROC_GPUS = "/proc/driver/nvidia/gpus"
PROC_VERSION = "/proc/driver/nvidia/version"
PROC_CAPS = "/proc/driver/nvidia/capabilities"
MIG_MINORS = "/proc/driver/nvidia-caps/mig-minors"
UVM_NODE = "/dev/nvidia-uvm"
CAPS_NODE = "/dev/nvidia-caps/nvidia-cap%d"

_LIBCUDA_RE = re.compile(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)?)\b")


def require_yaml() -> None:
    if not HAS_YAML:
        raise GpuFleetError(
            "cdi_spec: PyYAML is not installed for the Python that runs this module, and the CDI spec is YAML: "
            "install python3-yaml (Debian, Ubuntu) or python3-pyyaml (EL); the container_toolkit role installs it")


def parse_spec(text: str, path: str) -> dict:
    """A spec's data (YAML, or JSON, which YAML reads too); GpuFleetError when it is no CDI spec."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise GpuFleetError("cdi_spec: %s does not parse as YAML: %s" % (path, exc), path=path)
    if not _well_formed(data):
        raise GpuFleetError("cdi_spec: %s is not a CDI spec (a mapping with cdiVersion, kind and devices)" % path, path=path)
    return data


def _well_formed(data) -> bool:
    """A mapping whose devices are mappings, and whose container edits (its own, each device's) are mappings."""
    if not isinstance(data, dict) or not isinstance(data.get("devices"), list):
        return False
    devices = data["devices"]
    return all(isinstance(d, dict) for d in devices) and all(
        isinstance(e.get("containerEdits") or {}, dict) for e in [data] + devices)


def nvidia_specs(host, replace=None) -> list:
    """``[(path, data)]`` of the specs of kind nvidia.com/gpu, lowest precedence first; ``replace``
    (``{path: text}``) reads those paths as the given text (a spec about to be written), None as absent."""
    replace = replace or {}
    found = []
    for folder in SPEC_DIRS:
        names = set(host.names(folder)) | {posixpath.basename(p) for p in replace if posixpath.dirname(p) == folder}
        for name in sorted(n for n in names if n.endswith((".yaml", ".json"))):
            path = posixpath.join(folder, name)
            try:
                text = replace[path] if path in replace else host.read(path)
                data = parse_spec(text, path) if text is not None else None
            except GpuFleetError:
                continue  # the registries skip a spec they cannot read, and so does the guard
            if data is not None and data.get("kind") == KIND:
                found.append((path, data))
    return found


def device_names(data) -> list:
    return [d.get("name") for d in data.get("devices") or [] if isinstance(d, dict)]


def shadowing(specs, path) -> list:
    """The specs of ``specs`` that take a device from the one at ``path``: a later folder's, or one of its own (a conflict)."""
    mine = dict(specs).get(path)
    if mine is None:
        return []
    names, rank = set(device_names(mine)), SPEC_DIRS.index(posixpath.dirname(path))
    return [other for other, data in specs if other != path and names & set(device_names(data))
            and SPEC_DIRS.index(posixpath.dirname(other)) >= rank]


def spec_driver_version(text):
    """The driver version a spec (its text, YAML or JSON) was written for: its ``libcuda.so.<version>`` mount, or None."""
    match = _LIBCUDA_RE.search(text or "")
    return match.group(1) if match else None


def counts(data) -> dict:
    """How many device nodes, mounts and hooks the spec holds, the mounts by kind."""
    edits = data.get("containerEdits") or {}
    every = [edits] + [d.get("containerEdits") or {} for d in data.get("devices") or []]
    mounts = [m.get("containerPath", "") for m in edits.get("mounts") or [] if isinstance(m, dict)]
    found = dict.fromkeys(("libraries", "binaries", "firmware", "configs", "ipc"), 0)
    for path in mounts:
        found[_mount_kind(path)] += 1
    found.update(device_nodes=len({n["path"] for e in every for n in nodes_of(e)}),
                 hooks=sum(len(e.get("hooks") or []) for e in every), mounts=len(mounts))
    return found


def _mount_kind(path) -> str:
    base, folder = posixpath.basename(path), posixpath.basename(posixpath.dirname(path))
    if path.endswith("/socket") or base == "nvidia-mps":
        return "ipc"
    if "/firmware/" in path:
        return "firmware"
    if ".so" in base:
        return "libraries"
    return "binaries" if folder in ("bin", "sbin") else "configs"


def loaded_driver(host):
    """The loaded kernel module's version, or None: discovery's one reader of it (``discovery/driver.py``)."""
    return driver_facts.loaded_driver(host, Probes())[1]


def parse_gpu_information(text) -> dict:
    """``/proc/driver/nvidia/gpus/<bus>/information`` as a dict of its ``Key: value`` lines."""
    info = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info[key.strip()] = value.strip()
    return info


def live_gpus(host) -> list:
    """``[{minor, uuid, bus}]`` of the GPUs the driver lists in /proc, by bus id."""
    gpus = []
    for bus in host.names(PROC_GPUS, kernel=True):
        info = parse_gpu_information(host.read(posixpath.join(PROC_GPUS, bus, "information"), kernel=True))
        if info.get("Device Minor", "").isdigit() and info.get("GPU Excluded", "No") == "No":
            gpus.append({"minor": int(info["Device Minor"]), "uuid": info.get("GPU UUID", ""), "bus": bus})
    return gpus


def live_mig(host, gpus) -> set:
    """The MIG instances of the node, each as the pair of its ``/dev/nvidia-caps`` nodes (GPU and compute instance).

    The driver lists a GPU's instances as ``capabilities/gpu<minor>/mig/gi<g>/ci<c>/access`` and
    numbers their nodes in ``nvidia-caps/mig-minors``, which nvidia-ctk reads too (``internal/nvcaps``).
    """
    minors = {}
    for line in (host.read(MIG_MINORS, kernel=True) or "").splitlines():
        cap, minor = (line.split(" ", 1) + [""])[:2]
        if minor.strip().isdigit():
            minors[cap] = CAPS_NODE % int(minor)
    found = set()
    for gpu in gpus:
        mig = "%s/gpu%d/mig" % (PROC_CAPS, gpu["minor"])
        for gi in (n for n in host.names(mig, kernel=True) if n.startswith("gi")):
            for ci in (n for n in host.names(posixpath.join(mig, gi), kernel=True) if n.startswith("ci")):
                caps = ("gpu%d/%s/access" % (gpu["minor"], gi), "gpu%d/%s/%s/access" % (gpu["minor"], gi, ci))
                found.add(frozenset(minors.get(cap, cap) for cap in caps))
    return found


def nodes_of(edits) -> list:
    return [n for n in edits.get("deviceNodes") or [] if isinstance(n, dict) and n.get("path")]


def check_spec(host, path, data, text) -> list:
    """What is wrong with the spec at ``path`` for the node as it is now, in words; [] when nothing."""
    problems = check_driver(host, path, text)
    problems += checknodes_of(host, path, data)
    gpus = live_gpus(host)
    problems += check_gpus(path, data, gpus)
    problems += check_mig(path, data, live_mig(host, gpus))
    return problems


def check_driver(host, path, text) -> list:
    loaded, written = loaded_driver(host), spec_driver_version(text)
    if loaded is None or written == loaded:
        return []
    return ["%s was written for driver %s, the loaded driver is %s (every library it mounts is named by the version)"
            % (path, written or "(none: no libcuda.so.<version> mount)", loaded)]


def checknodes_of(host, path, data) -> list:
    """Every device node of the spec exists, with the major and minor number it records."""
    problems, seen = [], set()
    for edits in [data.get("containerEdits") or {}] + [d.get("containerEdits") or {} for d in data["devices"]]:
        for node in nodes_of(edits):
            if node["path"] in seen:
                continue
            seen.add(node["path"])
            number = day2.device_number(host, node["path"])
            if number is None:
                problems.append("%s names the device node %s, which is not a character device on this node"
                                % (path, host.dlocal(node["path"])))
            elif "major" in node and (node["major"], node.get("minor", 0)) != number:
                problems.append("%s records %s as %s:%s, the node is %d:%d now (the driver numbered it again at load)"
                                % (path, node["path"], node["major"], node.get("minor", 0), number[0], number[1]))
    return problems


def check_gpus(path, data, gpus) -> list:
    """A device named by a GPU's UUID is that GPU of this node, on its node: a GPU swapped for another is not handed out."""
    by_uuid = {g["uuid"]: "/dev/nvidia%d" % g["minor"] for g in gpus}
    problems = []
    for device in data["devices"]:
        name = str(device.get("name"))
        nodes = [n["path"] for n in nodes_of(device.get("containerEdits") or {})]
        if name.startswith("GPU-") and name not in by_uuid:
            problems.append("%s names the GPU %s, which this node does not have (its GPUs: %s)"
                            % (path, name, ", ".join(sorted(by_uuid)) or "none"))
        elif name.startswith("GPU-") and by_uuid[name] not in nodes:
            problems.append("%s gives the GPU %s the nodes %s, the GPU is %s" % (path, name, ", ".join(nodes), by_uuid[name]))
    return problems


def check_mig(path, data, live) -> list:
    """The spec's MIG devices are the node's MIG instances: the same pairs of nvidia-caps nodes."""
    written = set()
    for device in data["devices"]:
        caps = frozenset(n["path"] for n in nodes_of(device.get("containerEdits") or {}) if n["path"].startswith("/dev/nvidia-caps/"))
        if device.get("name") != "all" and len(caps) == 2:  # a MIG device: its GPU instance's and compute instance's nodes
            written.add(caps)
    problems = []
    if live - written:
        problems.append("%s has no device for the MIG instance(s) %s" % (path, _pairs(live - written)))
    if written - live:
        problems.append("%s names MIG device(s) %s that this node does not have" % (path, _pairs(written - live)))
    return problems


def _pairs(pairs) -> str:
    return ", ".join(sorted(" + ".join(sorted(pair)) for pair in pairs))


def spec_problems(host, path, text) -> list:
    """What is wrong with the spec ``text`` at ``path``, a spec that does not exist or parse included."""
    if text is None:
        return ["%s does not exist" % path]
    try:
        return check_spec(host, path, parse_spec(text, path), text)
    except GpuFleetError as exc:
        return [exc.msg[len("cdi_spec: "):]]


def shadow_problems(host, path, text, warn) -> list:
    """The problems of the specs that take devices from the one at ``path`` (the runtimes use those), each named to ``warn``."""
    if posixpath.dirname(path) not in SPEC_DIRS:
        return []
    problems = []
    for other in shadowing(nvidia_specs(host, {path: text}), path):
        if posixpath.dirname(other) == posixpath.dirname(path):
            problems.append("%s defines devices of %s too, in the same folder: the CDI registries refuse both (a conflict)"
                            % (other, path))
            continue
        warn("%s defines devices of %s too, and the container runtimes use %s's" % (other, path, other))
        problems += spec_problems(host, other, host.read(other))
    return problems
