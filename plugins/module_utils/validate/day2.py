# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The day-2 checks of host validation, from the facts of ``discovery.kernels`` and
``discovery.day2`` and the state records of ``runtime``:

- ``kernel_next_boot``: the kernel the node boots next has an nvidia module of the driver's
  version (drift otherwise: after the reboot the driver does not load);
- ``driver_libraries``: the loaded module is the version of the user-space libraries and
  packages on disk (failed otherwise, with the fix: reload where nothing holds the GPU, else
  reboot);
- ``nvml_reload``: the node does not lose NVML in running containers after ``systemctl
  daemon-reload`` (drift where it is exposed); with ``nvml_reload_test`` (off by default, it
  reloads systemd) it proves it: a GPU container started, ``systemctl daemon-reload``, then
  ``nvidia-smi -L`` inside it again;
- ``runtime_drift``: the settings the collection's runtime editors recorded in a containerd
  config, drop-in or k3s / RKE2 template are still there (drift, with the difference, when
  someone changed them since: the next run of container_runtime puts them back);
- ``isolation``: where the node is declared to isolate unprivileged containers
  (``isolate_unprivileged``, the container_toolkit role's ``container_toolkit_isolate_unprivileged``:
  by default true except with Docker), the toolkit's config.toml does (drift where an
  unprivileged container can still take GPUs by ``NVIDIA_VISIBLE_DEVICES``, with the fix).
"""

from __future__ import annotations

import fnmatch
import json
import posixpath

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import toml_subset
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import day2, kernels
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.libraries import fix_text
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import managed, toolkit_settings
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import DRIFT, FAILED, OK, SKIPPED

CONTAINER_NAME = "gpufleet-nvml-reload-check"
RANCHER_TEMPLATES = ("/var/lib/rancher/%s/agent/etc/containerd/config.toml.tmpl",
                     "/var/lib/rancher/%s/agent/etc/containerd/config-v3.toml.tmpl")


def check_kernel_next_boot(checks, facts):
    """``kernel_next_boot``: the next boot kernel has a module of the driver's version."""
    facts_kernels = facts.get("kernels") or {}
    boot = facts_kernels.get("next_boot") or {}
    problem = kernels.next_boot_problem(facts_kernels)
    if problem:
        return checks.add("kernel_next_boot", DRIFT, "%s. %s Fix: %s" % problem)
    if not boot.get("release"):
        return checks.add("kernel_next_boot", SKIPPED, "next boot kernel not checked: %s" % (boot.get("detail") or "no kernel facts"))
    return checks.add("kernel_next_boot", OK, "the next boot kernel %s (%s) has the nvidia module %s" % (
        boot["release"], boot.get("source"), facts_kernels.get("driver_version")))


def check_driver_libraries(checks, facts):
    """``driver_libraries``: the loaded module against the libraries and packages on disk."""
    mismatch = facts.get("driver_libraries") or {}
    state = mismatch.get("state")
    if state == "drift":
        return checks.add("driver_libraries", FAILED, "driver/library version mismatch: %s. Fix: %s" % (
            mismatch.get("detail"), fix_text(mismatch)))
    if state == "ok":
        return checks.add("driver_libraries", OK, mismatch.get("detail"))
    return checks.add("driver_libraries", SKIPPED, "driver/library versions not checked: %s" % (mismatch.get("detail") or "no facts"))


# --- NVML after daemon-reload ------------------------------------------------------------------


def check_nvml_reload(checks, host, facts, test, image, runtime):
    """``nvml_reload``: exposure from the facts; the proof only where asked and possible."""
    exposure = facts.get("nvml_reload") or {}
    state = exposure.get("state")
    if test:
        proven = _proof(host, facts, image, runtime)
        if proven is not None:
            return checks.add("nvml_reload", *proven)
    note = "" if test else " (the daemon-reload proof was not run: nvml_reload_test is off)"
    if state == "exposed":
        return checks.add("nvml_reload", DRIFT, "%s. Fix: %s%s" % (exposure["reason"], exposure["fix"], note))
    if state in ("protected", "not_exposed"):
        return checks.add("nvml_reload", OK, "%s: %s%s" % (state.replace("_", " "), exposure["reason"], note))
    return checks.add("nvml_reload", SKIPPED, "NVML after daemon-reload not checked: %s" % (exposure.get("reason") or "no facts"))


