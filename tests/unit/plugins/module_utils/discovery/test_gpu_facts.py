"""Tests of module_utils/discovery/facts.py, replayed from the host captures in tests/unit/fixtures/hosts (see captures.py)."""

from __future__ import annotations

import gzip
import os
import posixpath
import subprocess

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import toml_subset
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import facts as gf
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.container import (
    cri_plugin_name,
    parse_containerd_config,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.driver import (
    _driver_source,
    found_driver,
    found_of,
    gather_driver,
    parse_nvrm_version,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.machine import (
    SECURE_BOOT_VAR,
    os_family,
    parse_os_release,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.nvidia_smi import (
    _normalise_bus_id,
    parse_nvidia_smi_xml,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.packages import dpkg_owner, parse_dpkg_status
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.pci import (
    _gpu_name,
    _numa_node,
    _nvidia_function,
    parse_pci_ids,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import Probes
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.topology import (
    _nvlink_pairs,
    gather_fabric_manager,
    parse_topo_matrix,
)
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.discovery.captures import (
    HOSTS,
    CaptureHost,
    _node,
    _read,
    fixture_facts,
)


def states(facts):
    return dict((k, v["state"]) for k, v in facts["probes"].items())


ALL_PROBES = {
    "containerd",
    "containerd_config",
    "crio",
    "docker",
    "docker_config",
    "dpkg_status",
    "fabric_manager",
    "driver_package",
    "driver_version_file",
    "k3s",
    "kernel_headers",
    "kernel_modules",
    "modinfo",
    "nvidia_smi",
    "nvml_reload",
    "os_release",
    "pci_devices",
    "pci_ids",
    "proc_modules",
    "rke2",
    "secure_boot",
    "toolkit",
    "topology",
}


@pytest.mark.parametrize(
    "name",
    [
        "ubuntu2404-h200-preinstalled",
        "ubuntu2404-h200-smi-failing",
        "debian12-nogpu",
        "debian12-l40s-x2-package",
        "ubuntu2204-v100-nouveau",
        "rocky9-h100x8-rpm-rke2",
        "ubuntu2404-h200x2-preinstalled",
        "el9-standin-dpkg-rpm",
    ],
)
def test_every_probe_is_reported(name):
    facts = fixture_facts(name)
    assert set(facts["probes"]) == ALL_PROBES
    assert all(p["state"] in ("ok", "missing", "error") for p in facts["probes"].values())
    assert set(facts) == {
        "schema",
        "host_root",
        "gpus",
        "gpu_count",
        "nvswitches",
        "topology",
        "fabric_manager",
        "driver",
        "container",
        "os",
        "kernel",
        "secure_boot",
        "kernels",
        "driver_libraries",
        "nvml_reload",
        "probes",
    }


# --- the real captures -------------------------------------------------------------------------


def test_h200_preinstalled_capture():
    host = CaptureHost("ubuntu2404-h200-preinstalled")
    facts = gf.gather_facts(host)
    assert facts["gpu_count"] == 1
    assert facts["gpus"] == [
        {
            "bus_id": "0000:00:06.0",
            "vendor_id": "0x10de",
            "device_id": "0x2335",
            "subsystem_vendor_id": "0x10de",
            "subsystem_device_id": "0x18bf",
            "class": "0x030200",
            "name": "GH100 [H200 SXM 141GB]",
            "name_source": "table",
            "architecture": "Hopper",
            "kernel_driver": "nvidia",
            "numa_node": None,
        }
    ]
    assert facts["nvswitches"] == {"count": 0, "bus_ids": []}
    driver = facts["driver"]
    assert driver["loaded"] is True
    assert driver["modules"] == ["nvidia", "nvidia_uvm"]
    assert driver["version"] == "580.159.04"
    assert driver["flavor"] == "open"
    assert driver["nouveau_loaded"] is False
    assert driver["installed"]["state"] == "missing"
    assert driver["source"] == "preinstalled"
    assert driver["package"] is None
    assert driver["libcuda"] == "/usr/local/nvidia/lib64/libcuda.so.1"
    smi = driver["nvidia_smi"]
    assert smi["state"] == "ok"
    assert smi["path"] == "/usr/local/nvidia/bin/nvidia-smi"
    assert smi["driver_version"] == "580.159.04"
    assert smi["cuda_version"] == "13.0"
    assert smi["gpus"] == [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "uuid": "GPU-d35d5d0d-d305-4f92-c0d5-c310f071b577",
            "bus_id": "0000:00:06.0",
            "architecture": "Hopper",
            "memory_total_mib": 143771,
            "mig_capable": True,
            "mig_mode_current": "disabled",
            "mig_mode_pending": "disabled",
            "persistence_mode": "enabled",
        }
    ]
    assert facts["os"] == {
        "id": "ubuntu",
        "id_like": "debian",
        "version_id": "24.04",
        "version_major": "24",
        "codename": "noble",
        "pretty_name": "Ubuntu 24.04.3 LTS",
        "family": "debian",
    }
    assert facts["kernel"] == {
        "release": "6.18.44-fc-v657-gpu",
        "headers_installed": False,
        "headers_path": "/lib/modules/6.18.44-fc-v657-gpu/build",
    }
    assert facts["secure_boot"] == {"state": "not_efi", "dkms_mok_key": False, "mok_keys": []}
    container = facts["container"]
    assert [k for k, v in container.items() if v["installed"]] == []
    # one subprocess: the nvidia-smi call; nothing else exists on that host
    assert host.calls == [["/usr/local/nvidia/bin/nvidia-smi", "-q", "-x"]]
    assert states(facts) == {
        "containerd": "missing",
        "containerd_config": "missing",
        "crio": "missing",
        "docker": "missing",
        "docker_config": "missing",
        "fabric_manager": "missing",
        "dpkg_status": "missing",
        "driver_package": "missing",
        "driver_version_file": "ok",
        "k3s": "missing",
        "kernel_headers": "missing",
        "kernel_modules": "ok",
        "modinfo": "missing",
        "nvidia_smi": "ok",
        "nvml_reload": "ok",
        "os_release": "ok",
        "pci_devices": "ok",
        "pci_ids": "missing",
        "proc_modules": "ok",
        "rke2": "missing",
        "secure_boot": "ok",
        "toolkit": "missing",
        "topology": "ok",
    }


def test_debian12_nogpu_capture():
    host = CaptureHost("debian12-nogpu")
    facts = gf.gather_facts(host)
    assert facts["gpus"] == [] and facts["gpu_count"] == 0
    assert facts["probes"]["pci_devices"] == {"state": "ok", "detail": "6 PCI devices, 0 NVIDIA GPUs, 0 NVSwitches"}
    assert facts["probes"]["proc_modules"]["state"] == "missing"
    assert facts["driver"]["source"] == "absent"
    assert facts["driver"]["loaded"] is False
    assert facts["driver"]["packages"] == []
    assert facts["driver"]["nvidia_smi"]["state"] == "missing"
    containerd = facts["container"]["containerd"]
    assert containerd["installed"] is True
    assert containerd["path"] == "/usr/bin/containerd"
    assert containerd["version"] == "1.6.20~ds1"
    assert containerd["config_exists"] is True
    assert containerd["config_version"] == 2
    assert containerd["cri_plugin"] == "io.containerd.grpc.v1.cri"
    assert containerd["cri_disabled"] is False
    assert facts["os"]["id"] == "debian" and facts["os"]["version_major"] == "12"
    assert facts["os"]["family"] == "debian"
    assert host.calls == [["/usr/bin/containerd", "--version"]]


# --- the derived fixtures ----------------------------------------------------------------------


def test_nvidia_smi_failing_is_a_reported_state():
    facts = fixture_facts("ubuntu2404-h200-smi-failing")
    smi = facts["driver"]["nvidia_smi"]
    assert smi["state"] == "error"
    assert smi["detail"] == (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running."
    )
    assert facts["probes"]["nvidia_smi"] == {
        "state": "error",
        "detail": "nvidia-smi -q -x exited 9: NVIDIA-SMI has failed because it couldn't communicate with the "
        "NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.",
    }
    assert facts["driver"]["loaded"] is False
    assert facts["driver"]["version"] is None
    assert facts["driver"]["source"] == "preinstalled"
    assert facts["gpus"][0]["kernel_driver"] is None
    assert facts["probes"]["driver_version_file"]["state"] == "missing"


def test_debian_package_owned_proprietary_multi_gpu():
    host = CaptureHost("debian12-l40s-x2-package")
    facts = gf.gather_facts(host)
    assert [(g["bus_id"], g["name"], g["name_source"], g["architecture"], g["numa_node"]) for g in facts["gpus"]] == [
        ("0000:41:00.0", "AD102GL [L40S]", "pci.ids", "Ada Lovelace", 0),
        ("0000:c1:00.0", "AD102GL [L40S]", "pci.ids", "Ada Lovelace", 1),
    ]  # the ASPEED VGA (vendor 0x1a03) is not an NVIDIA GPU
    driver = facts["driver"]
    assert (driver["version"], driver["flavor"]) == ("550.163.01", "proprietary")
    assert driver["modules"] == ["nvidia", "nvidia_drm", "nvidia_modeset", "nvidia_uvm"]
    assert driver["installed"] == {
        "state": "ok",
        "version": "550.163.01",
        "flavor": "proprietary",
        "filename": "/lib/modules/6.1.0-28-amd64/updates/dkms/nvidia-current.ko",
        "signer": "DKMS module signing key",
    }
    assert driver["source"] == "package"
    assert driver["package"] == {"manager": "dpkg", "name": "nvidia-smi", "version": "550.163.01-1"}
    names = [p["name"] for p in driver["packages"]]
    assert "nvidia-driver" in names and "libcuda1" in names
    assert "nvidia-open-kernel-dkms" not in names  # only its config files are left
    assert facts["secure_boot"] == {"state": "enabled", "dkms_mok_key": True, "mok_keys": ["/var/lib/dkms/mok.pub"]}
    # /lib/modules/<rel>/build is an absolute link, resolved inside the host root
    assert facts["kernel"]["headers_installed"] is True
    containerd = facts["container"]["containerd"]
    assert containerd["version"] == "1.7.27"
    assert containerd["config_version"] is None
    assert containerd["cri_plugin"] == "cri"
    assert containerd["disabled_plugins"] == ["cri"]
    assert containerd["cri_disabled"] is True
    docker = facts["container"]["docker"]
    assert (docker["installed"], docker["version"], docker["runtimes"]) == (True, "28.3.3", ["nvidia"])
    toolkit = facts["container"]["toolkit"]
    assert (toolkit["version"], toolkit["version_source"]) == ("1.17.8-1", "dpkg")
    assert toolkit["packages"] == {
        "nvidia-container-toolkit": "1.17.8-1",
        "nvidia-container-toolkit-base": "1.17.8-1",
        "libnvidia-container-tools": "1.17.8-1",
        "libnvidia-container1": "1.17.8-1",
    }
    assert facts["probes"]["pci_ids"]["state"] == "ok"
    # nvidia-ctk is not run: dpkg already knows the toolkit's version
    assert sorted(c[0] for c in host.calls) == [
        "/usr/bin/containerd",
        "/usr/bin/dockerd",
        "/usr/bin/nvidia-smi",
        "/usr/bin/nvidia-smi",  # topo -m: two GPUs
        "/usr/sbin/modinfo",
    ]


def test_libcuda_owner_found_through_the_resolved_link():
    host = CaptureHost("debian12-l40s-x2-package")
    name, path = dpkg_owner(host, ["/usr/lib/x86_64-linux-gnu/libcuda.so.550.163.01"])
    assert (name, path) == ("libcuda1", "/usr/lib/x86_64-linux-gnu/libcuda.so.550.163.01")
    # usrmerge: /lib/... is found in a list that says /usr/lib/...
    name, path = dpkg_owner(host, ["/lib/x86_64-linux-gnu/libcuda.so.1"])
    assert name == "libcuda1"


def test_nouveau_volta_without_nvidia_driver():
    facts = fixture_facts("ubuntu2204-v100-nouveau")
    gpu = facts["gpus"][0]
    assert (gpu["name"], gpu["name_source"], gpu["architecture"], gpu["kernel_driver"]) == (
        "GV100GL [Tesla V100 SXM2 16GB]",
        "table",
        "Volta",
        "nouveau",
    )
    driver = facts["driver"]
    assert driver["nouveau_loaded"] is True
    assert driver["loaded"] is False
    assert driver["source"] == "absent"
    assert driver["installed"]["state"] == "missing"
    assert facts["probes"]["modinfo"] == {
        "state": "missing",
        "detail": "no nvidia kernel module for this kernel (modinfo: ERROR: Module nvidia not found.)",
    }
    assert facts["secure_boot"]["state"] == "enabled"
    assert facts["secure_boot"]["dkms_mok_key"] is False


def test_rpm_host_with_nvswitches_mig_and_rke2():
    host = CaptureHost("rocky9-h100x8-rpm-rke2")
    facts = gf.gather_facts(host)
    assert facts["gpu_count"] == 8
    assert {g["name"] for g in facts["gpus"]} == {"GH100 [H100 SXM5 80GB]"}
    assert facts["nvswitches"] == {
        "count": 4,
        "bus_ids": ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"],
    }
    driver = facts["driver"]
    assert (driver["version"], driver["flavor"], driver["installed"]["flavor"]) == ("570.172.08", "open", "open")
    assert driver["modules"] == ["nvidia", "nvidia_peermem", "nvidia_uvm"]
    assert driver["package"] == {"manager": "rpm", "name": "nvidia-driver-cuda", "version": "570.172.08-1.el9"}
    assert driver["source"] == "package"
    assert driver["packages"] is None
    rpm_calls = [c for c in host.calls if c[0] == "/usr/bin/rpm"]
    assert rpm_calls == [
        [
            "/usr/bin/rpm",
            "-qf",
            "--queryformat",
            "%{NAME}\t%{VERSION}-%{RELEASE}\n",
            "/usr/bin/nvidia-smi",
            "/usr/lib64/libcuda.so.1",
            "/usr/lib64/libcuda.so.570.172.08",
        ]
    ]
    smi = driver["nvidia_smi"]["gpus"]
    assert (smi[0]["mig_mode_current"], smi[0]["mig_mode_pending"]) == ("enabled", "enabled")
    assert (smi[1]["mig_mode_current"], smi[1]["mig_mode_pending"]) == ("disabled", "enabled")
    assert smi[7]["bus_id"] == "0000:db:00.0"
    assert facts["os"]["family"] == "redhat" and facts["os"]["version_major"] == "9"
    assert facts["secure_boot"]["state"] == "disabled"
    assert facts["kernel"]["headers_installed"] is False
    rke2 = facts["container"]["rke2"]
    assert (rke2["installed"], rke2["config_exists"], rke2["template_exists"]) == (True, True, False)
    assert facts["container"]["k3s"]["installed"] is False


def test_rpm_host_with_a_dpkg_database_asks_rpm():
    """An EL host that also has a dpkg database (EPEL's dpkg; the lab's EL stand-in, whose userland
    is Debian's): no dpkg package owns the dnf-installed nvidia-smi, rpm does (the capture's own
    answer), so the driver comes from a package, not "preinstalled"."""
    host = CaptureHost("el9-standin-dpkg-rpm")
    facts = gf.gather_facts(host)
    assert facts["os"]["family"] == "redhat"
    # the dpkg database (3 packages in the capture) is not read: no foreign package list stands
    # for the driver's, the toolkit's or the kernel's, which are rpm's
    assert facts["probes"]["dpkg_status"] == {
        "state": "missing", "detail": "not read: the host is of the redhat family, whose packages are rpm's"}
    assert facts["driver"]["packages"] is None
    assert facts["container"]["toolkit"]["packages"] is None
    driver = facts["driver"]
    assert driver["package"] == {"manager": "rpm", "name": "nvidia-driver-cuda", "version": "550.163.01-1.el9"}
    assert driver["source"] == "package"
    assert facts["probes"]["driver_package"] == {"state": "ok", "detail": "rpm: nvidia-driver-cuda 550.163.01-1.el9"}
    assert [c for c in host.calls if c[0] == "/usr/bin/rpm"] == [
        ["/usr/bin/rpm", "-qf", "--queryformat", "%{NAME}\t%{VERSION}-%{RELEASE}\n", "/usr/bin/nvidia-smi"]
    ]


def test_debian_host_asks_dpkg_only():
    """A Debian host's driver packages are dpkg's: rpm is not asked, even where dpkg owns nothing."""
    for name in ("debian12-l40s-x2-package", "debian12-nogpu", "ubuntu2404-h200-preinstalled"):
        host = CaptureHost(name)
        gf.gather_facts(host)
        assert not [c for c in host.calls if posixpath.basename(c[0]) == "rpm"], name


# --- probe failures become states --------------------------------------------------------------


class BrokenHost(CaptureHost):
    """A capture whose named files cannot be read."""

    def __init__(self, name, unreadable=(), **kwargs):
        super(BrokenHost, self).__init__(name, **kwargs)
        self.unreadable = set(unreadable)

    def read_text(self, path, kernel=False):
        if path in self.unreadable:
            raise IOError(13, "Permission denied")
        return super(BrokenHost, self).read_text(path, kernel)

    def read_bytes(self, path, kernel=False):
        if path in self.unreadable:
            raise IOError(13, "Permission denied")
        return super(BrokenHost, self).read_bytes(path, kernel)


@pytest.mark.parametrize(
    "path, probe, detail",
    [
        ("/etc/os-release", "os_release", "/etc/os-release: [Errno 13] Permission denied"),
        ("/proc/modules", "proc_modules", "/proc/modules: [Errno 13] Permission denied"),
        (
            "/etc/containerd/config.toml",
            "containerd_config",
            "/etc/containerd/config.toml: [Errno 13] Permission denied",
        ),
        ("/etc/docker/daemon.json", "docker_config", "/etc/docker/daemon.json: [Errno 13] Permission denied"),
        ("/var/lib/dpkg/status", "dpkg_status", "/var/lib/dpkg/status: [Errno 13] Permission denied"),
        ("/usr/share/misc/pci.ids", "pci_ids", "/usr/share/misc/pci.ids: [Errno 13] Permission denied"),
        (
            SECURE_BOOT_VAR,
            "secure_boot",
            SECURE_BOOT_VAR + ": [Errno 13] Permission denied",
        ),
    ],
)
def test_unreadable_file_is_an_error_probe(path, probe, detail):
    facts = gf.gather_facts(BrokenHost("debian12-l40s-x2-package", unreadable=[path]))
    assert facts["probes"][probe] == {"state": "error", "detail": detail}


def test_unreadable_secure_boot_variable_leaves_state_unknown():
    facts = gf.gather_facts(BrokenHost("debian12-l40s-x2-package", unreadable=[SECURE_BOOT_VAR]))
    assert facts["secure_boot"]["state"] == "unknown"


@pytest.mark.parametrize(
    "answer, detail",
    [
        ((0, "<nvidia_smi_log><gpu", ""), "/usr/bin/nvidia-smi -q -x: output is not XML: "),
        ((0, "<html/>", ""), "/usr/bin/nvidia-smi -q -x: unexpected root element <html>"),
        ((124, "", "/usr/bin/nvidia-smi -q -x timed out after 60 seconds"), "nvidia-smi -q -x exited 124: "),
        ((127, "", "[Errno 8] Exec format error"), "nvidia-smi -q -x exited 127: [Errno 8] Exec format error"),
    ],
)
def test_bad_nvidia_smi_answers_are_error_probes(answer, detail):
    facts = gf.gather_facts(CaptureHost("debian12-l40s-x2-package", commands={"nvidia-smi-q-x": answer}))
    assert facts["probes"]["nvidia_smi"]["state"] == "error"
    assert facts["probes"]["nvidia_smi"]["detail"].startswith(detail)
    assert facts["driver"]["nvidia_smi"]["state"] == "error"
    assert facts["gpu_count"] == 2  # the PCI facts stand


def test_failing_version_command_is_an_error_probe():
    facts = gf.gather_facts(
        CaptureHost("debian12-l40s-x2-package", commands={"dockerd-version": (1, "", "permission denied")})
    )
    assert facts["probes"]["docker"] == {"state": "error", "detail": "dockerd --version exited 1: permission denied"}
    assert facts["container"]["docker"]["installed"] is True
    assert facts["container"]["docker"]["version"] is None


def test_modinfo_failing_otherwise_is_an_error():
    facts = gf.gather_facts(
        CaptureHost(
            "debian12-l40s-x2-package", commands={"modinfo-nvidia": (1, "", "modinfo: ERROR: could not get modinfo")}
        )
    )
    assert facts["driver"]["installed"]["state"] == "error"
    assert facts["probes"]["modinfo"]["state"] == "error"


def test_bad_toml_and_json_are_error_probes(tmp_path, monkeypatch):
    host = CaptureHost("debian12-l40s-x2-package")
    texts = {"/etc/containerd/config.toml": "version = [", "/etc/docker/daemon.json": "{not json"}
    real = host.read_text
    monkeypatch.setattr(host, "read_text", lambda path, kernel=False: texts.get(path) or real(path, kernel))
    facts = gf.gather_facts(host)
    assert facts["probes"]["docker_config"]["state"] == "error"
    assert facts["probes"]["docker_config"]["detail"].startswith("/etc/docker/daemon.json is not valid JSON")
    if toml_subset.tomllib is not None:
        assert facts["probes"]["containerd_config"]["state"] == "error"
        assert facts["probes"]["containerd_config"]["detail"].startswith(
            "/etc/containerd/config.toml is not valid TOML"
        )


# --- parsers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \n",
            ("580.159.04", "open"),
        ),
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.163.01  Tue Apr  8 12:46:15 UTC 2025\n",
            ("550.163.01", "proprietary"),
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.26  Release Build\n",
            ("570.26", "open"),
        ),
        ("GCC version: gcc 12\n", (None, None)),
    ],
)
def test_parse_nvrm_version(text, expected):
    assert parse_nvrm_version(text) == expected


