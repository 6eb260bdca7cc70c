# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The day-2 guards: kernels and their nvidia modules, the loaded module against the libraries,
NVML after daemon-reload, and drift of the runtime files (discovery, preflight, validation)."""

from __future__ import annotations

import importlib.util
import json
import lzma
import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import day2, kernels, modinfo
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.libraries import (
    fix_text,
    library_mismatch,
    package_versions,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.modinfo import read_module
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import facts as gpu_facts
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import Probes
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import preflight as pf
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import managed
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate import day2 as vday2
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate import host as V
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import Checks
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.discovery.captures import HOSTS, CaptureHost

_SPEC = importlib.util.spec_from_file_location("derive_day2", os.path.join(HOSTS, "derive_day2.py"))
derive_day2 = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(derive_day2)

CAPTURE = "ubuntu2404-h200-day2"
NEWKERNEL = "ubuntu2404-h200-day2-newkernel"
LIBDRIFT = "ubuntu2404-h200-day2-libdrift"
VALIDATE = {"driver_version": "580", "driver_method": "preinstalled", "container_runtime": "none"}


def gathered(name):
    host = CaptureHost(name)
    return host, gpu_facts.gather_facts(host)


def check(result, name):
    return next(c for c in result["checks"] if c["name"] == name)


def tree(tmp_path, files):
    for path, data in files.items():
        local = tmp_path / path.lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(data) if isinstance(data, bytes) else local.write_text(data)
    return common_host.Host(str(tmp_path), runner=lambda argv: (127, "", "not found"), kernel_root=str(tmp_path),
                            kernel_release="6.8.0-45-generic", path_env="", dev_root=str(tmp_path))


def module_blob(kernel="6.8.0-45-generic", version="580.159.04"):
    return ("version=%s\0license=Dual MIT/GPL\0name=nvidia\0vermagic=%s SMP preempt mod_unload \0" % (version, kernel)).encode()


# --- the real H200 capture -----------------------------------------------------------------------


def test_h200_capture_module_outside_any_kernel_tree_and_no_installed_kernel():
    host, facts = gathered(CAPTURE)
    k = facts["kernels"]
    assert k["running"] == "6.18.44-fc-v973-gpu"
    assert k["installed"] == [] and k["dkms"] == [] and k["precompiled_packages"] == {}
    assert k["next_boot"]["release"] is None and k["next_boot"]["source"] == "unknown"
    assert "direct kernel boot" in k["next_boot"]["detail"]
    (running,) = k["modules"]
    assert running["state"] == "ok"
    assert running["files"] == [{
        "path": "/usr/local/nvidia/modules/nvidia.ko", "state": "ok", "version": "580.159.04",
        "vermagic": "6.18.44-fc-v973-gpu SMP preempt ", "kernel": "6.18.44-fc-v973-gpu",
        "detail": "version 580.159.04, built for 6.18.44-fc-v973-gpu", "source": "file"}]
    assert facts["driver_libraries"]["state"] == "ok"
    assert facts["driver_libraries"]["libraries"] == {"580.159.04": ["/usr/local/nvidia/lib64/libnvidia-ml.so.580.159.04"]}
    assert facts["nvml_reload"]["state"] == "not_exposed"
    assert facts["nvml_reload"]["reason"].startswith("systemd is not the init")
    # the day-2 facts start no process: the capture's one command is nvidia-smi
    assert host.calls == [["/usr/local/nvidia/bin/nvidia-smi", "-q", "-x"]]


def test_h200_capture_preflight_and_validation_say_what_they_could_not_check():
    dummy, facts = gathered(CAPTURE)
    result = pf.evaluate(facts, driver_method="preinstalled", container_runtime="containerd")
    assert result["checks"]["next_boot_module"]["outcome"] == "skipped"
    assert result["checks"]["driver_library_mismatch"]["outcome"] == "pass"
    assert result["checks"]["nvml_reload_exposure"]["outcome"] == "pass"
    validation, dummy = V.validate_host(CaptureHost(CAPTURE), VALIDATE)
    assert check(validation, "kernel_next_boot")["status"] == "skipped"
    assert check(validation, "driver_libraries")["status"] == "ok"
    assert check(validation, "nvml_reload")["msg"].endswith("(the daemon-reload proof was not run: nvml_reload_test is off)")


# --- derived: a new kernel without module, libraries ahead of the module --------------------------


def test_new_kernel_without_module_found():
    dummy, facts = gathered(NEWKERNEL)
    k = facts["kernels"]
    assert [i["release"] for i in k["installed"]] == ["6.8.0-45-generic", "6.8.0-51-generic"]
    assert k["next_boot"]["release"] == "6.8.0-51-generic" and k["next_boot"]["source"] == "grub"
    assert k["next_boot"]["module"] == "missing"
    running = next(m for m in k["modules"] if m["release"] == "6.8.0-45-generic")
    assert running["state"] == "ok" and running["files"][0]["source"] == "dkms"  # read through xz
    assert running["dkms"][0]["module"].endswith("/6.8.0-45-generic/x86_64/module/nvidia.ko.xz")
    assert k["unbooted_without_module"] == ["6.8.0-51-generic"]


def test_new_kernel_without_module_preflight_and_validation():
    dummy, facts = gathered(NEWKERNEL)
    result = pf.evaluate(facts, driver_method="preinstalled", container_runtime="containerd")
    (problem,) = [p for p in result["problems"] if p["rule"] == "next_boot_module"]
    assert problem["severity"] == "warning"
    assert "the next boot kernel 6.8.0-51-generic" in problem["message"]
    assert "linux-headers-6.8.0-51-generic" in problem["fix"]
    validation, dummy = V.validate_host(CaptureHost(NEWKERNEL), VALIDATE)
    assert check(validation, "kernel_next_boot")["status"] == "drift"


def test_libraries_newer_than_the_loaded_module_is_a_mismatch_with_who_holds_the_gpu():
    dummy, facts = gathered(LIBDRIFT)
    mismatch = facts["driver_libraries"]
    assert mismatch["state"] == "drift" and mismatch["loaded"] == "580.159.04"
    assert list(mismatch["libraries"]) == ["580.173.02"]
    assert mismatch["holders"] == [{"pid": 4242, "command": "python3"}] and mismatch["fix"] == "reboot"
    # the module on disk is the loaded one, not the libraries': the running kernel's module is stale too
    assert facts["kernels"]["modules"][0]["state"] == "other_version"
    validation, dummy = V.validate_host(CaptureHost(LIBDRIFT), VALIDATE)
    assert check(validation, "driver_libraries")["status"] == "failed"
    assert "stop what holds the GPU (python3 (4242))" in check(validation, "driver_libraries")["msg"]
    result = pf.evaluate(facts, driver_method="preinstalled", container_runtime="containerd")
    assert result["checks"]["driver_library_mismatch"]["outcome"] == "warning"


def test_mismatch_with_nothing_holding_the_gpu_says_reload(tmp_path):
    host = tree(tmp_path, {"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.173.02": "", "/proc/1/comm": "init\n"})
    (tmp_path / "proc/1/fd").mkdir()
    mismatch = library_mismatch(host, "580.159.04", None)
    assert (mismatch["state"], mismatch["holders"], mismatch["fix"]) == ("drift", [], "reload")
    assert fix_text(mismatch).startswith("No process holds the GPU: reload the modules")


def test_packages_count_where_no_library_is_found():
    packages = package_versions({"libnvidia-compute-580": "580.173.02-0ubuntu1", "nvidia-container-toolkit": "1.18.0-1"})
    assert packages == {"580.173.02": ["libnvidia-compute-580"]}


# --- module files ------------------------------------------------------------------------------------


def test_module_formats(tmp_path, monkeypatch):
    elf = derive_day2.modinfo_elf(module_blob())
    host = tree(tmp_path, {
        "/m/plain.ko": elf,
        "/m/packed.ko.xz": lzma.compress(elf, format=lzma.FORMAT_XZ),
        "/m/broken.ko.xz": b"not xz",
        "/m/text.ko": b"hello",
        "/m/packed.ko.zst": b"\x28\xb5\x2f\xfd",
    })
    for path in ("/m/plain.ko", "/m/packed.ko.xz"):
        entry = read_module(host, path)
        assert (entry["state"], entry["version"], entry["kernel"]) == ("ok", "580.159.04", "6.8.0-45-generic")
    assert "not a valid compressed file" in read_module(host, "/m/broken.ko.xz")["detail"]
    text = read_module(host, "/m/text.ko")
    assert text["state"] == "unreadable" and "not an ELF file" in text["detail"] and "modinfo not found" in text["detail"]
    monkeypatch.setattr(modinfo, "_zstd_decompress", lambda data: None)
    zst = read_module(host, "/m/packed.ko.zst")
    assert zst["state"] == "unreadable" and zst["version"] is None
    assert "no zstd decoder" in zst["detail"]


@pytest.mark.parametrize(
    "files, built, state",
    [
        ([{"state": "ok", "kernel": "K", "version": "580.1", "path": "/a"}], [], "ok"),
        ([{"state": "ok", "kernel": "K", "version": "575.9", "path": "/a"}], [], "other_version"),
        ([{"state": "ok", "kernel": "J", "version": "580.1", "path": "/a"}], [], "wrong_kernel"),
        ([{"state": "unreadable", "kernel": None, "version": None, "path": "/a", "detail": "why"}], [], "unreadable"),
        ([], [{"version": "580.1", "kernel": "K", "module": "/var/lib/dkms/x"}], "built_not_installed"),
        ([], [], "missing"),
    ],
)
def test_module_state(files, built, state):
    assert kernels._module_state(files, built, "K", "580.1")[0] == state


def test_precompiled_packages_name_their_kernel():
    dpkg = {"linux-modules-nvidia-580-server-open-6.8.0-51-generic": "6.8.0-51.52", "linux-modules-nvidia-580-open-generic": "1"}
    assert kernels.precompiled_packages(dpkg) == {"6.8.0-51-generic": "linux-modules-nvidia-580-server-open-6.8.0-51-generic"}


# --- the next boot kernel -----------------------------------------------------------------------------


def test_next_boot_newest_sorts_numbers_as_numbers(tmp_path):
    host = tree(tmp_path, {"/boot/vmlinuz-6.8.0-45-generic": "", "/boot/vmlinuz-6.8.0-100-generic": ""})
    boot = kernels.next_boot_kernel(host, kernels.installed_kernels(host))
    assert (boot["release"], boot["source"]) == ("6.8.0-100-generic", "newest")


def test_next_boot_from_grub_cfg_first_entry(tmp_path):
    host = tree(tmp_path, {
        "/boot/vmlinuz-6.8.0-45-generic": "", "/boot/vmlinuz-6.8.0-51-generic": "",
        "/boot/grub/grub.cfg": 'set default="0"\nmenuentry "Ubuntu" {\n\tlinux\t/boot/vmlinuz-6.8.0-45-generic root=UUID=x ro\n}\n',
    })
    boot = kernels.next_boot_kernel(host, kernels.installed_kernels(host))
    assert (boot["release"], boot["source"]) == ("6.8.0-45-generic", "grub")


UBUNTU_GRUB_CFG = """if [ -s $prefix/grubenv ]; then
  load_env
