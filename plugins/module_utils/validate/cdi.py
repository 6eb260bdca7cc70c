# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host validation's check of CDI: where it is enabled (by the runtime's config, the toolkit's
``mode = "cdi"``, a spec on disk, or the caller) a spec of kind ``nvidia.com/gpu`` parses, names
every GPU and was written for the loaded driver. The specs are read with a YAML subset reader
(the node may have no PyYAML).
"""

from __future__ import annotations

import json
import posixpath
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig as _dig, plural as _plural
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.container import TOOLKIT_CONFIG
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.day2 import toolkit_mode
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import (
    FAILED,
    OK,
    SKIPPED,
    _read,
)

CDI_MODES = ("auto", "enabled", "disabled")
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
CDI_KIND = "nvidia.com/gpu"
_YAML_TOP = re.compile(r"^([A-Za-z_][\w.-]*)\s*:\s*(.*?)\s*$")
_YAML_ITEM_NAME = re.compile(r"^name\s*:\s*(.*?)\s*$")


def _yaml_scalar(text):
    text = text.split(" #", maxsplit=1)[0].strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def parse_cdi_yaml_subset(text):
    """``kind``, ``cdiVersion`` and device names of a block-style YAML CDI spec, without PyYAML."""
    reader = _CdiYamlReader()
    for number, line in _yaml_lines(text):
        if not line[0].isspace() and not line.startswith("-"):
            reader.top_level(number, line)
        else:
            reader.nested(line)
    return reader.spec


def _yaml_lines(text):
    """``(number, line)`` of the lines that carry content; ValueError for a tab in the indentation."""
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#") or line.strip() == "---":
            continue
        if "\t" in line[: len(line) - len(line.lstrip())]:
            raise ValueError("line %d: a tab in the indentation" % number)
        yield number, line


class _CdiYamlReader(object):
    """What :func:`parse_cdi_yaml_subset` has read: the top-level keys, and under ``devices`` the
    name of each item (``items_at``: the indent of the list's dashes)."""

    def __init__(self):
        self.spec = {}
        self.devices = None
        self.items_at = None

    def top_level(self, number, line):
        match = _YAML_TOP.match(line)
        if not match:
            raise ValueError("line %d: expected 'key: value', got %r" % (number, line[:60]))
        key, value = match.group(1), match.group(2)
        if key == "devices":
            self.devices = []
            self.spec["devices"] = self.devices
            self.items_at = None
        else:
            self.devices = None
            self.spec[key] = _yaml_scalar(value) if value else {}

    def nested(self, line):
        """An indented (or list) line: under ``devices``, a new item or an item's ``name``."""
        if self.devices is None:
            return
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if stripped.startswith("- "):
            if self.items_at is None:
                self.items_at = indent
            if indent == self.items_at:
                self.devices.append({})
                stripped = stripped[2:].lstrip()
                indent += 2
        if self.devices and self.items_at is not None and indent == self.items_at + 2:
            match = _YAML_ITEM_NAME.match(stripped)
            if match:
                self.devices[-1]["name"] = _yaml_scalar(match.group(1))


def parse_cdi_spec(text, path):
    """A CDI spec as data: JSON, PyYAML where the node has it, else the block-YAML subset reader."""
    if path.endswith(".json"):
        return json.loads(text)
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:
        return parse_cdi_yaml_subset(text)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(str(exc).replace("\n", " "))


_LIBCUDA_VERSION = re.compile(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)?)")


def read_cdi_specs(host, dirs):
    """Every spec file in ``dirs``: ``{path, kind, devices, driver_version, error}``."""
    specs = []
    for directory in dirs:
        specs.extend(_cdi_dir_specs(host, directory))
    return specs


def _cdi_entry(path, error=None):
    return {"path": path, "kind": None, "devices": [], "driver_version": None, "error": error}


def _cdi_dir_specs(host, directory):
    """The specs of one directory; another's spec that does not parse is left out (not ours to judge)."""
    if not host.isdir(directory):
        return []
    try:
        names = host.listdir(directory)
    except OSError as exc:
        return [_cdi_entry(directory, str(exc))]
    specs = []
    for name in names:
        if name.endswith((".yaml", ".yml", ".json")):
            entry, read = _cdi_file(host, posixpath.join(directory, name))
            if not read or not entry["error"] or "nvidia" in name or entry["kind"] is not None:
                specs.append(entry)
    return specs


