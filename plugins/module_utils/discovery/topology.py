# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Multi-GPU hosts: how the GPUs are joined (``nvidia-smi topo -m``) and NVIDIA's fabric manager,
which hosts with NVSwitches need at the driver's version.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.nvidia_smi import run_and_parse
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import first_line, run_version

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU_COLUMN = re.compile(r"^GPU\d+$")
_FABRIC_MANAGER_UNIT = "nvidia-fabricmanager"


def parse_topo_matrix(text):
    """The GPU-to-GPU part of ``nvidia-smi topo -m``.

    Returns ``{'gpus': [names], 'links': {gpu: {peer: link}}, 'cpu_affinity': {gpu: str},
    'numa_affinity': {gpu: str}, 'nvlink_pairs': n}``; the link codes are nvidia-smi's own
    (``X``, ``NV<n>``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``). Raises ValueError on a text
    that has no matrix. Columns are separated by tabs; nvidia-smi underlines the header with ANSI
    escapes, which are dropped.
    """
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header = next((i for i, line in enumerate(lines) if line.strip().startswith("GPU0")), None)
    if header is None:
        raise ValueError("no GPU0 column in the topology matrix")
    columns = [c.strip() for c in lines[header].strip().split("\t") if c.strip()]
    gpus = [c for c in columns if _GPU_COLUMN.match(c)]
    rows = list(_topo_rows(lines, columns, header))
    links = dict((gpu, dict((peer, row.get(peer)) for peer in gpus if peer != gpu)) for gpu, row in rows)
    return {
        "gpus": gpus,
        "links": links,
        "cpu_affinity": dict((gpu, row.get("CPU Affinity")) for gpu, row in rows),
        "numa_affinity": dict((gpu, row.get("NUMA Affinity")) for gpu, row in rows),
        "nvlink_pairs": _nvlink_pairs(links),
    }


def _topo_rows(lines, columns, header):
    """``(gpu, {column: cell})`` of each GPU's row of the matrix (the header, line ``header``, left out)."""
    for index, line in enumerate(lines):
        cells = [c.strip() for c in line.split("\t")]
        if index != header and _GPU_COLUMN.match(cells[0]):
            yield cells[0], dict(zip(columns, cells[1:]))


def _nvlink_pairs(links):
    """How many pairs of GPUs an NVLink joins (``NV<n>`` either way counts once)."""
    pairs = set()
    for gpu, peers in links.items():
        pairs.update(tuple(sorted((gpu, peer))) for peer, link in peers.items() if link and link.startswith("NV"))
    return len(pairs)


def gather_topology(host, probes, nvidia_smi):
    """``nvidia-smi topo -m`` on hosts with two GPUs or more (one call; none otherwise)."""
    facts = {"state": "skipped", "detail": None, "gpus": [], "links": {}, "cpu_affinity": {},
             "numa_affinity": {}, "nvlink_pairs": 0}
    if nvidia_smi["state"] != "ok":
        facts["detail"] = "nvidia-smi %s" % nvidia_smi["state"]
        probes.missing("topology", facts["detail"])
        return facts
    if len(nvidia_smi["gpus"]) < 2:
        facts["detail"] = "one GPU: no GPU-to-GPU topology"
        probes.ok("topology", facts["detail"])
        return facts
    parsed = run_and_parse(host, probes, "topology", [nvidia_smi["path"], "topo", "-m"], parse_topo_matrix, facts)
    if parsed is None:
        return facts
    facts.update(parsed)
    facts["state"] = "ok"
    facts["detail"] = "%d GPUs, %d NVLink pairs" % (len(facts["gpus"]), facts["nvlink_pairs"])
    probes.ok("topology", facts["detail"])
    return facts


def gather_fabric_manager(host, probes, dpkg, nvswitch_count):
    """NVIDIA's fabric manager: needed where NVSwitches join the GPUs, at the driver's version.

    The version comes from its package where dpkg knows it, else from ``nv-fabricmanager
    --version``; the service state from ``systemctl is-active`` (only on the host itself).
    """
    facts = {
        "required": nvswitch_count > 0,
        "installed": False,
        "path": None,
        "version": None,
        "version_source": None,
        "package": None,
        "service": None,
    }
    for name, version in sorted((dpkg or {}).items()):
        if name.startswith("nvidia-fabricmanager"):
            facts.update(installed=True, version=versions.upstream_version(version),
                         version_source="package", package=name)
            break
    path = host.which("nv-fabricmanager", extra_dirs=("/usr/bin", "/usr/sbin"))
    if path:
        facts.update(installed=True, path=path)
        if facts["version"] is None:
            version = run_version(host, probes, "fabric_manager", [path, "--version"], r"(\d+\.\d+(?:\.\d+)?)")
            facts.update(version=version, version_source="binary" if version else None)
    if not facts["installed"]:
        detail = "not installed" + ("; NVSwitches present, it is required" if facts["required"] else "")
        (probes.error if facts["required"] else probes.missing)("fabric_manager", detail)
        return facts
    systemctl = host.which("systemctl", extra_dirs=("/usr/bin", "/bin"))
    if systemctl and not host.chrooted:
        rc, out, _err = host.run([systemctl, "is-active", _FABRIC_MANAGER_UNIT])
        facts["service"] = first_line(out) or ("active" if rc == 0 else "unknown")
    probes.ok("fabric_manager", "version %s (%s), service %s" % (facts["version"], facts["version_source"],
                                                                 facts["service"]))
    return facts