fi
if [ "${next_entry}" ] ; then
   set default="${next_entry}"
   set next_entry=
   save_env next_entry
else
   set default="%s"
fi
menuentry 'Ubuntu' --class ubuntu {
\tlinux\t/boot/vmlinuz-6.8.0-51-generic root=UUID=0b1c ro
}
submenu 'Advanced options for Ubuntu' {
\tmenuentry 'Ubuntu, with Linux 6.8.0-45-generic' {
\t\tlinux\t/boot/vmlinuz-6.8.0-45-generic root=UUID=0b1c ro
\t}
}
"""


@pytest.mark.parametrize(
    "default, grubenv, release, detail",
    [
        # GRUB_DEFAULT=0: a saved_entry left by an earlier grub-set-default does not count
        ("0", "saved_entry=gnulinux-6.8.0-45-generic-advanced-0b1c\n", "6.8.0-51-generic", "the first menu entry"),
        # GRUB_DEFAULT=saved: it does
        ("${saved_entry}", "saved_entry=gnulinux-6.8.0-45-generic-advanced-0b1c\n", "6.8.0-45-generic", "saved_entry="),
        # grub-reboot's one-time entry wins either way
        ("0", "next_entry=Advanced options for Ubuntu>Ubuntu, with Linux 6.8.0-45-generic\n", "6.8.0-45-generic", "next_entry="),
    ],
)
def test_next_boot_follows_grub_as_ubuntu_writes_it(tmp_path, default, grubenv, release, detail):
    host = tree(tmp_path, {"/boot/vmlinuz-6.8.0-45-generic": "", "/boot/vmlinuz-6.8.0-51-generic": "",
                           "/boot/grub/grub.cfg": UBUNTU_GRUB_CFG % default, "/boot/grub/grubenv": "# GRUB Environment Block\n" + grubenv})
    boot = kernels.next_boot_kernel(host, kernels.installed_kernels(host))
    assert (boot["release"], boot["source"]) == (release, "grub")
    assert detail in boot["detail"]


def test_next_boot_from_grubby_on_el(tmp_path):
    host = tree(tmp_path, {"/boot/vmlinuz-5.14.0-427.el9.x86_64": "", "/boot/vmlinuz-5.14.0-503.el9.x86_64": "", "/usr/sbin/grubby": ""})
    os.chmod(str(tmp_path / "usr/sbin/grubby"), 0o755)
    host.runner = lambda argv: (0, "/boot/vmlinuz-5.14.0-427.el9.x86_64\n", "") if argv[1:] == ["--default-kernel"] else (1, "", "")
    boot = kernels.next_boot_kernel(host, kernels.installed_kernels(host))
    assert (boot["release"], boot["source"]) == ("5.14.0-427.el9.x86_64", "grubby")


# --- NVML after daemon-reload -------------------------------------------------------------------------

CONTAINERD_SYSTEMD = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
"""
CONTAINER = {"containerd": {"installed": True, "config_exists": True, "config_path": "/etc/containerd/config.toml", "imports": []}}


