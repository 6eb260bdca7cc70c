# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cdi_spec module's job: NVIDIA's ``nvidia-ctk cdi generate`` writes the spec, the guard keeps it right.

``method=module``: nvidia-ctk (package ``nvidia-container-toolkit-base``, which the toolkit role
installs and whose ``nvidia-cdi-hook`` the spec's hooks run anyway) writes into a temporary file;
the spec is guarded (``runtime/cdi.py``), compared with the file and written with common.io's
atomic writer only where it differs, so check mode, diff mode and a second run that changes
nothing work as for any file. ``method=toolkit``: the toolkit's own refresh units write
``/var/run/cdi/nvidia.yaml``; their state and their spec are guarded, and repaired with
``systemctl reset-failed`` and a restart (``runtime/cdi_refresh.py``).

What stays in Python is what nvidia-ctk does not do: the guard, the comparison with the file, the
file's mode, and the repair of the units. nvidia-ctk finds the driver's files, names the devices
(MIG ones too) and validates the spec.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
import tempfile

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import io as safe_io
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi, cdi_refresh

NVIDIA_CTK = "/usr/bin/nvidia-ctk"
DEFAULT_HOOK_PATH = "/usr/bin/nvidia-cdi-hook"
DEFAULT_FILE_MODE = "0644"
HOOK_NAMES = ("create-symlinks", "enable-cuda-compat", "update-ldcache", "disable-device-node-modification",
              "update-application-profile")
#: device_name_strategy -> nvidia-ctk's --device-name-strategy values.
DEVICE_NAME_STRATEGIES = {"index": ("index",), "uuid": ("uuid",), "both": ("index", "uuid")}

#: The bits a spec's mode must not have: its hooks run as root, so no one else may write it
#: (group and world write), and a spec is no program (setuid, setgid, sticky).
FORBIDDEN_MODE_BITS = 0o7022
MODE_WORDS = (
    "a file mode (octal, e.g. 0644, or symbolic, e.g. u=rw,g=r,o=r) that is not writable by the group or the world "
    "and has no setuid, setgid or sticky bit (the spec's hooks run as root)"
)
#: The options that are host paths: absolute, without '.' or '..' parts.
PATH_OPTIONS = ("driver_root", "dev_root", "nvidia_cdi_hook_path", "nvidia_ctk")
PATH_WORDS = "an absolute path (starting with '/', without '.' or '..' parts or control characters)"
_LOG_RE = re.compile(r'level=(\w+) msg="((?:[^"\\]|\\.)*)"')


def generate_argv(params, output) -> list:
    """``nvidia-ctk cdi generate`` for the module's options, writing ``output``."""
    argv = [params["nvidia_ctk"], "cdi", "generate", "--output=%s" % output, "--driver-root=%s" % params["driver_root"],
            "--dev-root=%s" % params["dev_root"], "--nvidia-cdi-hook-path=%s" % params["nvidia_cdi_hook_path"]]
    argv += ["--device-name-strategy=%s" % s for s in DEVICE_NAME_STRATEGIES[params["device_name_strategy"]]]
    return argv + ["--disable-hook=%s" % h for h in params["disabled_hooks"] or ()]


def generate(host, params, output) -> str:
    """The text of the spec nvidia-ctk writes for the node (into a temporary file), the module's header added to YAML."""
    if not host.is_executable(params["nvidia_ctk"]):
        raise GpuFleetError("cdi_spec: %s is not installed, and it writes the spec: install the NVIDIA Container Toolkit "
                            "(nvidia-container-toolkit-base) first, or set nvidia_ctk" % params["nvidia_ctk"])
    folder = tempfile.mkdtemp(prefix="cdi-", dir=host.tmpdir)
    temp = posixpath.join(folder, "nvidia" + (".json" if output.endswith(".json") else ".yaml"))
    argv = generate_argv(params, temp)
    rc, out, err = host.run(argv)
    text = safe_io.read_file(temp)
    if rc != 0 or text is None:
        errors = [m.replace('\\"', '"') for level, m in _LOG_RE.findall(err or "") if level in ("error", "fatal")]
        raise GpuFleetError("cdi_spec: `%s` failed (rc %s): %s" % (" ".join(argv), rc, "; ".join(errors) or (err or out).strip()[-2000:]),
                            rc=rc, stderr=(err or "")[-4000:])
    if output.endswith(".json"):
        return text
    body = text[4:] if text.startswith("---\n") else text
    return "---\n%s (driver %s); local changes are overwritten.\n%s" % (cdi.HEADER, cdi.spec_driver_version(text) or "unknown", body)


def _plain(path: str) -> bool:
    """No ``.`` or ``..`` part, no control character."""
    return not any(part in (".", "..") for part in path.split("/")) and not any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path)