def test_parse_pci_ids_reads_only_the_nvidia_block():
    data = (
        b"# comment\n10dd  Evans & Sutherland\n\t0100  Lightning 1200\n"
        b"10de  NVIDIA Corporation\n\t2335  GH100 [H200 SXM 141GB]\n\t\t10de 18be  H200 SXM 141GB\n"
        b"# a comment inside the block\n\t2901  GB100 [B200]\n"
        b"10df  Emulex Corporation\n\t0720  OneConnect NIC (Skyhawk)\n"
    )
    assert parse_pci_ids(data) == {0x2335: "GH100 [H200 SXM 141GB]", 0x2901: "GB100 [B200]"}
    assert parse_pci_ids(b"8086  Intel\n\t1234  x\n") == {}
    assert parse_pci_ids(b"10de  NVIDIA Corporation\n\t1eb8  TU104GL [Tesla T4]\n") == {0x1EB8: "TU104GL [Tesla T4]"}


def test_parse_nvidia_smi_xml_of_the_golden_h200_output():
    path = "/work/shared/reference/golden/h200/nvidia-smi-q.xml"
    if not os.path.exists(path):
        pytest.skip("golden reference not available")
    parsed = parse_nvidia_smi_xml(_read(path))
    assert parsed["driver_version"] == "580.159.04"
    assert parsed["gpus"][0]["architecture"] == "Hopper"