def _nvml_host(tmp_path, monkeypatch, files, links=()):
    files = dict({"/run/systemd/system/.keep": "", "/etc/containerd/config.toml": CONTAINERD_SYSTEMD,
                  "/dev/nvidia0": "", "/dev/nvidiactl": ""}, **files)
    host = tree(tmp_path, files)
    numbers = {"/dev/nvidia0": (195, 0), "/dev/nvidiactl": (195, 255)}
    monkeypatch.setattr(day2, "device_number", lambda unused_host, node: numbers.get(node))
    for link in links:
        (tmp_path / "dev/char").mkdir(parents=True, exist_ok=True)
        os.symlink("../nvidia0", str(tmp_path / "dev/char" / link))
    return host


def test_systemd_cgroup_legacy_mode_without_links_is_exposed(tmp_path, monkeypatch):
    facts = day2.gather_nvml_reload(_nvml_host(tmp_path, monkeypatch, {}), Probes(), CONTAINER)
    assert facts["state"] == "exposed" and facts["cgroup_drivers"]["containerd"] == "systemd"
    assert facts["dev_char_missing"] == ["/dev/nvidia0 (/dev/char/195:0)", "/dev/nvidiactl (/dev/char/195:255)"]
    assert facts["reason"].startswith("exposed to NVML loss after systemctl daemon-reload: containerd uses the systemd cgroup driver")
    assert "create-dev-char-symlinks" in facts["fix"]


