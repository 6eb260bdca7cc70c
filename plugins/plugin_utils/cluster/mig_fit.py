# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a node's MIG config fits the GPUs that discovery found on it.

A mig-parted config is a list of entries ``{devices: all | [indices], mig-enabled: bool,
mig-devices: {profile: count}}``. A config fits a node when every GPU it enables MIG on can do
MIG (nvidia-smi reports a MIG mode for it, not N/A), every index it names exists, and each
profile ``<g>g.<m>gb`` is one of the GPU's: a MIG GPU is cut into eight memory slices and seven
compute slices, so a profile's memory is one, two, four or eight eighths of the GPU's memory
(H100 80 GB: 1g.10gb, 1g.20gb, 3g.40gb, 7g.80gb; H200: 1g.18gb, 1g.35gb, 3g.71gb, 7g.141gb),
and the instances of one GPU use at most seven compute slices and its memory. The GPU
Operator's own configs are named after their profile (``all-1g.10gb``) and are read the same way.
"""

from __future__ import annotations

import re

_PROFILE = re.compile(r"^([0-9]+)g\.([0-9]+)gb(\+[a-z0-9]+)*$")
_DEFAULT_CONFIG = re.compile(r"^all-([0-9]+g\.[0-9]+gb(\+[a-z0-9]+)*)$")
# The operator's default configs that name no single profile.
_DEFAULT_NAMED = {
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
    "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    "all-balanced": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
}
COMPUTE_SLICES = 7


def config_entries(name, configs):
    """The entries of config ``name``: the role's own, or one of the operator's defaults; None
    when the name is neither."""
    if name in (configs or {}):
        return configs[name]
    if name in _DEFAULT_NAMED:
        return _DEFAULT_NAMED[name]
    match = _DEFAULT_CONFIG.match(name)
    if match:
        return [{"devices": "all", "mig-enabled": True, "mig-devices": {match.group(1): 1}}]
    return None


def _profile_fits(profile, memory_gib):
    match = _PROFILE.match(str(profile))
    if not match:
        return False, "is not a MIG profile (expected <compute>g.<memory>gb, e.g. 1g.10gb)"
    compute, memory = int(match.group(1)), int(match.group(2))
    sizes = [memory_gib * k / 8.0 for k in (1, 2, 4, 8)]
    if compute > COMPUTE_SLICES or not any(abs(memory - size) <= max(1.5, 0.05 * size) for size in sizes):
        return False, "is not a profile of a GPU with %.0f GiB (its profiles have %s GB)" % (
            memory_gib, ", ".join("%.0f" % s for s in sizes))
    return True, (compute, memory)


def _selected(devices, count):
    if devices == "all":
        return list(range(count)), []
    if isinstance(devices, int) and not isinstance(devices, bool):
        devices = [devices]
    if not isinstance(devices, (list, tuple)):
        return [], ["devices %r is not 'all' or a list of GPU indices" % (devices,)]
    bad = [d for d in devices if not isinstance(d, int) or isinstance(d, bool) or d < 0 or d >= count]
    return [d for d in devices if d not in bad], ["GPU index %r does not exist (the node has %d GPUs)" % (d, count) for d in bad]


def _gpu_problems(gpu, index, entry):
    where = "GPU %d (%s)" % (index, gpu.get("name") or "unknown")
    if not gpu.get("mig_capable"):
        return ["%s cannot do MIG (%s)" % (where, gpu.get("mig_why") or "nvidia-smi reports its MIG mode as N/A")]
    memory_mib = gpu.get("memory_total_mib")
    devices = entry.get("mig-devices") or {}
    if not memory_mib or not isinstance(devices, dict):
        return []
    memory_gib = memory_mib / 1024.0
    problems, compute_used, memory_used = [], 0, 0
    for profile, count in sorted(devices.items(), key=lambda item: str(item[0])):
        ok, detail = _profile_fits(profile, memory_gib)
        if not ok:
            problems.append("%s: profile %s %s" % (where, profile, detail))
            continue
        number = count if isinstance(count, int) and not isinstance(count, bool) else 0
        compute_used += detail[0] * number
        memory_used += detail[1] * number
    if compute_used > COMPUTE_SLICES:
        problems.append("%s: the profiles use %d compute slices (a GPU has %d)" % (where, compute_used, COMPUTE_SLICES))
    if memory_used > memory_gib * 1.08:
        problems.append("%s: the profiles use %d GB of memory (the GPU has %.0f GiB)" % (where, memory_used, memory_gib))
    return problems


def fit(config_name, entries, gpus):
    """Problems of config ``config_name`` on a node whose nvidia-smi GPUs are ``gpus``."""
    problems = []
    for entry in entries or []:
        if not isinstance(entry, dict) or not entry.get("mig-enabled"):
            continue
        indices, bad = _selected(entry.get("devices", "all"), len(gpus))
        problems += bad
        for index in indices:
            problems += _gpu_problems(gpus[index], index, entry)
    return ["MIG config '%s': %s" % (config_name, p) for p in problems]