@pytest.mark.parametrize(
    "bus_id, expected",
    [("00000000:00:06.0", "0000:00:06.0"), ("00000000:3B:00.0", "0000:3b:00.0"), ("0001:C1:00.0", "0001:c1:00.0")],
)
def test_normalise_bus_id(bus_id, expected):
    assert _normalise_bus_id(bus_id) == expected


def test_parse_os_release_quotes():
    values = parse_os_release('ID="rocky"\nNAME=\'Rocky Linux\'\n# c\nPRETTY_NAME="A \\"quoted\\" name"\nBAD\n')
    assert values == {"ID": "rocky", "NAME": "Rocky Linux", "PRETTY_NAME": 'A "quoted" name'}


@pytest.mark.parametrize(
    "os_id, like, family",
    [
        ("ubuntu", "debian", "debian"),
        ("debian", None, "debian"),
        ("rocky", "rhel centos fedora", "redhat"),
        ("rhel", "fedora", "redhat"),
        ("almalinux", "rhel centos fedora", "redhat"),
        ("sles", "suse opensuse", "other"),
    ],
)
def test_os_family(os_id, like, family):
    assert os_family(os_id, like) == family


CONTAINERD_V2 = """
version = 2
disabled_plugins = ["io.containerd.grpc.v1.cri"]
imports = ["/etc/containerd/conf.d/*.toml"]

[plugins]
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
    runtime_type = "io.containerd.runc.v2"
"""
CONTAINERD_V3 = """version = 3
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
"""