def test_cdi_mode_or_every_link_protects(tmp_path, monkeypatch):
    cdi = {"/etc/nvidia-container-runtime/config.toml": '[nvidia-container-runtime]\nmode = "cdi"\n'}
    assert day2.gather_nvml_reload(_nvml_host(tmp_path / "a", monkeypatch, cdi), Probes(), CONTAINER)["state"] == "protected"
    linked = _nvml_host(tmp_path / "b", monkeypatch, {}, links=("195:0", "195:255"))
    assert day2.gather_nvml_reload(linked, Probes(), CONTAINER)["state"] == "protected"


@pytest.mark.parametrize("version, state, words", [
    ("1.20.0-1", "protected", "auto mode, jit-cdi for toolkit 1.20.0-1"),  # auto is JIT-CDI from 1.18: the spec has the devices
    ("1.17.8-1", "exposed", "auto mode, legacy for toolkit 1.17.8-1"),  # auto is the legacy hook before 1.18
    (None, "exposed", "auto mode of a toolkit of unknown version (taken as legacy"),
])
def test_auto_mode_follows_the_toolkit_release(tmp_path, monkeypatch, version, state, words):
    container = dict(CONTAINER, toolkit={"version": version})
    facts = day2.gather_nvml_reload(_nvml_host(tmp_path, monkeypatch, {}), Probes(), container)
    assert facts["state"] == state and words in facts["reason"]
    assert facts["toolkit_mode"] == "auto"


