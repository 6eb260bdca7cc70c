# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU containers that lose their GPUs after ``systemctl daemon-reload``, and the toolkit's fix.

"Failed to initialize NVML: Unknown Error" in a running GPU container after a daemon-reload
(NVIDIA/nvidia-docker#1730, NVIDIA's notice): when systemd manages the container's cgroup, a
reload makes systemd apply the unit's device rules again, and runc writes those rules from the
device paths it can find under ``/dev/char/<major>:<minor>``. The legacy NVIDIA hook adds the GPU
device nodes inside the container without runc knowing them, so without those ``/dev/char``
links the reload drops the container's access to them.

It happens where both hold:

* the runtime's containers run under the systemd cgroup driver: containerd (and k3s / RKE2)
  with ``SystemdCgroup = true`` in the nvidia runtime's options (else the default runtime's),
  CRI-O with ``cgroup_manager = "systemd"`` (its default), Docker with
  ``native.cgroupdriver=systemd`` (its default on cgroup v2);
* the devices reach the container through the legacy hook: the toolkit's runtime in ``legacy``
  mode (``auto`` is legacy before toolkit 1.18, ``jit-cdi`` from 1.18 on), and on Docker also
  every ``docker run --gpus``, which calls the hook directly. In CDI and JIT-CDI modes the
  device nodes are in the container's OCI spec, so runc knows them and the reload keeps them.

The toolkit's fix (NVIDIA's notice): create the links with
``nvidia-ctk system create-dev-char-symlinks --create-all`` and keep them with a udev rule that
runs the same command whenever the driver binds. Nodes where it does not happen are left alone.