@pytest.mark.parametrize("use_tomllib", [True, False])
def test_parse_containerd_config(use_tomllib, monkeypatch):
    if use_tomllib and toml_subset.tomllib is None:
        pytest.skip("no tomllib on this Python")
    if not use_tomllib:
        monkeypatch.setattr(toml_subset, "tomllib", None)
    parsed = parse_containerd_config(CONTAINERD_V2)
    assert parsed["version"] == 2
    assert parsed["disabled_plugins"] == ["io.containerd.grpc.v1.cri"]
    assert parsed["imports"] == ["/etc/containerd/conf.d/*.toml"]
    assert parsed["runtimes"] == (["nvidia", "runc"] if use_tomllib else None)
    parsed = parse_containerd_config(CONTAINERD_V3)
    assert parsed["version"] == 3
    assert parsed["runtimes"] == (["runc"] if use_tomllib else None)
    parsed = parse_containerd_config("disabled_plugins = [\n  \"cri\",\n  'x'\n]\n")
    assert (parsed["version"], parsed["disabled_plugins"]) == (None, ["cri", "x"])


@pytest.mark.parametrize(
    "version, empty, plugin",
    [
        (None, False, "cri"),
        (None, True, "io.containerd.grpc.v1.cri"),
        (2, False, "io.containerd.grpc.v1.cri"),
        (3, False, "io.containerd.cri.v1.runtime"),
        (4, False, "io.containerd.cri.v1.runtime"),
    ],
)
def test_cri_plugin_name(version, empty, plugin):
    assert cri_plugin_name(version, empty) == plugin