def _proof(host, facts, image, runtime):
    """``(status, msg)`` of the daemon-reload proof, or a skip saying why it cannot run here."""
    why = _proof_impossible(host, facts, image, runtime)
    if why:
        return SKIPPED, "NVML after daemon-reload not proven: %s" % why
    cli = container_commands(host, runtime, image)
    started = host.run(cli["start"])
    if started[0] != 0:
        return FAILED, "the GPU container for the daemon-reload proof did not start: %s" % _tail(started)
    try:
        return _reload_and_query(host, cli)
    finally:
        for argv in cli["remove"]:
            host.run(argv)


def _reload_and_query(host, cli):
    before = host.run(cli["query"])
    if before[0] != 0:
        return FAILED, "the GPU container saw no GPU before any reload: %s" % _tail(before)
    reloaded = host.run(["systemctl", "daemon-reload"])
    if reloaded[0] != 0:
        return FAILED, "systemctl daemon-reload failed: %s" % _tail(reloaded)
    after = host.run(cli["query"])
    if after[0] != 0:
        return FAILED, "proven: the running GPU container lost NVML after systemctl daemon-reload (%s). Fix: %s" % (
            _tail(after), day2.FIX_CDI)
    return OK, "proven: a running GPU container still answers nvidia-smi -L after systemctl daemon-reload"


def _proof_impossible(host, facts, image, runtime):
    if not facts.get("gpu_count"):
        return "no GPU on the node"
    if host.chrooted:
        return "the node is mounted at %s: systemctl there would reload this machine's systemd" % host.root
    if not dig(facts, "nvml_reload", "systemd"):
        return "systemd is not the node's init"
    if not image:
        return "nvml_reload_test_image is not set (an image with nvidia-smi's libraries, e.g. a CUDA base image)"
    if container_commands(host, runtime, image) is None:
        return "no docker or ctr for container_runtime %s (CRI-O starts containers only in pods)" % runtime
    return None


def container_commands(host, runtime, image):
    """The commands that start the proof's container, query the GPU in it and remove it, or None.

    Docker pulls ``image`` when it is not there; ctr needs it in its ``gpufleet`` namespace
    already (``ctr -n gpufleet images pull IMAGE``).
    """
    docker, ctr = host.which("docker"), host.which("ctr")
    if runtime == "docker" and docker:
        return {
            "start": [docker, "run", "-d", "--rm", "--name", CONTAINER_NAME, "--runtime", "nvidia",
                      "-e", "NVIDIA_VISIBLE_DEVICES=all", image, "sleep", "600"],
            "query": [docker, "exec", CONTAINER_NAME, "nvidia-smi", "-L"],
            "remove": [[docker, "rm", "-f", CONTAINER_NAME]],
        }
    if runtime in ("containerd", "k3s", "rke2") and ctr:
        base = [ctr, "-n", "gpufleet"]
        if runtime in ("k3s", "rke2"):
            base += ["--address", "/run/k3s/containerd/containerd.sock"]
        return {
            "start": base + ["run", "-d", "--runc-binary", "/usr/bin/nvidia-container-runtime", "--runc-systemd-cgroup",
                             "--env", "NVIDIA_VISIBLE_DEVICES=all", image, CONTAINER_NAME, "sleep", "600"],
            "query": base + ["task", "exec", "--exec-id", "nvml-check", CONTAINER_NAME, "nvidia-smi", "-L"],
            "remove": [base + ["task", "kill", "-s", "SIGKILL", CONTAINER_NAME], base + ["task", "rm", "-f", CONTAINER_NAME],
                       base + ["container", "rm", CONTAINER_NAME]],
        }
    return None


def _tail(answer):
    rc, out, err = answer
    text = ((err or "") + (out or "")).strip().replace("\n", " ")
    return "exit %d: %s" % (rc, text[-300:])


