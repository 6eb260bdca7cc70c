# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernels of a node and the nvidia module each of them would load: the day-2 facts of
``gpufleet_nvidia.kernels``, with those of ``gpufleet_nvidia.driver_libraries`` (:mod:`.libraries`).

Read only, and without starting a process where a file says it: the installed kernels from
``/boot/vmlinuz-*`` and ``/lib/modules/*``; the next boot kernel from what the boot loader
would pick (``grubby --default-kernel`` on EL, which only reads; else GRUB's ``grubenv`` and
``grub.cfg``; else the newest installed kernel); DKMS's tree
(``/var/lib/dkms/nvidia/<version>/<kernel>/<arch>/module``) without running dkms; the
precompiled packages of Ubuntu (``linux-modules-nvidia-*-<kernel>``); and what each module file
says of itself (:mod:`.modinfo`). A module that cannot be read is said so (``unreadable``), never guessed.
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.libraries import (
    _same_version,
    library_mismatch,
    wanted_version,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.modinfo import read_module

MODULE_ROOTS = ("/lib/modules", "/usr/lib/modules")
# Where a kernel's nvidia.ko is: DKMS installs under updates/dkms, EL's kmod packages under
# extra/, Ubuntu's precompiled packages under kernel/nvidia-<branch>[srv]/.
MODULE_PLACES = ("updates/dkms", "updates", "extra", "extra/nvidia", "extra/nvidia-open", "kernel/drivers/video")
MODULE_PLACE_GLOBS = ("kernel", "updates/dkms", "extra")
# The module folders of a driver installed outside any kernel's tree (the pre-installed driver
# of the H200 hosts loads /usr/local/nvidia/modules/nvidia.ko).
DRIVER_ROOT_MODULES = ("/usr/local/nvidia/modules",)
MODULE_NAMES = ("nvidia.ko", "nvidia.ko.xz", "nvidia.ko.zst", "nvidia.ko.gz")
# DKMS's tree: one folder per module name, nvidia (NVIDIA's and Ubuntu's packages), nvidia-current
# and nvidia-current-open (Debian's), nvidia-tesla-<branch> (Debian's older data-center ones).
DKMS_ROOT = "/var/lib/dkms"
GRUBENV = ("/boot/grub/grubenv", "/boot/grub2/grubenv")
GRUB_CFG = ("/boot/grub/grub.cfg", "/boot/grub2/grub.cfg")
_PRECOMPILED = re.compile(r"^linux-modules-nvidia-(\d+)(?:-server)?(?:-open)?-(.+)$")


def _release_key(release):
    """Sort key of a kernel release: its numbers in order, then the text (6.8.0-45 < 6.8.0-100)."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"[.\-+_~]", release)]


def installed_kernels(host):
    """``{release: {'vmlinuz': path|None, 'modules_dir': path|None}}`` of the installed kernels."""
    kernels = {}
    for name in host.names("/boot"):
        if name.startswith("vmlinuz-") and host.isfile("/boot/" + name) and "rescue" not in name:
            kernels.setdefault(name[len("vmlinuz-"):], {"vmlinuz": None, "modules_dir": None})["vmlinuz"] = "/boot/" + name
    for root in MODULE_ROOTS:
        for name in host.names(root):
            folder = posixpath.join(root, name)
            if host.isdir(folder) and not name.startswith("."):
                entry = kernels.setdefault(name, {"vmlinuz": None, "modules_dir": None})
                entry["modules_dir"] = entry["modules_dir"] or folder
    return kernels


def _kernel_in(text, releases):
    """The longest installed release named in ``text`` (a boot entry's title or id), or None."""
    named = [r for r in releases if r and r in text]
    return max(named, key=len) if named else None


def _grubby_default(host, releases):
    grubby = host.which("grubby")
    if grubby is None:
        return None, ""
    rc, out, err = host.run([grubby, "--default-kernel"])
    path = out.strip().splitlines()[-1] if rc == 0 and out.strip() else ""
    if not path.startswith("/boot/vmlinuz-"):
        return None, "grubby --default-kernel answered %d: %s" % (rc, (err or out).strip()[:160])
    return path[len("/boot/vmlinuz-"):], "grubby --default-kernel: %s" % path


def _grubenv(host):
    """``(path, {name: value})`` of GRUB's environment block, or ``(None, {})``."""
    for path in GRUBENV:
        text = host.read(path) if host.isfile(path) else None
        if text is not None:
            pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
            return path, dict((k.strip(), v.strip()) for k, v in pairs)
    return None, {}


def _grub_cfg(host):
    """``(path, default, first_kernel)`` of grub.cfg: its ``set default`` value and its first entry's kernel."""
    for path in GRUB_CFG:
        text = host.read(path) if host.isfile(path) else None
        if text is not None:
            # Ubuntu's and Debian's grub.cfg first set default="${next_entry}" (grub-reboot's), else the
            # configured GRUB_DEFAULT: that one is the default.
            defaults = [d for d in re.findall(r'^\s*set default="?([^"\s]*)"?', text, re.M) if d != "${next_entry}"]
            first = re.search(r"^\s*linux(?:efi)?\s+\S*?vmlinuz-(\S+)", text, re.M)
            return path, defaults[0] if defaults else "0", first.group(1) if first else None
    return None, None, None


def _grub_default(host, releases):
    """The kernel GRUB boots next: grubenv's ``next_entry`` (grub-reboot), else its ``saved_entry``
    where grub.cfg defaults to it (GRUB_DEFAULT=saved), else grub.cfg's default entry."""
    env_path, env = _grubenv(host)
    cfg_path, default, first = _grub_cfg(host)
    saved = cfg_path is None or default in ("${saved_entry}", "saved")
    for name in ("next_entry",) + (("saved_entry",) if saved else ()):
        release = _kernel_in(env.get(name) or "", releases)
        if release:
            return release, "%s %s=%s" % (env_path, name, env[name])
    if cfg_path and first and default in ("0", "", "${saved_entry}"):
        return first, "%s: the first menu entry" % cfg_path
    named = _kernel_in(default or "", releases) if cfg_path else None
    return (named, "%s: set default=%s" % (cfg_path, default)) if named else (None, "")


def next_boot_kernel(host, kernels):
    """``{release, source, detail}``: the kernel the next boot starts, as far as it can be read."""
    releases = sorted(kernels, key=_release_key)
    if not releases:
        return {
            "release": None,
            "source": "unknown",
            "detail": "no kernel under /boot or /lib/modules: the kernel comes from outside the node "
            "(direct kernel boot, a network boot); the next boot kernel cannot be read here",
        }
    for source, finder in (("grubby", _grubby_default), ("grub", _grub_default)):
        release, detail = finder(host, releases)
        if release:
            return {"release": release, "source": source, "detail": detail}
    return {"release": releases[-1], "source": "newest", "detail": "the newest installed kernel (no boot loader default read)"}


def next_boot_other(host, running):
    """The kernel the node boots next where it is another installed kernel than ``running``, else None."""
    release = next_boot_kernel(host, installed_kernels(host))["release"]
    return release if release and release != running else None


def _module_files(host, release):
    """The nvidia module files of one kernel's module tree."""
    base = next((posixpath.join(r, release) for r in MODULE_ROOTS if host.isdir(posixpath.join(r, release))), None)
    if base is None:
        return []
    folders = [posixpath.join(base, place) for place in MODULE_PLACES]
    for place in MODULE_PLACE_GLOBS:
        folders.extend(posixpath.join(base, place, n) for n in host.names(posixpath.join(base, place)) if n.startswith("nvidia"))
    found = []
    for folder in folders:
        found.extend(p for p in (posixpath.join(folder, n) for n in MODULE_NAMES) if host.isfile(p) and p not in found)
    return found


def dkms_trees(host):
    """The DKMS module folders of the nvidia driver, ``[(name, path)]``."""
    return [(n, posixpath.join(DKMS_ROOT, n)) for n in host.names(DKMS_ROOT) if n.startswith("nvidia")]


def dkms_sources(host):
    """``[{name, version}]``: the driver sources DKMS has (added), built for some kernel or not."""
    found = []
    for name, tree in dkms_trees(host):
        found.extend({"name": name, "version": v} for v in host.names(tree)
                     if not v.startswith("kernel-") and v != "source" and not host.islink(posixpath.join(tree, v)))
    return found


def dkms_tree(host):
    """``[{name, version, kernel, arch, module}]`` of DKMS's nvidia builds (``module``: the built file or None)."""
    builds = []
    for source in dkms_sources(host):
        version, version_dir = source["version"], posixpath.join(DKMS_ROOT, source["name"], source["version"])
        for kernel in host.names(version_dir):
            if kernel in ("source", "build") or not host.isdir(posixpath.join(version_dir, kernel)):
                continue
            for arch in host.names(posixpath.join(version_dir, kernel)):
                folder = posixpath.join(version_dir, kernel, arch, "module")
                module = next((posixpath.join(folder, n) for n in MODULE_NAMES if host.isfile(posixpath.join(folder, n))), None)
                builds.append({"name": source["name"], "version": version, "kernel": kernel, "arch": arch, "module": module})
    return builds


def precompiled_packages(dpkg):
    """``{kernel: package}`` of Ubuntu's precompiled nvidia module packages installed."""
    found = {}
    for name in sorted(dpkg or {}):
        match = _PRECOMPILED.match(name)
        if match and re.match(r"^\d", match.group(2)):
            found[match.group(2)] = name
    return found


def _source_of(path, release, precompiled):
    if "/updates/dkms/" in path:
        return "dkms"
    if release in precompiled and "/kernel/nvidia" in path:
        return "precompiled"
    if "/extra/" in path:
        return "kmod"
    return "file"


def _kernel_modules(host, release, wanted, dkms, precompiled, loose, sources=()):
    """The module state of one kernel: the files found, and whether one matches the driver."""
    files = [read_module(host, p) for p in _module_files(host, release)]
    files.extend(m for m in loose if m["kernel"] == release)
    for entry in files:
        entry["source"] = _source_of(entry["path"], release, precompiled)
    built = [b for b in dkms if b["kernel"] == release]
    state, detail = _module_state(files, built, release, wanted)
    if state == "missing" and sources:
        detail = _unbuilt_detail(host, release, sources)
    return {
        "release": release,
        "state": state,
        "detail": detail,
        "files": files,
        "dkms": built,
        "precompiled_package": precompiled.get(release),
    }


def _loaded_elsewhere(module, wanted, loaded):
    """The running kernel whose module is loaded at the driver's version but whose file was not
    found where modules go: ``loaded_not_found``, not ``missing`` (it loaded from somewhere)."""
    if module and module["state"] == "missing" and loaded and _same_version(loaded, wanted or loaded):
        module["state"] = "loaded_not_found"
        module["detail"] = ("nvidia %s is loaded in this kernel, but its file is in none of the places looked at "
                            "(updates/dkms, updates, extra, kernel/nvidia*, %s)" % (loaded, ", ".join(DRIVER_ROOT_MODULES)))


def _module_state(files, built, release, wanted):
    """``(state, detail)``: ok, other_version, wrong_kernel, unreadable, built_not_installed or missing."""
    readable = [f for f in files if f["state"] == "ok"]
    own = [f for f in readable if f["kernel"] == release]
    matching = [f for f in own if wanted is None or _same_version(f["version"], wanted)]
    if matching:
        return "ok", "%s: version %s, built for %s" % (matching[0]["path"], matching[0]["version"], release)
    if own:
        return "other_version", "%s is version %s, the driver's libraries are %s" % (own[0]["path"], own[0]["version"], wanted)
    if readable:
        return "wrong_kernel", "%s was built for %s, not %s" % (readable[0]["path"], readable[0]["kernel"], release)
    if files:
        return "unreadable", files[0]["detail"]
    if built:
        return "built_not_installed", "DKMS built nvidia %s for %s (%s) but did not install it into the kernel's tree" % (
            built[0]["version"], release, built[0]["module"] or "no module file")
    return "missing", "no nvidia module for %s (no DKMS build, no precompiled package, no module file)" % release


def _unbuilt_detail(host, release, sources):
    """Why a kernel has no module although DKMS has the driver's source: DKMS builds against the
    kernel's headers (/lib/modules/<release>/build), and says so when they are not there."""
    names = ", ".join("%s %s" % (s["name"], s["version"]) for s in sources)
    headers = "/lib/modules/%s/build" % release
    if not host.exists(headers):
        return ("no nvidia module for %s: DKMS has the driver's source (%s) but could not build it for this kernel, whose "
                "headers are not installed (no %s)" % (release, names, headers))
    return "no nvidia module for %s: DKMS has the driver's source (%s) but no build for this kernel" % (release, names)


def _loose_modules(host):
    """The nvidia modules outside any kernel's tree (a pre-installed driver's own folder)."""
    found = []
    for folder in DRIVER_ROOT_MODULES:
        found.extend(read_module(host, posixpath.join(folder, n)) for n in MODULE_NAMES if host.isfile(posixpath.join(folder, n)))
    return found


def gather_kernels(host, probes, dpkg, wanted, loaded=None):
    """``gpufleet_nvidia.kernels``: running, installed and next boot kernels and each one's nvidia module.

    ``wanted``: the driver version a module must be (the user-space libraries'), or None;
    ``loaded``: the loaded module's version (the running kernel has that module, wherever its file is).
    """
    running = host.kernel_release()
    kernels = installed_kernels(host)
    boot = next_boot_kernel(host, kernels)
    dkms = dkms_tree(host)
    sources = dkms_sources(host)
    precompiled = precompiled_packages(dpkg)
    loose = _loose_modules(host)
    releases = sorted(set(kernels) | {running} | ({boot["release"]} if boot["release"] else set()), key=_release_key)
    modules = dict((r, _kernel_modules(host, r, wanted, dkms, precompiled, loose, sources)) for r in releases)
    _loaded_elsewhere(modules.get(running), wanted, loaded)
    facts = {
        "running": running,
        "installed": [
            {"release": r, "vmlinuz": kernels[r]["vmlinuz"], "modules_dir": kernels[r]["modules_dir"]}
            for r in sorted(kernels, key=_release_key)
        ],
        "next_boot": dict(boot, module=modules[boot["release"]]["state"] if boot["release"] else None),
        "driver_version": wanted,
        "modules": [modules[r] for r in releases],
        "dkms": dkms,
        "dkms_sources": sources,
        "precompiled_packages": precompiled,
        "unbooted_without_module": [r for r in releases if r != running and modules[r]["state"] != "ok" and r in kernels],
    }
    _probe(probes, facts, modules)
    return facts


def _probe(probes, facts, modules):
    unreadable = [m["detail"] for m in modules.values() if m["state"] == "unreadable"]
    summary = "%d installed, running %s, next boot %s (%s)" % (
        len(facts["installed"]), facts["running"], facts["next_boot"]["release"], facts["next_boot"]["source"])
    if unreadable:
        probes.error("kernel_modules", "%s; %s" % (summary, "; ".join(unreadable)))
    else:
        probes.ok("kernel_modules", summary)


def next_boot_problem(kernels):
    """``(message, reason, fix)`` when the next boot kernel has no matching nvidia module, else None."""
    boot = (kernels or {}).get("next_boot") or {}
    release = boot.get("release")
    if not release:
        return _running_problem(kernels, boot)
    module = _unmatched_module(kernels, release)
    if module is None:
        return None
    message = "the next boot kernel %s (%s) has no nvidia module for driver %s: %s" % (
        release, boot.get("detail"), kernels.get("driver_version") or "?", module["detail"])
    reason = ("After the reboot the driver does not load: nvidia-smi fails and no container gets a GPU.")
    fix = _module_fix(release, "install the precompiled module package for %s, or make the boot loader default a kernel "
                               "that has the module." % release)
    if module["state"] == "unreadable":
        reason = "The module file could not be read, so whether it loads after the reboot is not known."
    return message, reason, fix


def _running_problem(kernels, boot):
    """Where the next boot kernel cannot be read (a direct kernel boot, a container), the running
    kernel stands for it: a driver installed without a module for it does not load after a reboot
    either. None without an installed driver, or when the running kernel has its module."""
    running = kernels.get("running")
    module = _unmatched_module(kernels, running)
    if not kernels.get("driver_version") or module is None:
        return None
    message = "the running kernel %s has no nvidia module for driver %s, and the next boot kernel is not known (%s): %s" % (
        running, kernels["driver_version"], boot.get("detail") or "not read", module["detail"])
    reason = "The driver does not load in this kernel: nvidia-smi fails and no container gets a GPU, now and after a reboot into it."
    fix = _module_fix(running, "or install the precompiled module package for %s." % running)
    return message, reason, fix


def _unmatched_module(kernels, release):
    """The module state of kernel ``release`` when it has no module of the driver; None when it has
    one (or it loaded from elsewhere), or the kernel is not among ``kernels``' modules."""
    module = next((m for m in kernels.get("modules") or [] if m["release"] == release), None)
    return None if module is None or module["state"] in ("ok", "loaded_not_found") else module


def _module_fix(release, rest):
    """The fix of a kernel without the driver's module: its headers and DKMS, then ``rest``."""
    return ("Install linux-headers-%s (kernel-devel-%s on EL) and let DKMS build (dkms autoinstall -k %s), %s"
            % (release, release, release, rest))


def gather(host, probes, dpkg, loaded):
    """``(kernels, driver_libraries)`` facts: what :func:`gather_kernels` and :func:`library_mismatch` say."""
    libraries = library_mismatch(host, loaded, dpkg)
    wanted = wanted_version(libraries["libraries"], libraries["packages"], loaded)
    return gather_kernels(host, probes, dpkg, wanted, loaded), libraries