# --- Host ----------------------------------------------------------------------------------------


def test_resolve_keeps_absolute_links_inside_the_root(tmp_path):
    (tmp_path / "usr" / "src" / "headers").mkdir(parents=True)
    (tmp_path / "lib" / "modules" / "r").mkdir(parents=True)
    os.symlink("/usr/src/headers", str(tmp_path / "lib" / "modules" / "r" / "build"))
    os.symlink("../../../usr/src/headers", str(tmp_path / "lib" / "modules" / "r" / "rel"))
    os.symlink("/loop", str(tmp_path / "loop"))
    host = common_host.Host(str(tmp_path), runner=lambda argv: (0, "", ""), kernel_root=str(tmp_path))
    assert host.resolve("/lib/modules/r/build") == "/usr/src/headers"
    assert host.resolve("/lib/modules/r/rel") == "/usr/src/headers"
    assert host.exists("/lib/modules/r/build")
    assert host.resolve("/loop") == "/loop"  # a cycle ends, it does not hang


def test_which_looks_under_the_root(tmp_path):
    (tmp_path / "usr" / "local" / "nvidia" / "bin").mkdir(parents=True)
    binary = tmp_path / "usr" / "local" / "nvidia" / "bin" / "nvidia-smi"
    binary.write_text("")
    host = common_host.Host(str(tmp_path), runner=lambda argv: (0, "", ""), kernel_root=str(tmp_path))
    assert host.which("nvidia-smi") is None  # not executable
    binary.chmod(0o755)
    assert host.which("nvidia-smi") == "/usr/local/nvidia/bin/nvidia-smi"


def test_default_kernel_root(tmp_path):
    assert common_host.default_kernel_root("/") == "/"
    assert common_host.default_kernel_root(str(tmp_path)) == "/"
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "modules").write_text("")
    assert common_host.default_kernel_root(str(tmp_path)) == str(tmp_path)


def test_subprocess_runner_never_raises():
    run = common_host.subprocess_runner("/", timeout=5)
    assert run(["sh", "-c", "echo out; echo err >&2; exit 3"]) == (3, "out\n", "err\n")
    rc, out, err = run(["/nonexistent/binary"])
    assert rc == 127 and "nonexistent" in err
    rc, out, err = common_host.subprocess_runner("/", timeout=1)(["sleep", "5"])
    assert (rc, err) == (124, "sleep 5 timed out after 1 seconds")


def test_subprocess_runner_chroots_under_a_host_root(monkeypatch):
    seen = {}
    real_popen = subprocess.Popen

    def fake_popen(cmd, **kwargs):
        seen["cmd"] = cmd
        seen["env"] = kwargs["env"]
        return real_popen(["printf", "ok"], **kwargs)

    monkeypatch.setattr(subprocess, "Popen", fake_popen)
    assert common_host.subprocess_runner("/host", timeout=5)(["/usr/bin/nvidia-smi", "-q", "-x"]) == (0, "ok", "")
    assert seen["cmd"] == ["chroot", "/host", "/usr/bin/nvidia-smi", "-q", "-x"]
    assert seen["env"]["LC_ALL"] == "C"


def test_live_machine_does_not_crash():
    """Whatever this machine is, gathering ends in facts, not an exception."""
    facts = gf.gather_facts(common_host.Host("/", runner=common_host.subprocess_runner("/", 30)))
    assert set(facts["probes"]) == ALL_PROBES


def test_parse_containerd_config_odd_shapes():
    if toml_subset.tomllib is None:
        pytest.skip("no tomllib on this Python")
    parsed = parse_containerd_config(
        'version = 2\ndisabled_plugins = "cri"\n[plugins]\n"io.containerd.grpc.v1.cri" = 3\n'
    )
    assert (parsed["disabled_plugins"], parsed["runtimes"]) == ([], [])
    parsed = parse_containerd_config("")
    assert (parsed["version"], parsed["runtimes"]) == (None, [])


def test_mig_capable_follows_what_nvidia_smi_says():
    # The H200 answers Disabled (capable, off); the L40S answers N/A (not capable).
    h200 = fixture_facts("ubuntu2404-h200-preinstalled")["driver"]["nvidia_smi"]["gpus"]
    l40s = fixture_facts("debian12-l40s-x2-package")["driver"]["nvidia_smi"]["gpus"]
    assert [(g["mig_capable"], g["mig_mode_current"]) for g in h200] == [(True, "disabled")]
    assert [(g["mig_capable"], g["mig_mode_current"]) for g in l40s] == [(False, None), (False, None)]


# --- multi-GPU hosts: topology and fabric manager ----------------------------------------------


def test_topology_of_the_real_single_gpu_capture_parses():
    text = _read(os.path.join(HOSTS, "ubuntu2404-h200-preinstalled", "commands", "nvidia-smi-topo-m.txt"))
    topo = parse_topo_matrix(text)
    assert topo == {
        "gpus": ["GPU0"],
        "links": {"GPU0": {}},
        "cpu_affinity": {"GPU0": "0-15"},
        "numa_affinity": {"GPU0": "0"},
        "nvlink_pairs": 0,
    }


def test_single_gpu_host_runs_no_topology_command():
    host = CaptureHost("ubuntu2404-h200-preinstalled")
    facts = gf.gather_facts(host)
    assert facts["topology"]["state"] == "skipped"
    assert facts["topology"]["detail"] == "one GPU: no GPU-to-GPU topology"
    assert [c[1:] for c in host.calls] == [["-q", "-x"]]


def test_hgx_topology_counts_every_nvlink_pair():
    facts = fixture_facts("rocky9-h100x8-rpm-rke2")
    topo = facts["topology"]
    assert topo["state"] == "ok"
    assert topo["gpus"] == ["GPU%d" % i for i in range(8)]
    assert topo["links"]["GPU0"]["GPU7"] == "NV18"
    assert set(topo["links"]["GPU3"]) == set("GPU%d" % i for i in range(8) if i != 3)
    assert topo["nvlink_pairs"] == 28  # 8 choose 2
    assert topo["numa_affinity"]["GPU5"] == "1"
    assert topo["detail"] == "8 GPUs, 28 NVLink pairs"