nvidia-ctk creates the links; what stays here is whether the node needs them (the runtime's cgroup
driver and the toolkit's mode: no NVIDIA tool says) and which links are missing, read from /dev,
so that check mode and a second run can say "unchanged": ``--dry-run`` cannot tell that (it prints
a log line for every link it would try, present or not, and with ``--create-all`` it needs the
driver's majors in /proc/devices and the toolkit installed, which check mode on a new node has not).
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import stat

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import day2
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import edit, files, managed, toolkit_config

RULE_PATH = "/etc/udev/rules.d/71-nvidia-dev-char.rules"
NVIDIA_CTK = "/usr/bin/nvidia-ctk"
RULE_HEADER = "# Managed by gpufleet.nvidia.dev_char_symlinks"
CHAR_DIR = "/dev/char"
#: The NVIDIA device nodes the toolkit links (``internal/system/nvdevices``), as globs under /dev.
NODE_GLOBS = (
    "/dev/nvidia[0-9]*",
    "/dev/nvidiactl",
    "/dev/nvidia-modeset",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-caps/nvidia-cap*",
    "/dev/nvidia-caps-imex-channels/channel*",
)
RUNTIMES = ("containerd", "k3s", "rke2", "crio", "docker")
CONTAINERD_FILES = {
    "containerd": ("/etc/containerd/config.toml", "/etc/containerd/conf.d/*.toml"),
    "k3s": ("/var/lib/rancher/k3s/agent/etc/containerd/config.toml",),
    "rke2": ("/var/lib/rancher/rke2/agent/etc/containerd/config.toml",),
}
CRIO_FILES = ("/etc/crio/crio.conf", "/etc/crio/crio.conf.d/*.conf")
DOCKER_FILE = "/etc/docker/daemon.json"
CRI_PLUGINS = ("io.containerd.cri.v1.runtime", "io.containerd.grpc.v1.cri", "cri")


def rule_file(value):
    """The udev rule file: an absolute, normalized path ending in ``.rules`` (udev reads no other name)."""
    text = inputs.absolute_path(value)
    if not text.endswith(".rules"):
        raise inputs.Invalid("a udev rules file (an absolute, normalized path ending in .rules; %s)" % inputs.NO_SPACE)
    return text


def program_path(value):
    """The path of a program: an absolute, normalized path that names a file (not ``/``), without
    what ends or changes a ``RUN+=`` value (``"``, ``\\``) or what udev substitutes (``$``, ``%``)."""
    text = inputs.absolute_path(value, forbid='"\\$%')
    if text == "/":
        raise inputs.Invalid("a program's path (absolute, normalized, not /; %s, no '\"', '\\\\', '$' or '%%')" % inputs.NO_SPACE)
    return text


#: The options that reach the rule, a program systemd-udevd runs as root on every device add: in
#: ``RUN+="..."`` a ``"`` ends the value, a newline the rule, a space the program's path, and
#: udev substitutes ``$name`` and ``%c`` (``udev(7)``) before it runs it.
PARAM_RULES = {
    "rule_path": rule_file,
    "nvidia_ctk_path": program_path,
}


def rule_text(nvidia_ctk: str = NVIDIA_CTK) -> str:
    """The udev rule NVIDIA documents, run with ``nvidia_ctk``."""
    return (
        "%s: keeps the /dev/char links of the NVIDIA device nodes\n"
        "# (nvidia-ctk system create-dev-char-symlinks) so that GPU containers under the systemd cgroup\n"
        "# driver keep their GPUs across systemctl daemon-reload (NVIDIA/nvidia-docker#1730).\n"
        'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", RUN+="%s system create-dev-char-symlinks --create-all"\n'
        % (RULE_HEADER, nvidia_ctk)
    )


def effective_mode(mode: str, toolkit_version) -> str:
    """The toolkit runtime's mode once ``auto`` is resolved (``discovery.day2.effective_mode``, its
    1.18 change); a toolkit version that is none fails, since ``auto`` depends on it."""
    effective = day2.effective_mode(mode, toolkit_version)
    if effective is None:
        raise GpuFleetError(
            "dev_char_symlinks: toolkit_version %r is not a toolkit version (expected e.g. 1.20.0 or 1.20.0-1): "
            "the runtime's auto mode depends on it" % (toolkit_version,)
        )
    return effective


def _files(host, patterns) -> list:
    found = []
    for pattern in patterns:
        found.extend(sorted(host.glob(pattern)) if "*" in pattern else ([pattern] if host.isfile(pattern) else []))
    return found


def _toml(host, path):
    text = files.read_text(host, path)
    try:
        return edit.toml_data(text or "")
    except Exception as exc:  # tomlkit's parse errors are of several classes
        raise GpuFleetError("dev_char_symlinks: %s is not valid TOML: %s" % (path, exc), path=path)


def containerd_cgroup(host, runtime: str, runtime_name: str) -> tuple:
    """``(driver, where)`` of the nvidia runtime's (else the default runtime's) SystemdCgroup."""
    found = {}
    for path in _files(host, CONTAINERD_FILES[runtime]):
        data = _toml(host, path)
        for plugin in CRI_PLUGINS:
            runtimes = managed.get_path(data, ("plugins", plugin, "containerd", "runtimes"), {})
            default = managed.get_path(data, ("plugins", plugin, "containerd", "default_runtime_name"), "runc")
            for name in (runtime_name, default):
                value = managed.get_path(runtimes, (name, "options", "SystemdCgroup"))
                if isinstance(value, bool):
                    found[name] = (value, "%s (runtimes.%s)" % (path, name))
    entry = found.get(runtime_name) or next(iter(found.values()), None)
    if entry is None:
        return "cgroupfs", "no SystemdCgroup in the %s configuration (containerd's default is false)" % runtime
    return ("systemd" if entry[0] else "cgroupfs"), "SystemdCgroup = %s in %s" % (str(entry[0]).lower(), entry[1])


def crio_cgroup(host) -> tuple:
    manager, where = "systemd", "CRI-O's default cgroup_manager"
    for path in _files(host, CRIO_FILES):
        value = managed.get_path(_toml(host, path), ("crio", "runtime", "cgroup_manager"))
        if isinstance(value, str):
            manager, where = value, "cgroup_manager in %s" % path
    return manager, where


def docker_cgroup(host) -> tuple:
    data = files.parse_json(files.read_text(host, DOCKER_FILE), DOCKER_FILE)
    opts = data.get("exec-opts") if isinstance(data.get("exec-opts"), list) else []
    for opt in reversed(opts):
        key, unused, value = str(opt).partition("=")
        if key.strip() == "native.cgroupdriver":
            return value.strip(), "exec-opts in %s" % DOCKER_FILE
    if host.exists("/sys/fs/cgroup/cgroup.controllers", kernel=True):
        return "systemd", "Docker's default on cgroup v2"
    return "cgroupfs", "Docker's default on cgroup v1"


def cgroup_driver(host, runtime: str, runtime_name: str = "nvidia") -> tuple:
    """``(systemd | cgroupfs | ..., where it was read)`` for the node's container runtime."""
    if runtime in CONTAINERD_FILES:
        return containerd_cgroup(host, runtime, runtime_name)
    if runtime == "crio":
        return crio_cgroup(host)
    if runtime == "docker":
        return docker_cgroup(host)
    raise GpuFleetError("dev_char_symlinks: runtime %r is not one of %s" % (runtime, ", ".join(RUNTIMES)))


def assess(runtime: str, cgroup: tuple, mode: str) -> dict:
    """Whether the node loses GPUs on daemon-reload: ``{affected, reasons}`` in words."""
    driver, where = cgroup
    if driver != "systemd":
        return {"affected": False, "reasons": ["the %s cgroup driver is %s (%s): a reload does not touch the containers' devices"
                                               % (runtime, driver, where)]}
    if not day2.reload_exposed(runtime, driver, mode):
        return {"affected": False, "reasons": [
            "the systemd cgroup driver (%s), but the toolkit runtime runs in %s mode: the device nodes are in "
            "the containers' OCI spec, so a reload keeps them" % (where, mode)]}
    legacy = mode not in day2.SPEC_MODES
    why = ["the systemd cgroup driver (%s)" % where]
    why.append("the toolkit runtime in legacy mode" if legacy else "docker run --gpus, which uses the legacy hook in any mode")
    return {"affected": True, "reasons": why}


def device_numbers(local: str):
    """``(major, minor)`` of the character device at ``local`` (a path on this machine), or None."""
    try:
        st = os.lstat(local)
    except OSError:
        return None
    if not stat.S_ISCHR(st.st_mode):
        return None
    return os.major(st.st_rdev), os.minor(st.st_rdev)


def wanted_links(host, numbers=device_numbers) -> dict:
    """``{"/dev/char/M:m": "/dev/nvidiaN"}`` for every NVIDIA device node of the node."""
    links = {}
    for pattern in NODE_GLOBS:
        folder, name = posixpath.split(pattern)
        for entry in _dev_names(host, folder, name):
            node = posixpath.join(folder, entry)
            found = numbers(host.dlocal(node))
            if found is not None:
                links["%s/%d:%d" % (CHAR_DIR, found[0], found[1])] = node
    return dict(sorted(links.items()))


def _dev_names(host, folder, pattern) -> list:
    try:
        names = sorted(os.listdir(host.dlocal(folder)))
    except OSError:
        return []
    return [n for n in names if fnmatch.fnmatchcase(n, pattern)]


def link_points_at(host, link: str, node: str) -> bool:
    """Whether the /dev/char link exists and names the node (absolute, as nvidia-ctk writes it, or
    relative, as udev does)."""
    target = host.read_dev_link(link)
    if target is None:
        return False
    return posixpath.normpath(posixpath.join(posixpath.dirname(link), target)) == node


def missing_links(host, wanted: dict) -> list:
    return [link for link, node in wanted.items() if not link_points_at(host, link, node)]


def listing(host, wanted: dict) -> str:
    """The links as text, for the diff: one ``link -> node`` line each, ``(missing)`` where absent."""
    lines = ["%s -> %s%s" % (link, node, "" if link_points_at(host, link, node) else " (missing)")
             for link, node in wanted.items()]
    return "\n".join(lines) + ("\n" if lines else "")


def exposure(host, params: dict) -> dict:
    """Whether the node needs the fix, read from its runtime and the toolkit's configuration."""
    cgroup = cgroup_driver(host, params["runtime"], params["runtime_name"])
    config = params["toolkit_config"]
    configured = toolkit_config.runtime_mode(_toml(host, config) if host.isfile(config) else {})
    mode = effective_mode(configured, params["toolkit_version"])
    found = assess(params["runtime"], cgroup, mode)
    found.update({"cgroup_driver": cgroup[0], "toolkit_mode": mode})
    return found


def plan(host, params: dict, found: dict, numbers=device_numbers) -> dict:
    """What to do: the rule file's text before and after, the links wanted and missing."""
    wanted_state = params["state"]
    apply_fix = wanted_state == "present" or (wanted_state == "auto" and found["affected"])
    before = files.read_text(host, params["rule_path"])
    if apply_fix:
        after = rule_text(params["nvidia_ctk_path"])
    elif wanted_state == "absent" or (before or "").startswith(RULE_HEADER):
        after = None  # absent, or auto on a node that no longer needs it: our rule goes
    else:
        after = before  # a rule of the site's own is not the module's to remove
    wanted = wanted_links(host, numbers) if apply_fix else {}
    return {
        "fix": apply_fix,
        "rule": files.FileChange(params["rule_path"], before, after),
        "wanted": wanted,
        "missing": missing_links(host, wanted),
    }


def converge(host, params: dict, check_mode: bool = False, want_diff: bool = False, numbers=device_numbers) -> dict:
    """Assess, plan, apply (unless check mode), check; the module's result."""
    inputs.check("dev_char_symlinks", PARAM_RULES, params)
    found = exposure(host, params) if params["state"] == "auto" else {
        "affected": params["state"] == "present", "reasons": ["state=%s" % params["state"]],
        "cgroup_driver": None, "toolkit_mode": None}
    todo = plan(host, params, found, numbers)
    before_links = listing(host, todo["wanted"])
    command = [params["nvidia_ctk_path"], "system", "create-dev-char-symlinks", "--create-all"]
    ran = []
    if not check_mode:
        _apply(host, todo, command, ran, numbers)
    changed = todo["rule"].changed or bool(todo["missing"])
    result = {
        "changed": changed,
        "needed": found["affected"],
        "reasons": found["reasons"],
        "cgroup_driver": found["cgroup_driver"],
        "toolkit_mode": found["toolkit_mode"],
        "rule_path": params["rule_path"],
        "rule_action": todo["rule"].action or "unchanged",
        "links": todo["wanted"],
        "missing_links": todo["missing"],
        "commands": ran if not check_mode else ([" ".join(command)] if todo["missing"] else []),
        "msg": _message(found, todo, check_mode),
    }
    if want_diff:
        result["diff"] = [todo["rule"].diff(), _links_diff(before_links, todo)]
    return result


def _apply(host, todo, command, ran, numbers) -> None:
    rule = todo["rule"]
    if rule.changed:
        try:
            if rule.after is None:
                host.remove(rule.path)
            else:
                host.write(rule.path, rule.after, mode=0o644)
        except (GpuFleetError, OSError) as exc:
            raise GpuFleetError("dev_char_symlinks: cannot write %s: %s" % (rule.path, getattr(exc, "msg", exc)), path=rule.path)
    if not todo["missing"]:
        return
    if not host.is_executable(command[0]):
        raise GpuFleetError(
            "dev_char_symlinks: %s is not installed, so the /dev/char links %s cannot be created (install the "
            "NVIDIA Container Toolkit, nvidia-container-toolkit-base, first)" % (command[0], ", ".join(todo["missing"])),
            missing=todo["missing"],
        )
    rc, out, err = host.run(command)
    ran.append(" ".join(command))
    left = missing_links(host, wanted_links(host, numbers))
    if rc != 0 or left:
        raise GpuFleetError(
            "dev_char_symlinks: %s (rc %s) left %s missing: %s" % (
                " ".join(command), rc, ", ".join(left) or "no link", (err or out).strip()[-2000:]),
            rc=rc, missing=left,
        )


def _links_diff(before_links: str, todo) -> dict:
    after = "".join("%s -> %s\n" % (link, node) for link, node in todo["wanted"].items())
    return {"before": before_links, "after": after, "before_header": CHAR_DIR, "after_header": CHAR_DIR}


def _message(found, todo, check_mode) -> str:
    if not todo["fix"]:
        head = "not needed: " + "; ".join(found["reasons"])
        return head + ("; %s removed" % todo["rule"].path if todo["rule"].action == "delete" else "")
    verb = "would create" if check_mode else "created"
    links = ("%s %d /dev/char link(s)" % (verb, len(todo["missing"]))) if todo["missing"] else (
        "the %d /dev/char link(s) are there" % len(todo["wanted"]))
    return "needed (%s): %s; udev rule %s %s" % (
        " and ".join(found["reasons"]), links, todo["rule"].path, todo["rule"].action or "unchanged")