def test_docker_run_gpus_is_exposed_even_in_cdi_mode(tmp_path, monkeypatch):
    cdi = {"/etc/nvidia-container-runtime/config.toml": '[nvidia-container-runtime]\nmode = "cdi"\n',
           "/etc/docker/daemon.json": '{"exec-opts": ["native.cgroupdriver=systemd"]}'}
    container = {"docker": {"installed": True}, "toolkit": {"version": "1.20.0"}}
    facts = day2.gather_nvml_reload(_nvml_host(tmp_path, monkeypatch, cdi), Probes(), container)
    assert facts["state"] == "exposed" and "docker run --gpus uses the legacy hook" in facts["reason"]


@pytest.mark.parametrize("runtime, driver, mode, exposed", [
    ("containerd", "systemd", "legacy", True), ("containerd", "systemd", "jit-cdi", False),
    ("crio", "systemd", "cdi", False), ("containerd", "cgroupfs", "legacy", False),
    ("docker", "systemd", "jit-cdi", True), ("k3s", "systemd", "csv", False)])
def test_the_one_reload_rule(runtime, driver, mode, exposed):
    assert day2.reload_exposed(runtime, driver, mode) is exposed


def test_the_fix_names_the_toolkit_roles_real_switches():
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "../../../../roles/container_toolkit/defaults/main.yml")) as handle:
        defaults = handle.read()
    for switch in ("container_toolkit_dev_char_symlinks", "container_toolkit_enable_cdi"):
        assert switch in day2.FIX_CDI and "\n%s:" % switch in defaults
    assert "container_toolkit_cdi)" not in day2.FIX_CDI


def test_cgroupfs_containerd_is_not_exposed(tmp_path, monkeypatch):
    host = _nvml_host(tmp_path, monkeypatch, {"/etc/containerd/config.toml": CONTAINERD_SYSTEMD.replace("true", "false")})
    facts = day2.gather_nvml_reload(host, Probes(), CONTAINER)
    assert (facts["state"], facts["cgroup_drivers"]["containerd"]) == ("not_exposed", "cgroupfs")


def test_crio_defaults_to_systemd_and_docker_follows_exec_opts(tmp_path):
    host = tree(tmp_path, {"/etc/docker/daemon.json": '{"exec-opts": ["native.cgroupdriver=cgroupfs"]}'})
    assert day2.crio_driver(host, {"crio": {"installed": True}}) == "systemd"
    assert day2.docker_driver(host, {"docker": {"installed": True}}) == "cgroupfs"


def _exposed_facts():
    return {"gpu_count": 1, "nvml_reload": {"state": "exposed", "systemd": True, "reason": "exposed", "fix": day2.FIX_CDI}}


class _Docker(object):
    def __init__(self, after_rc):
        self.calls, self.after_rc, self.reloaded = [], after_rc, False

    def __call__(self, argv):
        self.calls.append(argv)
        if argv == ["systemctl", "daemon-reload"]:
            self.reloaded = True
        if argv[1:2] == ["exec"] and self.reloaded:
            return self.after_rc, "", "Failed to initialize NVML: Unknown Error" if self.after_rc else ""
        return 0, "GPU 0: NVIDIA H200", ""


