# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the containerd editors (``runtime.containerd``, ``runtime.k3s``) are asked for and what they read.

The options (:class:`ContainerdOptions`), the configuration's version and the CRI plugin table it
names, the runtime table the module writes (a copy of the default runtime's), the shape of what is
read (a refusal naming the file and the key, never a traceback), and the checks every plan ends with.
"""

from __future__ import annotations

import copy
import dataclasses
import os

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import deep_merge, dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.edit import is_table, toml_data, without_empty
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.files import check_handler_name
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.managed import unwrap
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.toml_edit import check_edited_toml

RUNC_TYPE = "io.containerd.runc.v2"
DEFAULT_BINARY = "/usr/bin/nvidia-container-runtime"
DEFAULT_CONFIG = "/etc/containerd/config.toml"
DEFAULT_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"

#: CRI plugin table by config version.
CRI_PLUGINS = {
    1: "cri",
    2: "io.containerd.grpc.v1.cri",
    3: "io.containerd.cri.v1.runtime",
    4: "io.containerd.cri.v1.runtime",
}


#: Names under which ``disabled_plugins`` can switch the CRI plugin off.
CRI_PLUGIN_NAMES = (
    "cri",
    "io.containerd.grpc.v1.cri",
    "io.containerd.cri.v1.runtime",
    "io.containerd.cri.v1.images",
)


@dataclasses.dataclass
class ContainerdOptions:
    """The settings that decide what the containerd editor writes (the module's argument spec checked them).

    ``import_order``: every file containerd merges after the main file, in its order, the drop-in among
    them (None: the other files of the drop-in's folder, sorted, the drop-in in its place).
    """

    state: str = "present"
    mode: str = "dropin"
    runtime_name: str = "nvidia"
    binary_name: str = DEFAULT_BINARY
    set_as_default: bool = False
    enable_cdi: bool = False
    enable_cri: bool = False
    dropin_path: str = DEFAULT_DROPIN
    import_glob: str = None
    config_version: int = None
    containerd_major: int = None
    other_dropins: list = ()
    containerd_version: str = None
    import_order: list = None

    def __post_init__(self) -> None:
        check_handler_name(self.runtime_name, ("runc",))
        self.set_as_default, self.enable_cdi, self.enable_cri = bool(self.set_as_default), bool(self.enable_cdi), bool(self.enable_cri)
        self.import_glob = self.import_glob or os.path.join(os.path.dirname(self.dropin_path), "*.toml")
        if self.containerd_major is None and self.containerd_version:
            self.containerd_major = int(str(self.containerd_version).split(".", 1)[0])
        self.other_dropins = list(self.other_dropins or ())
        self.import_order = list(self.import_order) if self.import_order else None

    def version_below(self, major: int, minor: int) -> bool:
        """Whether the containerd found is older than ``major.minor`` (unknown: no)."""
        try:
            parts = [int(p) for p in str(self.containerd_version).split(".")[:2]]
        except ValueError:
            return False
        return len(parts) == 2 and tuple(parts) < (major, minor)


def _has_v1_content(doc) -> bool:
    """Whether a file without ``version`` relies on version-1 plugin names."""
    plugins = doc.get("plugins")
    if plugins is not None and is_table(plugins):
        if any("." not in str(k) for k in unwrap(plugins).keys()):
            return True
    for key in ("disabled_plugins", "required_plugins"):
        names = unwrap(doc.get(key)) or []
        if isinstance(names, list) and any("." not in str(n) and n != "cri" for n in names):
            return True
    return False


def detect_version(doc, containerd_major=None, override=None, path=None):
    """``(version, source)``: from the file, else version-1 content, else the binary.

    ``source`` is ``file`` when the file says it, ``v1`` when the file has version-1
    plugin names, otherwise ``option``, ``containerd`` or ``default`` and the version must
    be written into the file. ``path``: the file, named in a refusal.
    """
    if "version" in doc:
        version = unwrap(doc["version"])
        # An integer, as containerd reads it ("Can't convert 2(float64) to int", also for true and "2").
        if isinstance(version, bool) or not isinstance(version, int) or version not in CRI_PLUGINS:
            raise GpuFleetError(
                "%sunsupported containerd config version %r (expected 1, 2, 3 or 4)"
                % ("%s: " % path if path else "", unwrap(doc["version"])),
                path=path,
            )
        return version, "file"
    if _has_v1_content(doc):
        return 1, "v1"
    if override is not None:
        return int(override), "option"
    if containerd_major is not None:
        return (3 if int(containerd_major) >= 2 else 2), "containerd"
    return 2, "default"


def check_version_fits(path, version, source, opts) -> None:
    """Refuse a config version the installed containerd would not load the handler from.

    containerd 2.x maps no version 1 plugin table (``plugins.cri``, also a file without
    ``version`` that uses it): it starts, without the handler. containerd 1.x knows versions
    1 and 2 only and reads a version 3 or 4 file as its defaults. Either way the file loads and
    the runtime is not there: refused before anything is planned (unknown version: no check).
    """
    major = opts.containerd_major
    if major is None or opts.state != "present":
        return
    if int(major) >= 2 and version == 1:
        why = "containerd %s does not read the version 1 CRI table plugins.cri%s" % (
            opts.containerd_version or "2.x", " (a file without version that uses it is version 1)" if source == "v1" else "")
        fix = "migrate it (containerd config migrate) to version 3"
    elif int(major) < 2 and version >= 3:
        why = "containerd %s knows config versions 1 and 2 only (version %d is containerd 2.x's)" % (
            opts.containerd_version or "1.x", version)
        fix = "write it as version 2"
    else:
        return
    raise GpuFleetError(
        "%s: config version %d does not fit the installed containerd: %s, so the nvidia runtime would not "
        "be loaded; %s; nothing was written" % (path, version, why, fix),
        path=path,
        config_version=version,
    )


def plugin_path(version: int):
    return ("plugins", CRI_PLUGINS[version])


def toml_path_str(path) -> str:
    """A key path as TOML writes it in a header (``plugins."io.containerd.grpc.v1.cri"``)."""
    out = []
    for key in path:
        out.append(key if key.replace("_", "").replace("-", "").isalnum() else '"%s"' % key)
    return ".".join(out)


def _pick_source(runtimes: dict, name: str, preferred) -> tuple:
    """The runtime whose settings the new handler copies: ``(name, table)``."""
    for candidate in list(preferred) + ["runc", "crun"]:
        if not candidate or candidate == name:
            continue
        table = runtimes.get(candidate)
        if isinstance(table, dict) and table.get("runtime_type", RUNC_TYPE) == RUNC_TYPE:
            return candidate, table
    return None, {}


def runtimes_of(cri: dict) -> tuple:
    containerd = cri.get("containerd") if isinstance(cri.get("containerd"), dict) else {}
    runtimes = containerd.get("runtimes") if isinstance(containerd.get("runtimes"), dict) else {}
    return containerd, runtimes


def desired_runtime(cri: dict, opts: ContainerdOptions, original_default=None, existing=None) -> tuple:
    """``(source name, table)`` the ``runtimes.<name>`` table must hold.

    ``cri`` is the CRI plugin table the source runtime is taken from; ``original_default``
    the default runtime before the module changed it (so that a second run copies the same
    runtime as the first); ``existing`` the handler's current table (its other keys stay).
    """
    containerd, runtimes = runtimes_of(cri)
    preferred = [original_default] if original_default else [containerd.get("default_runtime_name")]
    source_name, source = _pick_source(runtimes, opts.runtime_name, preferred)
    if existing is None:
        existing = runtimes.get(opts.runtime_name)
    table = deep_merge(existing if isinstance(existing, dict) else {}, copy.deepcopy(source))
    table = deep_merge(table, {"runtime_type": RUNC_TYPE, "options": {"BinaryName": opts.binary_name}})
    return source_name, table


#: ``(key path below the CRI table, what it must be)`` of the tables the editor walks.
_CRI_SHAPES = (
    (("containerd",), "table"),
    (("containerd", "runtimes"), "table"),
    (("containerd", "default_runtime_name"), "string"),
    (("containerd", "default_runtime"), "table"),
    (("enable_cdi",), "boolean"),
)


_KINDS = {"table": dict, "string": str, "list of strings": list, "boolean": bool}


def _shape_error(path, key_path, kind, value):
    return GpuFleetError(
        "%s: %s must be a %s, found %s %r; the file was left untouched"
        % (path, toml_path_str(key_path), kind, type(value).__name__, value),
        path=path,
        key=toml_path_str(key_path),
    )


def _check_kind(path, key_path, value, kind) -> None:
    """Refuse ``value`` (a plain value at ``key_path``) when it is not of ``kind``."""
    if value is None:
        return
    if not isinstance(value, _KINDS[kind]) or (kind == "list of strings" and not all(isinstance(v, str) for v in value)):
        raise _shape_error(path, key_path, kind, value)


def check_shape(data, path, cri_path) -> None:
    """Refuse a file whose keys the editor reads are not of the type containerd takes.

    ``data``: the file as plain values. The top-level lists, the plugin tables, the CRI table
    of ``cri_path``, its ``containerd`` table, the runtimes and each runtime's ``options``.
    """
    for key in ("imports", "disabled_plugins", "required_plugins"):
        _check_kind(path, [key], data.get(key), "list of strings")
    _check_kind(path, ["plugins"], data.get("plugins"), "table")
    plugins = data.get("plugins") or {}
    for name in CRI_PLUGINS.values():
        _check_kind(path, ["plugins", name], plugins.get(name), "table")
    cri = plugins.get(cri_path[1]) or {}
    for sub, kind in _CRI_SHAPES:
        _check_kind(path, list(cri_path) + list(sub), dig(cri, *sub), kind)
    runtimes = dig(cri, "containerd", "runtimes") or {}
    for name, table in runtimes.items():
        _check_kind(path, list(cri_path) + ["containerd", "runtimes", name], table, "table")
        _check_kind(path, list(cri_path) + ["containerd", "runtimes", name, "options"], table.get("options"), "table")


def check_default_table(cri: dict, path, cri_path, opts) -> None:
    """Refuse ``set_as_default`` while a ``containerd.default_runtime`` table names a runtime:
    containerd 1.x uses that (deprecated) table as the default, whatever ``default_runtime_name`` says."""
    table = dig(cri, "containerd", "default_runtime") or {}
    if opts.set_as_default and opts.state == "present" and (table.get("runtime_type") or table.get("runtime_engine")):
        key = toml_path_str(list(cri_path) + ["containerd", "default_runtime"])
        raise GpuFleetError(
            "%s: %s is set, and containerd uses that table as its default runtime before "
            "default_runtime_name: set_as_default could not make %s the default. Remove the table "
            "(default_runtime_name names the default since containerd 1.3); nothing was written"
            % (path, key, opts.runtime_name),
            path=path,
            key=key,
        )


def facts(version, cri_path, opts, **more) -> dict:
    facts = {
        "config_version": version,
        "plugin_table": toml_path_str(cri_path),
        "runtime_table": toml_path_str(list(cri_path) + ["containerd", "runtimes", opts.runtime_name]),
    }
    facts.update(more)
    return facts


def _strip(tree: dict, paths) -> dict:
    tree = copy.deepcopy(tree)
    for path in paths:
        node = tree
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
            if node is None:
                break
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return tree


def check_unrelated(path, before, after, cri_path, name) -> None:
    """Refuse to write if anything but the keys this module manages would change."""
    if after is None:
        return
    check_edited_toml(path, before, after, list(cri_path) + ["containerd", "runtimes", name])
    new = toml_data(after)
    old = toml_data(before) if before else {}
    managed = [
        ["version"],
        ["imports"],
        ["disabled_plugins"],
        list(cri_path) + ["enable_cdi"],
        list(cri_path) + ["containerd", "default_runtime_name"],
        list(cri_path) + ["containerd", "runtimes", name],
        list(cri_path) + ["containerd", "runtimes", "runc"],
    ]
    if without_empty(_strip(old, managed)) != without_empty(_strip(new, managed)):
        raise GpuFleetError(
            "internal error: editing %s would change settings the module does not manage; "
            "nothing was written" % path
        )
