# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``nvidia-smi -q -x``: the one parser of its XML (driver and CUDA versions, each GPU's name,
UUID, bus id, architecture, memory, MIG and persistence modes) and the probe that runs it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import gpu_table
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import command_detail, first_line


def _normalise_bus_id(bus_id):
    """nvidia-smi's ``00000000:3B:00.0`` -> sysfs' ``0000:3b:00.0``."""
    if not bus_id:
        return None
    domain, dummy, rest = bus_id.strip().lower().rpartition(":")
    domain, dummy, bus = domain.rpartition(":")
    return "%s:%s:%s" % ((domain[-4:] if domain else "0000").rjust(4, "0"), bus, rest)


def _text(node, path):
    found = node.find(path)
    if found is None or found.text is None:
        return None
    text = found.text.strip()
    return text or None


def _mode(value):
    return value.lower() if value is not None and value.lower() in ("enabled", "disabled") else None


def parse_nvidia_smi_xml(text):
    """The facts of ``nvidia-smi -q -x``; raises ValueError when it is not its XML."""
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as exc:
        raise ValueError("output is not XML: %s" % exc)
    if root.tag != "nvidia_smi_log":
        raise ValueError("unexpected root element <%s>" % root.tag)
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        memory = _text(gpu, "fb_memory_usage/total")
        try:
            memory = int(memory.split()[0]) if memory else None
        except ValueError:
            memory = None
        gpus.append(
            {
                "index": index,
                "name": _text(gpu, "product_name"),
                "uuid": _text(gpu, "uuid"),
                "bus_id": _normalise_bus_id(gpu.get("id") or _text(gpu, "pci/pci_bus_id")),
                "architecture": gpu_table.normalise_architecture(_text(gpu, "product_architecture")),
                "memory_total_mib": memory,
                # nvidia-smi answers "N/A" for a GPU that cannot do MIG, Enabled/Disabled otherwise.
                "mig_capable": _mode(_text(gpu, "mig_mode/current_mig")) is not None,
                "mig_mode_current": _mode(_text(gpu, "mig_mode/current_mig")),
                "mig_mode_pending": _mode(_text(gpu, "mig_mode/pending_mig")),
                "persistence_mode": _mode(_text(gpu, "persistence_mode")),
            }
        )
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "gpus": gpus,
    }


def run_and_parse(host, probes, name, argv, parse, facts):
    """``parse(stdout)`` of ``argv``; None where it fails or its output does not parse (ValueError):
    then ``facts`` gets ``state`` error and a ``detail``, and the probe ``name`` says why."""
    rc, out, err = host.run(argv)
    if rc != 0:
        facts.update(state="error", detail=first_line(out) or first_line(err) or "exit status %s" % rc)
        probes.error(name, command_detail(argv, rc, out, err))
        return None
    try:
        return parse(out)
    except ValueError as exc:
        facts.update(state="error", detail=str(exc))
        probes.error(name, "%s: %s" % (" ".join(argv), exc))
        return None


def gather_nvidia_smi(host, probes):
    facts = {
        "state": "missing",
        "path": None,
        "driver_version": None,
        "cuda_version": None,
        "gpus": [],
        "detail": None,
    }
    path = host.which("nvidia-smi")
    if path is None:
        probes.missing("nvidia_smi", "nvidia-smi not found in PATH, /usr/local/nvidia/bin or /usr/bin")
        facts["detail"] = "not found"
        return facts
    facts["path"] = path
    parsed = run_and_parse(host, probes, "nvidia_smi", [path, "-q", "-x"], parse_nvidia_smi_xml, facts)
    if parsed is None:
        return facts
    facts.update(parsed)
    facts["state"] = "ok"
    facts["detail"] = "%d GPU%s" % (len(parsed["gpus"]), "" if len(parsed["gpus"]) == 1 else "s")
    probes.ok(
        "nvidia_smi",
        "%s: driver %s, CUDA %s, %s" % (path, parsed["driver_version"], parsed["cuda_version"], facts["detail"]),
    )
    return facts