@pytest.mark.parametrize("after_rc, status", [(0, "ok"), (9, "failed")])
def test_the_daemon_reload_proof(tmp_path, after_rc, status):
    host = tree(tmp_path, {"/usr/bin/docker": ""})
    os.chmod(str(tmp_path / "usr/bin/docker"), 0o755)
    host.chrooted = False
    runner = _Docker(after_rc)
    host.runner = runner
    checks = Checks()
    vday2.check_nvml_reload(checks, host, _exposed_facts(), True, "cuda:13.0.0-base", "docker")
    assert checks.items[0]["status"] == status
    assert runner.calls[-1] == ["/usr/bin/docker", "rm", "-f", vday2.CONTAINER_NAME]  # removed either way
    assert ["systemctl", "daemon-reload"] in runner.calls


def test_the_proof_is_not_run_unless_asked_nor_where_it_cannot(tmp_path):
    host = tree(tmp_path, {})
    host.runner = lambda argv: pytest.fail("nothing may run: %s" % argv)
    checks = Checks()
    vday2.check_nvml_reload(checks, host, _exposed_facts(), False, "img", "docker")
    assert checks.items[0]["status"] == "drift" and "nvml_reload_test is off" in checks.items[0]["msg"]
    vday2.check_nvml_reload(checks, host, _exposed_facts(), True, "img", "docker")
    assert checks.items[1]["status"] == "skipped" and "is mounted at" in checks.items[1]["msg"]


# --- runtime drift --------------------------------------------------------------------------------

_KEY = ["plugins", "io.containerd.grpc.v1.cri", "containerd", "default_runtime_name"]


def _written(default):
    record = managed.encode_record({"keys": [{"path": _KEY, "raw": '"runc"', "set": "nvidia"}]})
    return """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "%s"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  %s
  runtime_type = "io.containerd.runc.v2"
""" % (default, record)


def test_recorded_setting_changed_since_is_drift_with_the_diff():
    changes, diff = vday2.file_drift("/etc/containerd/config.toml", _written("runc"))
    assert changes == ['/etc/containerd/config.toml: plugins."io.containerd.grpc.v1.cri".containerd.default_runtime_name is "runc", '
                       'written "nvidia"']
    assert diff == ['-plugins."io.containerd.grpc.v1.cri".containerd.default_runtime_name = "nvidia"',
                    '+plugins."io.containerd.grpc.v1.cri".containerd.default_runtime_name = "runc"']
    assert vday2.file_drift("/etc/containerd/config.toml", _written("nvidia")) == ([], [])


def test_a_managed_file_without_its_record_is_drift():
    changes, unused_diff = vday2.file_drift("/x.toml.tmpl", managed.OWNER_MARK + "\n{{ template \"base\" . }}\n", template=True)
    assert changes == ["/x.toml.tmpl: managed by the collection but its state record is gone"]


def test_runtime_drift_check_reads_the_template_of_k3s(tmp_path):
    template = "{{ template \"base\" . }}\n" + _written("runc")
    host = tree(tmp_path, {"/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl": template})
    checks = Checks()
    assert vday2.check_runtime_drift(checks, host, {"container": {"containerd": {}}}) == "drift"
    assert checks.items[0]["diff"].startswith("--- /var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl (as gpufleet.nvidia")


def test_the_replay_gives_what_the_live_run_gave():
    """live-discovery.json: the same facts read on the real machine (README-day2.md)."""
    with open(os.path.join(HOSTS, CAPTURE, "live-discovery.json")) as handle:
        live = json.load(handle)
    dummy, facts = gathered(CAPTURE)
    # dkms_sources came after the live run; the real machine has no DKMS tree at all (README-day2.md).
    assert facts["kernels"].pop("dkms_sources") == []
    assert facts["kernels"] == live["kernels"]
    assert facts["driver_libraries"] == live["driver_libraries"]
    replayed = dict(facts["nvml_reload"], dev_char_missing=None)
    assert replayed == dict(live["nvml_reload"], dev_char_missing=None)
    assert live["nvml_reload"]["dev_char_missing"][2] == "/dev/nvidia0 (/dev/char/195:0)"
    result = pf.evaluate(facts, driver_method="preinstalled", container_runtime="containerd")
    assert dict((k, result["checks"][k]) for k in live["preflight"]) == live["preflight"]