def _cdi_file(host, path):
    """``(entry, read)``: one spec file as :func:`read_cdi_specs` lists it, and whether it could be read."""
    entry = _cdi_entry(path)
    text, error = _read(host, path)
    if error:
        entry["error"] = error
        return entry, False
    try:
        _read_cdi_data(entry, parse_cdi_spec(text, path))
    except ValueError as exc:
        entry["error"] = "%s does not parse as a CDI spec: %s" % (path, str(exc)[:200])
    match = _LIBCUDA_VERSION.search(text)
    entry["driver_version"] = match.group(1) if match else None
    return entry, True


def _read_cdi_data(entry, data):
    """The kind and device names of a parsed spec into ``entry``; ValueError for what is no CDI spec."""
    if not isinstance(data, dict):
        raise ValueError("not a mapping")
    if not data.get("cdiVersion"):
        raise ValueError("no cdiVersion")
    devices = data.get("devices")
    if not isinstance(devices, list) or not devices:
        raise ValueError("no devices")
    entry["kind"] = data.get("kind")
    entry["devices"] = [str(d.get("name")) for d in devices if isinstance(d, dict) and d.get("name") is not None]
    if len(entry["devices"]) != len(devices):
        raise ValueError("a device without a name")


def check_cdi(checks, host, facts, mode, dirs, runtime):
    """The CDI check, where CDI is enabled: a spec of kind nvidia.com/gpu parses, was written for
    the loaded driver and names every GPU. Returns what the result says of CDI."""
    if mode == "disabled":
        checks.add("cdi", SKIPPED, "CDI spec: not checked (cdi disabled)")
        return {"enabled": False, "why": [], "specs": []}
    why = _cdi_enabled_by(host, mode, runtime)
    ours = [s for s in read_cdi_specs(host, dirs) if s["kind"] == CDI_KIND or (s["kind"] is None and s["error"])]
    if ours and not why:
        why.append("a spec is installed")
    status, msg = _cdi_verdict(facts, why, ours, dirs)
    checks.add("cdi", status, msg)
    return {"enabled": bool(why), "why": why, "specs": ours}


def _cdi_enabled_by(host, mode, runtime):
    """What enables CDI on the node: the caller, the runtime's config, the toolkit's mode."""
    why = []
    if mode == "enabled":
        why.append("declared enabled")
    if runtime.get("cdi"):
        why.append("%s enables CDI" % runtime.get("name"))
    if toolkit_mode(host) == "cdi":
        why.append('%s has mode = "cdi"' % TOOLKIT_CONFIG)
    return why


def _cdi_verdict(facts, why, ours, dirs):
    """``(status, msg)`` of the CDI check from the reasons it is enabled and our specs."""
    if not why:
        return SKIPPED, "CDI spec: not checked: CDI is not enabled and no spec is installed"
    if not ours:
        return FAILED, "CDI is enabled (%s) but no spec of kind %s is in %s" % ("; ".join(why), CDI_KIND, ", ".join(dirs))
    broken = [s["error"] for s in ours if s["error"]]
    if broken:
        return FAILED, "; ".join(broken)
    loaded = _dig(facts, "driver", "version")
    stale = [s for s in ours if loaded and s["driver_version"] and s["driver_version"] != loaded]
    if stale:
        return FAILED, "%s was written for driver %s, the loaded driver is %s: regenerate it" % (
            stale[0]["path"], stale[0]["driver_version"], loaded)
    names = set()
    for spec in ours:
        names.update(spec["devices"])
    missing, total = _cdi_missing(facts, names)
    paths = ", ".join(s["path"] for s in ours)
    if missing:
        return FAILED, "%s names no device for %s" % (paths, ", ".join(missing))
    return OK, "%s names all %s" % (paths, _plural(total, "GPU"))


def _cdi_missing(facts, names):
    """``(missing, total)``: the GPUs that no device of the specs (``names``) names, of how many;
    by index or UUID where nvidia-smi answers, else by count (a spec of PCI bus ids or ``all`` counts none)."""
    smi = _dig(facts, "driver", "nvidia_smi") or {}
    if smi.get("state") == "ok" and smi.get("gpus"):
        missing = [
            "GPU %s (%s)" % (gpu.get("index"), gpu.get("uuid"))
            for gpu in smi["gpus"]
            if str(gpu.get("index")) not in names and gpu.get("uuid") not in names
        ]
        return missing, len(smi["gpus"])
    total = facts.get("gpu_count") or 0
    listed = [n for n in names if n != "all" and ":" not in n and not n.startswith(("GPU-", "MIG-"))]
    if len(listed) < total:
        return ["%d of %d GPUs" % (total - len(listed), total)], total
    return [], total