def test_pcie_pair_has_no_nvlink():
    topo = fixture_facts("debian12-l40s-x2-package")["topology"]
    assert topo["links"] == {"GPU0": {"GPU1": "SYS"}, "GPU1": {"GPU0": "SYS"}}
    assert topo["nvlink_pairs"] == 0


def test_topology_failure_is_a_reported_state():
    host = CaptureHost("debian12-l40s-x2-package", commands={"nvidia-smi-topo-m": (255, "Failed to get topology\n", "")})
    facts = gf.gather_facts(host)
    assert facts["topology"]["state"] == "error"
    assert facts["probes"]["topology"]["state"] == "error"
    assert facts["topology"]["detail"] == "Failed to get topology"


def test_parse_topo_matrix_refuses_other_text():
    with pytest.raises(ValueError, match="no GPU0 column"):
        parse_topo_matrix("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


def test_hgx_fabric_manager_version_and_service():
    fm = fixture_facts("rocky9-h100x8-rpm-rke2")["fabric_manager"]
    assert fm == {
        "required": True,
        "installed": True,
        "path": "/usr/bin/nv-fabricmanager",
        "version": "570.172.08",
        "version_source": "binary",
        "package": None,
        "service": "active",
    }


def test_nvswitch_host_without_fabric_manager_is_an_error_probe():
    host = CaptureHost("rocky9-h100x8-rpm-rke2")
    host.executables = [p for p in host.executables if not p.endswith("/nv-fabricmanager")]
    facts = gf.gather_facts(host)
    assert facts["nvswitches"]["count"] > 0
    assert facts["fabric_manager"]["required"] is True
    assert facts["fabric_manager"]["installed"] is False
    assert facts["probes"]["fabric_manager"] == {
        "state": "error",
        "detail": "not installed; NVSwitches present, it is required",
    }


def test_fabric_manager_version_from_its_package_and_service_state():
    # A Debian host with the fabric manager package: dpkg gives the version, systemctl the state.
    host = CaptureHost(
        "debian12-l40s-x2-package",
        commands={"systemctl-is-active-fabricmanager": (3, "inactive\n", "")},
    )
    host.executables += ["/usr/bin/nv-fabricmanager", "/usr/bin/systemctl"]
    dpkg = {"nvidia-fabricmanager-550": "550.163.01-1", "nvidia-smi": "550.163.01-1"}
    probes = Probes()
    fm = gather_fabric_manager(host, probes, dpkg, nvswitch_count=0)
    assert fm == {
        "required": False,
        "installed": True,
        "path": "/usr/bin/nv-fabricmanager",
        "version": "550.163.01",
        "version_source": "package",
        "package": "nvidia-fabricmanager-550",
        "service": "inactive",
    }
    assert probes["fabric_manager"]["detail"] == "version 550.163.01 (package), service inactive"


def test_fabric_manager_version_from_the_binary_without_a_package():
    host = CaptureHost(
        "rocky9-h100x8-rpm-rke2",
        commands={
            "nv-fabricmanager-version": (0, "Fabric Manager version is : 570.172.08\n", ""),
            "systemctl-is-active-fabricmanager": (0, "active\n", ""),
        },
    )
    host.executables += ["/usr/bin/nv-fabricmanager", "/usr/bin/systemctl"]
    fm = gather_fabric_manager(host, Probes(), None, nvswitch_count=4)
    assert (fm["version"], fm["version_source"], fm["service"]) == ("570.172.08", "binary", "active")


def test_real_two_gpu_capture():
    # Captured on the lent two-H200 machine: both GPUs joined by 18 NVLinks, no NVSwitch
    # visible to the guest, no fabric manager.
    host = CaptureHost("ubuntu2404-h200x2-preinstalled")
    facts = gf.gather_facts(host)
    assert facts["gpu_count"] == 2
    assert [g["bus_id"] for g in facts["gpus"]] == ["0000:00:06.0", "0000:00:07.0"]
    assert {g["architecture"] for g in facts["gpus"]} == {"Hopper"}
    smi = facts["driver"]["nvidia_smi"]
    assert [g["index"] for g in smi["gpus"]] == [0, 1]
    assert len({g["uuid"] for g in smi["gpus"]}) == 2
    assert all(g["memory_total_mib"] == 143771 and g["mig_capable"] for g in smi["gpus"])
    assert facts["topology"]["links"] == {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}}
    assert facts["topology"]["nvlink_pairs"] == 1
    assert facts["topology"]["cpu_affinity"] == {"GPU0": "0-31", "GPU1": "0-31"}
    assert facts["nvswitches"] == {"count": 0, "bus_ids": []}
    assert (facts["fabric_manager"]["required"], facts["fabric_manager"]["installed"]) == (False, False)
    assert [c[1:] for c in host.calls] == [["-q", "-x"], ["topo", "-m"]]


def test_dpkg_status_counts_held_packages_as_installed():
    status = (
        "Package: nvidia-smi\nStatus: hold ok installed\nVersion: 535.261.03-1\n\n"
        "Package: libcuda1\nStatus: install ok installed\nVersion: 535.261.03-1\n\n"
        "Package: nvidia-kernel-dkms\nStatus: deinstall ok config-files\nVersion: 535.216.01-1\n\n"
        "Package: nvidia-driver\nStatus: hold ok not-installed\nVersion: 535.261.03-1\n"
    )
    assert parse_dpkg_status(status) == {"nvidia-smi": "535.261.03-1", "libcuda1": "535.261.03-1"}


# --- the steps of discovery ----------------------------------------------------------------------


@pytest.mark.parametrize("text, node", [("0", 0), ("1", 1), ("-1", None), (None, None), ("x", None)])
def test_numa_node(text, node):
    assert _numa_node(text) == node


def test_gpu_name_prefers_pci_ids_then_the_table():
    assert _gpu_name({0x2335: "GH100 [H200 SXM 141GB]"}, "0x2335", None, None) == ("GH100 [H200 SXM 141GB]", "pci.ids", "Hopper")
    assert _gpu_name({}, "0x25b6", "0x10de", "0x157e") == ("GA107GL [A2]", "table", "Ampere")
    assert _gpu_name({0x9999: "GB202 [new]"}, "0x9999", None, None) == ("GB202 [new]", "pci.ids", "Blackwell")
    assert _gpu_name({}, "0x9999", None, None) == (None, "unknown", None)
    assert _gpu_name({}, None, None, None) == (None, "unknown", None)