# --- runtime drift -----------------------------------------------------------------------------


def _records(text):
    """The state records written into ``text`` by the runtime editors (one per handler)."""
    return [r for r in map(managed.decode_record_line, (text or "").splitlines()) if r is not None]


def _settings(text, template):
    """The plain data of a TOML file (a Go template masked first), or None where it does not parse."""
    try:
        return toml_subset.loads(managed.GoTemplateMask(text).masked if template else text)
    except (ValueError, RecursionError):
        return None


def _toml_path(path):
    return ".".join(managed.toml_key(str(k)) for k in path)


def _show(value):
    return "(absent)" if value is None else json.dumps(value, sort_keys=True, default=str)


def file_drift(path, text, template=False, edited=None):
    """``(changes, diff_lines)`` between what the records of ``text`` say was written and what the
    edited file holds: ``text`` itself, or ``edited`` (``(path, text)``): a containerd drop-in's
    record is of what the module changed in the main file that imports it (its ``imports``)."""
    records = _records(text)
    if not records:
        if text.startswith(managed.OWNER_MARK):
            return ["%s: managed by the collection but its state record is gone" % path], []
        return [], []
    if edited is not None:
        path, text = edited
    data = _settings(text, template)
    if data is None:
        return ["%s no longer parses as TOML" % path], []
    changes, diff = [], []
    for record in records:
        for entry in record.get("keys") or []:
            if "set" not in entry or not isinstance(entry.get("path"), list):
                continue
            now = managed.get_path(data, entry["path"])
            if not managed.same(now, entry["set"]):
                key = _toml_path(entry["path"])
                changes.append("%s: %s is %s, written %s" % (path, key, _show(now), _show(entry["set"])))
                diff += ["-%s = %s" % (key, _show(entry["set"])), "+%s = %s" % (key, _show(now))]
    return changes, diff


def runtime_files(host, facts):
    """``[(path, is_template, edited)]``: the files the runtime editors write where they exist on
    the node; ``edited`` is the file a record is of when it is another (a containerd drop-in: the
    main config), else None."""
    containerd = dig(facts, "container", "containerd") or {}
    main = containerd.get("config_path") or "/etc/containerd/config.toml"
    files = [(main, False, None)]
    for pattern in containerd.get("imports") or []:
        folder, name = posixpath.split(pattern)
        files += [(posixpath.join(folder, n), False, main) for n in host.names(folder) if fnmatch.fnmatchcase(n, name)]
    for flavour in ("k3s", "rke2"):
        files += [(template % flavour, True, None) for template in RANCHER_TEMPLATES]
    files += [("/etc/crio/crio.conf.d/" + n, False, None) for n in host.names("/etc/crio/crio.conf.d")]
    return [f for f in files if host.isfile(f[0])]


def check_runtime_drift(checks, host, facts):
    """``runtime_drift``: the recorded settings of the runtime files are still what was written."""
    changes, diff = [], []
    files = runtime_files(host, facts)
    if not files:
        return checks.add("runtime_drift", SKIPPED, "runtime drift not checked: no containerd, CRI-O or k3s / RKE2 file the collection writes")
    for path, template, main in files:
        text = host.read(path)
        found, lines = file_drift(path, text or "", template, (main, host.read(main) or "") if main else None)
        changes += found
        if lines:
            diff += ["--- %s (as gpufleet.nvidia.container_runtime wrote it)" % path, "+++ %s (now)" % path] + lines
    if not changes:
        return checks.add("runtime_drift", OK, "every setting the collection recorded in the runtime's files is as it wrote it")
    status = checks.add("runtime_drift", DRIFT, "changed since the collection wrote it (the next container_runtime run puts it back): %s"
                        % "; ".join(changes))
    checks.items[-1]["diff"] = "\n".join(diff)
    return status


# --- isolation of unprivileged containers -------------------------------------------------------