def test_debian_layout_dkms_source_without_headers_is_the_running_kernel_problem(tmp_path):
    """The lab's node as it is (a podman container with Debian 12's driver, see the README's make
    demo): Debian keeps libnvidia-ml under nvidia/current and names its packages without the branch,
    DKMS has the nvidia-current source but could not build it (the running kernel's headers are not
    in the repositories), no kernel under /boot or /lib/modules. Before, the libraries were not
    found ("driver/library versions not checked") and the DKMS source was not seen."""
    host = tree(tmp_path, {
        "/usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.535.309.01": b"",
        "/var/lib/dkms/nvidia-current/535.309.01/build/make.log": "",
    })
    os.symlink("/usr/src/nvidia-current-535.309.01", str(tmp_path / "var/lib/dkms/nvidia-current/535.309.01/source"))
    dpkg = {"libnvidia-ml1": "535.309.01-0+deb12u1", "nvidia-kernel-dkms": "535.309.01-0+deb12u1",
            "nvidia-kernel-common": "20220217+3~deb12u1"}
    found, libraries = kernels.gather(host, Probes(), dpkg, None)
    assert libraries["libraries"] == {"535.309.01": ["/usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.535.309.01"]}
    assert libraries["packages"] == {"535.309.01": ["libnvidia-ml1", "nvidia-kernel-dkms"]}
    assert found["driver_version"] == "535.309.01"
    assert found["dkms_sources"] == [{"name": "nvidia-current", "version": "535.309.01"}]
    running, = found["modules"]
    assert running["state"] == "missing"
    assert running["detail"] == (
        "no nvidia module for 6.8.0-45-generic: DKMS has the driver's source (nvidia-current 535.309.01) but could not "
        "build it for this kernel, whose headers are not installed (no /lib/modules/6.8.0-45-generic/build)")
    message, dummy_reason, fix = kernels.next_boot_problem(found)
    assert message.startswith("the running kernel 6.8.0-45-generic has no nvidia module for driver 535.309.01, and the next "
                              "boot kernel is not known")
    assert "linux-headers-6.8.0-45-generic" in fix
    checks = Checks()
    vday2.check_kernel_next_boot(checks, {"kernels": found})
    assert checks.items[0]["status"] == "drift" and "could not build it for this kernel" in checks.items[0]["msg"]


def test_a_containerd_drop_ins_record_is_of_the_main_file_that_imports_it(tmp_path):
    """The lab's files as the module wrote them (drop-in mode): the drop-in's record lists what the
    module changed in the main file (imports). Before, it was compared with the drop-in itself,
    which has no imports: every drop-in node was reported as drifted."""
    record = managed.encode_record({"keys": [{"path": ["imports"], "raw": None, "set": ["/etc/containerd/conf.d/*.toml"]}]})
    dropin = "%s\n%s\nversion = 2\n" % (managed.OWNER_MARK, record)
    files = {"/etc/containerd/config.toml": 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n',
             "/etc/containerd/conf.d/99-nvidia.toml": dropin}
    facts = {"container": {"containerd": {"config_path": "/etc/containerd/config.toml",
                                          "imports": ["/etc/containerd/conf.d/*.toml"]}}}
    checks = Checks()
    vday2.check_runtime_drift(checks, tree(tmp_path, files), facts)
    assert (checks.items[0]["status"], checks.items[0]["msg"]) == (
        "ok", "every setting the collection recorded in the runtime's files is as it wrote it")
    # Someone took the import out of the main file: that is the drift, named in the main file.
    files["/etc/containerd/config.toml"] = "version = 2\n"
    checks = Checks()
    vday2.check_runtime_drift(checks, tree(tmp_path / "again", files), facts)
    assert checks.items[0]["status"] == "drift"
    assert '/etc/containerd/config.toml: imports is (absent), written ["/etc/containerd/conf.d/*.toml"]' in checks.items[0]["msg"]