def test_nvidia_function_classifies_by_vendor_and_class(tmp_path):
    def device(bus_id, **attrs):
        folder = tmp_path / "sys" / "bus" / "pci" / "devices" / bus_id
        folder.mkdir(parents=True)
        for name, value in attrs.items():
            (folder / name).write_text(value + "\n")
        return "/sys/bus/pci/devices/" + bus_id

    host = common_host.Host(root=str(tmp_path), kernel_root=str(tmp_path), kernel_release="6.1.0", path_env="")
    assert _nvidia_function(host, device("a", vendor="0x10de", **{"class": "0x030200"})) == ("gpu", "0x030200")
    assert _nvidia_function(host, device("b", vendor="0x10DE", **{"class": "0x068000"})) == ("nvswitch", "0x068000")
    assert _nvidia_function(host, device("c", vendor="0x10de", **{"class": "0x040300"})) == (None, "0x040300")
    assert _nvidia_function(host, device("d", vendor="0x8086", **{"class": "0x030000"})) == (None, None)
    assert _nvidia_function(host, device("e")) == ("unreadable", None)


def test_driver_source():
    smi = {"path": None}
    absent = {"package": None, "loaded": False, "nvidia_smi": smi, "libcuda": None, "installed": {"state": "missing"}}
    assert _driver_source(absent) == "absent"
    assert _driver_source(dict(absent, package={"name": "nvidia-driver"})) == "package"
    assert _driver_source(dict(absent, libcuda="/usr/lib64/libcuda.so.1")) == "preinstalled"
    assert _driver_source(dict(absent, installed={"state": "ok"})) == "preinstalled"


def test_nvlink_pairs_count_each_pair_once():
    links = {"GPU0": {"GPU1": "NV18", "GPU2": "SYS"}, "GPU1": {"GPU0": "NV18", "GPU2": "NV4"}, "GPU2": {"GPU0": "SYS", "GPU1": None}}
    assert _nvlink_pairs(links) == 2


# --- no host data can break gathering: small trees made here ---------------------------------------


def _node_host(root):
    return common_host.Host(root=str(root), runner=lambda argv: (127, "", "not here"), kernel_root=str(root),
                            kernel_release="6.1.0", path_env="")


def _gather(root):
    facts = gf.gather_facts(_node_host(root))
    assert set(facts["probes"]) == ALL_PROBES
    assert all(p["state"] in ("ok", "missing", "error") for p in facts["probes"].values())
    return facts


_PCI_IDS = b"10de  NVIDIA Corporation\n\t2335  GH100 [H200 SXM 141GB]\n"
_GZ = gzip.compress(_PCI_IDS)