ISOLATION_FIX = (
    "run the container_toolkit role with container_toolkit_isolate_unprivileged: true (gpufleet.nvidia.toolkit_config "
    "isolate_unprivileged=true), or set %s = false and %s = true at the top of %s; the device plugin must then hand GPUs "
    "over by volume mounts (device_plugin_device_list_strategy) or CDI" % (
        toolkit_settings.ENVVAR_KEY, toolkit_settings.VOLUME_MOUNTS_KEY, toolkit_settings.CONFIG_PATH))


def declared_isolation(declared, runtime):
    """``(isolate, why)``: the declared setting, or the container_toolkit role's rule where none is."""
    if declared is not None:
        return bool(declared), "declared %s (isolate_unprivileged)" % str(bool(declared)).lower()
    isolate = runtime != "docker"
    return isolate, "the container_toolkit role's default for %s (true except with Docker)" % runtime


def _isolation_words(data):
    """What the file says of the two keys, each as the toolkit reads it (its default where unset)."""
    words = []
    for key, unused in toolkit_settings.ISOLATED:
        if key in data:
            words.append("%s = %s" % (key, _show(data[key])))
        else:
            words.append("%s unset (the toolkit's default, %s)" % (key, _show(toolkit_settings.TOOLKIT_DEFAULTS[key])))
    return ", ".join(words)


def isolation_verdict(data, isolate, why):
    """``(status, msg)`` of the isolation check for the config's plain ``data`` (None: no file)."""
    found = toolkit_settings.isolation_of(data)
    where = toolkit_settings.CONFIG_PATH if data is not None else "%s (absent: the toolkit's defaults)" % toolkit_settings.CONFIG_PATH
    said = "%s: %s" % (where, _isolation_words(data or {}))
    if found["isolated"]:
        return OK, "unprivileged containers are isolated (%s; %s)" % (why, said)
    if not isolate:
        return OK, "isolation of unprivileged containers not declared (%s): %s" % (why, said)
    if found["envvar_when_unprivileged"] is not False:
        harm = "an unprivileged container can take any GPU by setting NVIDIA_VISIBLE_DEVICES"
    else:
        harm = "the device list is not read from volume mounts, so the device plugin's volume-mounts strategy hands over no GPU"
    return DRIFT, "isolation of unprivileged containers is declared (%s) but %s: %s. Fix: %s" % (why, harm, said, ISOLATION_FIX)


def check_isolation(checks, host, facts, declared, runtime):
    """``isolation``: the toolkit's config isolates unprivileged containers where that is declared."""
    isolate, why = declared_isolation(declared, runtime)
    path = toolkit_settings.CONFIG_PATH
    try:
        text = host.read(path)
    except GpuFleetError as exc:
        return checks.add("isolation", FAILED, "isolation of unprivileged containers not known: %s" % exc.msg)
    if text is None and not dig(facts, "container", "toolkit", "installed"):
        return checks.add("isolation", SKIPPED, "isolation of unprivileged containers not checked: no NVIDIA Container Toolkit "
                          "on the node (%s absent)" % path)
    try:
        data = toml_subset.loads(text) if text is not None else None
    except (ValueError, RecursionError) as exc:
        return checks.add("isolation", FAILED, "%s does not parse as TOML (%s): the toolkit cannot read it" % (path, exc))
    return checks.add("isolation", *isolation_verdict(data, isolate, why))


def check_prepared_day2(checks, host, facts, params):
    """The day-2 checks that need no GPU, for a node prepared without one: its kernel's module,
    the runtime's files, the toolkit's isolation."""
    check_kernel_next_boot(checks, facts)
    check_runtime_drift(checks, host, facts)
    check_isolation(checks, host, facts, params.get("isolate_unprivileged"), params.get("container_runtime"))


def check_day2(checks, host, facts, params):
    """Every day-2 check of a GPU node (a drifted ``runtime_drift`` check carries the ``diff``)."""
    check_kernel_next_boot(checks, facts)
    check_driver_libraries(checks, facts)
    check_nvml_reload(checks, host, facts, params.get("nvml_reload_test"), params.get("nvml_reload_test_image"),
                      params.get("container_runtime"))
    check_runtime_drift(checks, host, facts)
    check_isolation(checks, host, facts, params.get("isolate_unprivileged"), params.get("container_runtime"))