def absolute_path(value):
    """A host path the spec or the module uses as it is: absolute, no ``.``/``..`` part, no control character."""
    if not isinstance(value, str) or not value.startswith("/") or not _plain(value):
        raise inputs.Invalid(PATH_WORDS)
    return value


def check_output_path(path: str) -> None:
    if not path.startswith("/"):
        raise GpuFleetError("cdi_spec: output %r must be an absolute path" % path)
    if not _plain(path):
        raise GpuFleetError("cdi_spec: output %r must be an absolute path without '.' or '..' parts or control characters" % path)
    if not (path.endswith(".yaml") or path.endswith(".json")):
        raise GpuFleetError(
            "cdi_spec: output %r must end in .yaml or .json (the CDI registry reads only those)" % path
        )


class _ModeBase(object):
    """What a symbolic mode is applied to: the spec's mode now, or a new file's 0644."""

    def __init__(self, mode):
        self.st_mode = stat.S_IFREG | mode


def spec_mode(value, base=0o644, symbolic=None):
    """The mode a spec may have (a number), from an octal number or string, or a symbolic mode applied to ``base``.

    ``symbolic(stat, text)``: Ansible's parser of symbolic modes (``AnsibleModule._symbolic_mode_to_octal``).
    """
    if isinstance(value, str) and value[:1].isalpha() and symbolic is not None:
        try:  # Ansible's parser raises ValueError, and other errors for odd input
            value = symbolic(_ModeBase(base), value)
        except Exception:  # pylint: disable=broad-except
            raise inputs.Invalid(MODE_WORDS)
    try:
        return inputs.file_mode(value, forbid=FORBIDDEN_MODE_BITS)
    except inputs.Invalid:
        raise inputs.Invalid(MODE_WORDS)


def check_params(module, path: str) -> None:
    """The output, the host paths and the mode checked before anything is read or written (check mode too)."""
    check_output_path(path)
    for option in PATH_OPTIONS:
        if module.params.get(option) is not None:
            inputs.checked("cdi_spec: %s" % option, absolute_path, module.params[option])
    mode = module.params.get("mode")
    if mode is not None:
        try:
            base = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            base = int(DEFAULT_FILE_MODE, 8)
        inputs.checked("cdi_spec: mode", lambda value: spec_mode(value, base, module._symbolic_mode_to_octal), mode)
    if module.params["method"] == "toolkit" and module.params["state"] == "absent":
        raise GpuFleetError("cdi_spec: state absent removes the spec this module writes (method module); the toolkit's "
                            "units keep %s: disable nvidia-cdi-refresh.path to stop them" % cdi.TOOLKIT_SPEC)


def write_spec(module, path: str, text: str) -> None:
    """Write the spec with common.io's atomic writer (an existing file keeps its mode), in cdi_spec's words on failure."""
    try:
        safe_io.write_file(module, path, text)
    except GpuFleetError as exc:
        cause = exc.__context__ or exc.msg  # the OSError that common.io reports
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            raise GpuFleetError("cdi_spec: cannot create %s: %s" % (folder, cause), path=path)
        raise GpuFleetError("cdi_spec: cannot write a temporary file in %s: %s" % (module.tmpdir, cause))


def remove_spec(module, path: str) -> None:
    """Remove the spec with common.io, in cdi_spec's words on failure."""
    try:
        safe_io.remove_file(module, path)
    except GpuFleetError as exc:
        raise GpuFleetError("cdi_spec: cannot remove %s: %s" % (path, exc.__context__ or exc.msg), path=path)