@pytest.mark.parametrize(
    "data, detail",
    [
        (b"not gzip", "Not a gzipped file (b'no')"),
        (_GZ[: len(_GZ) // 2], "Compressed file ended before the end-of-stream marker was reached"),
        (_GZ[:10] + b"\xff" * 40 + _GZ[-8:], "Error -3 while decompressing data: invalid block type"),
        (_GZ[:-8] + b"\0" * 8, "CRC check failed"),
        (gzip.compress(b"\n" * (common_host.READ_CAP + 1)), "larger than 16777216 bytes once uncompressed"),
    ],
    ids=["not-gzip", "truncated", "corrupt", "bad-crc", "too-large"],
)
def test_a_bad_pci_ids_gz_is_an_error_probe(tmp_path, data, detail):
    facts = _gather(_node(tmp_path, {"/usr/share/misc/pci.ids.gz": data}))
    assert facts["probes"]["pci_ids"]["state"] == "error"
    assert facts["probes"]["pci_ids"]["detail"].startswith("/usr/share/misc/pci.ids.gz: ")
    assert detail in facts["probes"]["pci_ids"]["detail"]
    assert (facts["gpus"][0]["name"], facts["gpus"][0]["name_source"]) == ("GH100 [H200 SXM 141GB]", "table")


def test_a_good_pci_ids_gz_names_the_gpu(tmp_path):
    facts = _gather(_node(tmp_path, {"/usr/share/misc/pci.ids.gz": gzip.compress(_PCI_IDS.replace(b"141GB", b"NVL"))}))
    assert facts["probes"]["pci_ids"] == {"state": "ok", "detail": "/usr/share/misc/pci.ids.gz: 1 NVIDIA device names"}
    assert (facts["gpus"][0]["name"], facts["gpus"][0]["name_source"]) == ("GH100 [H200 SXM NVL]", "pci.ids")


def test_a_dpkg_stanza_without_a_version_is_an_error_probe(tmp_path):
    status = (
        "Package: nvidia-fabricmanager-550\nStatus: install ok installed\nArchitecture: amd64\n\n"
        "Package: libnvidia-compute-550\nStatus: install ok installed\nVersion: 550.163.01-1\n\n"
        "Package: nvidia-smi\nStatus: hold ok installed\nVersion:\n"
    )
    facts = _gather(_node(tmp_path, {"/var/lib/dpkg/status": status}))
    assert facts["probes"]["dpkg_status"] == {
        "state": "error", "detail": "1 installed packages; no Version: in the stanza of nvidia-fabricmanager-550, nvidia-smi"}
    # what has no version is not taken as installed
    assert facts["driver"]["packages"] == [{"name": "libnvidia-compute-550", "version": "550.163.01-1"}]
    assert facts["fabric_manager"]["installed"] is False


_FILES = [
    ("/etc/os-release", "os_release"),
    ("/var/lib/dpkg/status", "dpkg_status"),
    ("/usr/share/misc/pci.ids", "pci_ids"),
    ("/etc/containerd/config.toml", "containerd_config"),
    ("/etc/docker/daemon.json", "docker_config"),
    ("/proc/modules", "proc_modules"),
    ("/proc/driver/nvidia/version", "driver_version_file"),
    (SECURE_BOOT_VAR, "secure_boot"),
]


@pytest.mark.parametrize("path, probe", _FILES)
def test_a_fifo_where_a_file_is_expected_is_an_error_probe_not_a_hang(tmp_path, path, probe):
    root = _node(tmp_path)
    local = root / path.lstrip("/")
    local.parent.mkdir(parents=True, exist_ok=True)
    if local.exists():
        local.unlink()
    os.mkfifo(str(local))
    facts = _gather(root)
    assert facts["probes"][probe] == {"state": "error", "detail": "%s: [Errno 22] not a regular file but a FIFO" % path}


@pytest.mark.parametrize("path, probe", _FILES)
def test_a_folder_where_a_file_is_expected_is_an_error_probe(tmp_path, path, probe):
    root = _node(tmp_path)
    local = root / path.lstrip("/")
    if local.exists():
        local.unlink()
    local.mkdir(parents=True)
    facts = _gather(root)
    assert facts["probes"][probe]["state"] == "error"
    assert facts["probes"][probe]["detail"].startswith("%s: [Errno 21] Is a directory" % path)


def test_a_fifo_as_a_sysfs_attribute_makes_the_device_unreadable(tmp_path):
    root = _node(tmp_path)
    vendor = root / "sys" / "bus" / "pci" / "devices" / "0000:02:00.0" / "vendor"
    vendor.parent.mkdir(parents=True)
    os.mkfifo(str(vendor))
    facts = _gather(root)
    assert facts["probes"]["pci_devices"] == {
        "state": "error", "detail": "2 PCI devices, 1 NVIDIA GPUs, 0 NVSwitches; unreadable: 0000:02:00.0"}


def test_an_endless_file_is_not_read(tmp_path):
    """Links to /dev/zero where /proc and /sys files are expected: resolved inside the kernel root, they lead nowhere."""
    root = _node(tmp_path)
    (root / "proc" / "modules").unlink()
    os.symlink("/dev/zero", str(root / "proc" / "modules"))
    (root / "sys" / "module" / "nvidia").mkdir(parents=True)
    os.symlink("/dev/zero", str(root / "sys" / "module" / "nvidia" / "version"))
    (root / "proc" / "driver" / "nvidia").mkdir(parents=True)
    os.symlink("../../../../../../../../../../dev/zero", str(root / "proc" / "driver" / "nvidia" / "version"))
    facts = _gather(root)
    assert facts["probes"]["proc_modules"] == {"state": "missing", "detail": "/proc/modules does not exist (no loadable modules)"}
    assert facts["probes"]["driver_version_file"]["state"] == "missing"
    assert facts["driver"]["loaded"] is False and facts["driver"]["version"] is None


def test_a_huge_file_where_a_small_one_is_expected_is_an_error_probe(tmp_path):
    facts = _gather(_node(tmp_path, {"/proc/modules": "nvidia 1 0 - Live 0x0\n" * (common_host.KERNEL_READ_CAP // 20)}))
    assert facts["probes"]["proc_modules"] == {
        "state": "error", "detail": "/proc/modules: [Errno 27] larger than 1048576 bytes, the most read of a host file"}


def test_deeply_nested_json_and_toml_are_error_probes(tmp_path):
    facts = _gather(_node(tmp_path, {"/etc/docker/daemon.json": "[" * 100000, "/etc/containerd/config.toml": "a = " + "[" * 100000}))
    assert facts["probes"]["docker_config"]["state"] == "error"
    assert facts["probes"]["docker_config"]["detail"].startswith("/etc/docker/daemon.json is not valid JSON: maximum recursion depth")
    assert facts["probes"]["containerd_config"]["state"] == "error"
    assert facts["probes"]["containerd_config"]["detail"].startswith("/etc/containerd/config.toml is not valid TOML")


def test_the_gpu_operators_driver_container_is_told_from_a_host_driver(tmp_path):
    # The captured pre-installed H200 host, plus what the operator's driver container leaves on the
    # host: its root shared at /run/nvidia/driver (derived: that file is the only change).
    import shutil
    host = CaptureHost("ubuntu2404-h200-preinstalled")
    assert gather_driver(host, Probes(), None)["operator_root"] is None
    root = str(tmp_path / "root")
    shutil.copytree(host.root, root, symlinks=True)
    host.root = host.kernel_root = root
    smi = os.path.join(root, "run", "nvidia", "driver", "usr", "bin", "nvidia-smi")
    os.makedirs(os.path.dirname(smi))
    open(smi, "w").close()
    driver = gather_driver(host, Probes(), None)
    assert (driver["operator_root"], driver["source"]) == ("/run/nvidia/driver", "operator")


# --- driver.found: the one driver version preflight, validation and the report read ------------


@pytest.mark.parametrize("driver, found", [
    # the module on disk before what runs: a reboot pending after an upgrade
    ({"version": "570.172.08", "flavor": "proprietary", "installed": {"version": "580.95.05", "flavor": "open"},
      "nvidia_smi": {"driver_version": "570.172.08"}},
     {"version": "580.95.05", "from": "modinfo", "flavor": "open", "flavor_from": "modinfo"}),
    # no module built or loaded, the package that owns nvidia-smi says (an EL host's dnf driver)
    ({"installed": {}, "package": {"manager": "rpm", "name": "nvidia-driver-cuda", "version": "3:550.163.01-1.el9"},
      "packages": [{"name": "kmod-nvidia-open-dkms", "version": "1"}]},
     {"version": "550.163.01", "from": "package", "flavor": "open", "flavor_from": "packages"}),
    # a driver no package owns and modinfo cannot read (the H200 hosts): nvidia-smi, else the loaded module
    ({"version": "580.159.04", "flavor": "open", "installed": {"version": None}, "nvidia_smi": {"driver_version": "580.159.04"}},
     {"version": "580.159.04", "from": "nvidia-smi", "flavor": "open", "flavor_from": "loaded module"}),
    ({"version": "580.159.04", "flavor": "open", "nvidia_smi": {"driver_version": None}},
     {"version": "580.159.04", "from": "loaded module", "flavor": "open", "flavor_from": "loaded module"}),
    # what is not a driver version is passed over
    ({"installed": {"version": "N/A"}, "nvidia_smi": {"driver_version": "5x5"}},
     {"version": None, "from": None, "flavor": None, "flavor_from": None}),
])
def test_found_is_the_driver_on_disk_first(driver, found):
    assert found_driver(driver) == found
    assert found_of({"driver": driver}) == found  # facts gathered before gpu_facts published it
    assert found_of({"driver": dict(driver, found={"version": "1"})}) == {"version": "1"}


def test_found_on_the_captures():
    assert fixture_facts("ubuntu2404-h200-preinstalled")["driver"]["found"] == {
        "version": "580.159.04", "from": "nvidia-smi", "flavor": "open", "flavor_from": "loaded module"}
    assert fixture_facts("el9-standin-dpkg-rpm")["driver"]["found"] == {
        "version": "550.163.01", "from": "package", "flavor": None, "flavor_from": None}
    assert fixture_facts("debian12-l40s-x2-package")["driver"]["found"]["from"] == "modinfo"