def run(module):
    """The module's whole job; returns the exit_json dict or raises GpuFleetError."""
    params = module.params
    path = cdi.TOOLKIT_SPEC if params["method"] == "toolkit" else params["output"]
    check_params(module, path)
    host = Host.for_module(module, dev_root=params["dev_root"])
    current = host.read(path)
    if params["state"] == "absent":
        if current is not None and not module.check_mode:
            remove_spec(module, path)
        changed, after, found = current is not None, None, dict(devices=[], counts={}, spec={}, problems=[], repairs=[])
    elif module.check_mode and _not_installed(module, host):
        changed, after, found = True, current, dict(devices=[], counts={}, spec={}, problems=[], repairs=[])
    else:
        cdi.require_yaml()
        converge = _converge_toolkit if params["method"] == "toolkit" else _converge_module
        changed, after, found = converge(module, host, path, current)
    result = dict(found, changed=changed, path=path)
    if module._diff:
        result["diff"] = {"before": current or "", "after": after or "", "before_header": path, "after_header": path}
    return result


def _not_installed(module, host) -> bool:
    """In check mode, where the role's run would install them first: PyYAML or nvidia-ctk missing is a change to come."""
    missing = [] if cdi.HAS_YAML else ["PyYAML"]
    if module.params["method"] == "module" and not host.is_executable(module.params["nvidia_ctk"]):
        missing.append(module.params["nvidia_ctk"])
    if missing:
        module.warn("check mode: %s not installed yet, so the spec cannot be predicted; a real run writes it once %s"
                    % (" and ".join(missing), "they are" if len(missing) > 1 else "it is"))
    return bool(missing)


def _converge_module(module, host, path, current) -> tuple:
    """``(changed, text after, result)``: nvidia-ctk's spec, guarded, written where it differs, its mode set."""
    desired = generate(host, module.params, path)
    _fail_on(cdi.spec_problems(host, path, desired) + cdi.shadow_problems(host, path, desired, module.warn))
    changed = desired != current
    if changed and not module.check_mode:
        write_spec(module, path, desired)
    mode = module.params["mode"]
    if mode is None and current is None:
        mode = DEFAULT_FILE_MODE
    if mode is not None and (os.path.exists(path) or not module.check_mode):
        changed = module.set_mode_if_different(path, mode, changed)
    params = module.params
    if not os.path.exists(params["nvidia_cdi_hook_path"]) and set(params["disabled_hooks"] or ()) != {"all"}:
        module.warn("%s does not exist: containers given these CDI devices will fail to start until the NVIDIA "
                    "Container Toolkit (nvidia-cdi-hook) is installed" % params["nvidia_cdi_hook_path"])
    return changed, desired, _found(module, path, desired, [], [])


def _converge_toolkit(module, host, path, current) -> tuple:
    """``(changed, text after, result)``: the toolkit's spec and units guarded, and repaired where they need it."""
    units = cdi_refresh.read_units(host)
    problems = cdi_refresh.check_units(units) + cdi.spec_problems(host, path, current)
    changed = bool(problems) or module.params["refresh"]
    after, repairs = current, []
    if changed and not module.check_mode:
        repairs = cdi_refresh.repair_units(host, units)
        after = host.read(path)
        left = cdi_refresh.check_units(cdi_refresh.read_units(host)) + cdi.spec_problems(host, path, after)
        if left:
            raise GpuFleetError("cdi_spec: %s still fails its guard after %s: %s" % (path, "; ".join(repairs), "; ".join(left)),
                                problems=left, repairs=repairs)
    if after is not None:
        _fail_on(cdi.shadow_problems(host, path, after, module.warn))
    return changed, after, _found(module, path, after, problems, repairs)


def _fail_on(problems) -> None:
    if problems:
        raise GpuFleetError("cdi_spec: the CDI spec does not match this node: %s" % "; ".join(problems), problems=problems)


def _found(module, path, text, problems, repairs) -> dict:
    """The module's result for the spec ``text`` (None: there is none); warns when it gives containers no nvidia-uvm."""
    data = cdi.parse_spec(text, path) if text is not None else {"devices": []}
    if text is not None and cdi.UVM_NODE not in [n["path"] for n in cdi.nodes_of(data.get("containerEdits") or {})]:
        module.warn("%s gives containers no %s, and CUDA fails in them without it: create it (nvidia-modprobe -u -c=0) "
                    "and run this again" % (path, cdi.UVM_NODE))
    return dict(devices=cdi.device_names(data), counts=cdi.counts(data) if text is not None else {},
                driver_version=cdi.spec_driver_version(text), spec=data if text is not None else {},
                problems=problems, repairs=repairs)
