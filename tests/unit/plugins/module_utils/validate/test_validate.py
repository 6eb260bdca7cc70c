"""Tests of module_utils/validate/host.py: the host checks, on replayed captures and small host trees.

GPUs and driver come from the host captures of ``tests/unit/fixtures/hosts`` (``CaptureHost``);
runtime configurations and CDI specs from ``tests/unit/fixtures/runtime-configs`` and
``tests/unit/fixtures/cdi`` written into a temporary host root. Where a real ``containerd`` (1.6
in PATH, 1.7 / 2.1 under ``.cache/containerd``, see the runtime-configs README) or ``nvcc`` is on
this machine, the tests use it; otherwise those cases are skipped with the reason.
"""

from __future__ import annotations

import copy
import os
import posixpath
import shutil
import subprocess
import tempfile

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.driver import found_driver
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate import host as V
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.cdi import (
    _cdi_entry,
    _cdi_missing,
    _read_cdi_data,
    _yaml_lines,
    parse_cdi_yaml_subset,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import Checks, RANK
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.cuda import (
    _cuda_not_run,
    _vector_add_failure,
    check_cuda,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.driver import (
    _library_mismatch,
    _smi_problem,
    _toolkit_matches,
    _unseen_gpus,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.runtime import _locate_containerd
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.discovery.captures import (
    CaptureHost,
    fixture_facts,
)
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.configs import (
    CTK,
    RUNTIME,
    _containerd_binaries,
    _read,
)

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures")
CDI_SPEC = os.path.join(FIXTURES, "cdi", "h200", "nvidia-ctk-cdi.yaml")
H200 = "ubuntu2404-h200-preinstalled"


def names(result):
    return [(c["name"], c["status"]) for c in result["checks"]]


def check(result, name):
    found = [c for c in result["checks"] if c["name"] == name]
    assert len(found) == 1, result["checks"]
    return found[0]


class TreeHost(common_host.Host):
    """A host whose files are a temporary tree; commands answered by ``commands[basename]``."""

    def __init__(self, root, commands=None):
        super(TreeHost, self).__init__(
            root=str(root), runner=self._run, kernel_root=str(root), kernel_release="6.1.0-28-amd64", path_env=""
        )
        self.commands = dict(commands or {})
        self.calls = []

    def put(self, path, text="", mode=0o644):
        local = os.path.join(self.root, path.lstrip("/"))
        os.makedirs(os.path.dirname(local), exist_ok=True)
        with open(local, "w") as handle:
            handle.write(text)
        os.chmod(local, mode)
        return local

    def binary(self, path):
        return self.put(path, "#!/bin/sh\n", 0o755)

    def _run(self, argv):
        self.calls.append(list(argv))
        handler = self.commands.get(posixpath.basename(argv[0]))
        if handler is None:
            return 127, "", "%s: not found" % argv[0]
        return handler(argv) if callable(handler) else handler


def h200_facts():
    return fixture_facts(H200)


# --- no GPU, GPUs, driver -----------------------------------------------------------------------


def test_node_without_gpu_has_nothing_to_validate():
    result, facts = V.validate_host(CaptureHost("debian12-nogpu"), {"driver_version": "580"})
    assert facts["gpu_count"] == 0
    assert result["status"] == "skipped"
    assert names(result) == [("gpus", "skipped")]
    assert result["not_checked"] == [V.NO_GPU_MESSAGE] == ["no GPU: nothing to validate"]
    assert result["failed"] == [] and result["drifted"] == []
    assert result["summary"] == "no GPU: nothing to validate"


def test_node_declared_with_gpus_but_without_lists_every_failure():
    result, dummy = V.validate_host(CaptureHost("debian12-nogpu"), {"gpu_count": 2})
    assert result["status"] == "failed"
    assert result["failed"][0] == "expected 2 GPUs (gpu_count), found none on the PCI bus"
    assert check(result, "driver")["msg"].startswith("nvidia-smi not found")
    # Debian's containerd is in the capture (binary and config) but has no nvidia handler; the
    # capture has no containerd dump, so the replayed command fails as not captured.
    assert check(result, "runtime")["status"] == "failed"


def test_h200_preinstalled_is_ok():
    result, facts = V.validate_host(
        CaptureHost(H200), {"driver_version": "580", "driver_method": "preinstalled", "container_runtime": "none"}
    )
    assert result["status"] == "ok", result["checks"]
    assert names(result) == [
        ("gpus", "ok"),
        ("driver", "ok"),
        ("driver_version", "ok"),
        ("runtime", "skipped"),
        ("cdi", "skipped"),
        ("cuda", "skipped"),
        ("kernel_next_boot", "skipped"),
        ("driver_libraries", "skipped"),
        ("nvml_reload", "ok"),
        ("runtime_drift", "skipped"),
        ("isolation", "skipped"),
    ]
    assert check(result, "driver")["msg"] == "nvidia-smi answers: driver 580.159.04, CUDA 13.0, 1 GPU"
    assert result["driver"] == {"loaded": "580.159.04", "installed": "580.159.04", "nvidia_smi": "580.159.04", "cuda": "13.0"}
    assert "CUDA vectorAdd on the host: not run: no nvcc on the node (install the CUDA toolkit to run it)" in result["not_checked"]
    assert result["declared"]["driver_version"] == "580"
    assert facts["gpu_count"] == 1


@pytest.mark.parametrize(
    "declared, status, msg",
    [
        ("580", "ok", "loaded driver 580.159.04 is the declared 580"),
        ("580.159", "ok", "loaded driver 580.159.04 is the declared 580.159"),
        ("580.159.04", "ok", "loaded driver 580.159.04 is the declared 580.159.04"),
        ("580.95.05", "drift", "declared driver 580.95.05, loaded 580.159.04"),
        ("575", "drift", "declared driver 575, loaded 580.159.04"),
        ("", "skipped", "driver version: none declared (nvidia_driver_version)"),
    ],
)
def test_driver_version_against_the_declared_one(declared, status, msg):
    result, dummy = V.validate_host(CaptureHost(H200), {"driver_version": declared, "container_runtime": "none"})
    assert check(result, "driver_version") == {"name": "driver_version", "status": status, "msg": msg}
    assert result["status"] == ("drift" if status == "drift" else "ok")
    assert result["drifted"] == ([msg] if status == "drift" else [])


@pytest.mark.parametrize("bad", ["5x5", "580.", "r580"])
def test_a_bad_declared_version_is_refused_before_anything_runs(bad):
    host = CaptureHost(H200)
    with pytest.raises(GpuFleetError) as err:
        V.validate_host(host, {"driver_version": bad})
    assert err.value.msg == "driver_version: version '%s' is not a driver version (expected e.g. 580 or 580.95.05)" % bad
    assert host.calls == []


@pytest.mark.parametrize(
    "params, text",
    [
        ({"gpu_count": -1}, "gpu_count: -1 is not a number of GPUs (expected 0 or more)"),
        ({"container_runtime": "podman"}, "container_runtime: 'podman' is not one of containerd, crio, docker, k3s, rke2, none"),
        ({"cdi": "yes"}, "cdi: 'yes' is not one of auto, enabled, disabled"),
    ],
)
def test_other_bad_arguments(params, text):
    with pytest.raises(GpuFleetError) as err:
        V.validate_host(CaptureHost(H200), params)
    assert err.value.msg == text


def test_nvidia_smi_that_cannot_reach_the_driver_fails_the_node():
    result, dummy = V.validate_host(CaptureHost("ubuntu2404-h200-smi-failing"), {"driver_version": "580", "container_runtime": "none"})
    assert result["status"] == "failed"
    assert check(result, "driver") == {
        "name": "driver",
        "status": "failed",
        "msg": "nvidia-smi failed: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.",
    }
    assert check(result, "driver_version")["status"] == "skipped"
    assert result["summary"].startswith("failed: 2 ok, 0 drifted, 1 failed, 8 not checked - nvidia-smi failed:")


def test_driver_library_mismatch():
    facts = h200_facts()
    facts["driver"]["version"] = "580.95.05"  # the module after an upgrade, the libraries before
    result, dummy = V.validate_host(CaptureHost(H200), {"container_runtime": "none"}, facts=facts)
    assert check(result, "driver")["msg"] == (
        "driver/library version mismatch: the kernel module is 580.95.05, nvidia-smi's libraries 580.159.04 "
        "(reboot, or reload the nvidia modules)"
    )


def test_a_gpu_nvidia_smi_does_not_see():
    facts = fixture_facts("rocky9-h100x8-rpm-rke2")
    lost = facts["driver"]["nvidia_smi"]["gpus"].pop(3)
    result, dummy = V.validate_host(CaptureHost("rocky9-h100x8-rpm-rke2"), {"container_runtime": "none"}, facts=facts)
    assert check(result, "driver")["msg"] == "nvidia-smi sees 7 of the 8 GPUs on the PCI bus (not seen: %s)" % lost["bus_id"]


def test_declared_gpu_count():
    ok, dummy = V.validate_host(CaptureHost("rocky9-h100x8-rpm-rke2"), {"gpu_count": 8, "container_runtime": "none"})
    assert check(ok, "gpus") == {"name": "gpus", "status": "ok", "msg": "8 NVIDIA GPUs on the PCI bus, as declared"}
    bad, dummy = V.validate_host(CaptureHost("rocky9-h100x8-rpm-rke2"), {"gpu_count": 16, "container_runtime": "none"})
    assert check(bad, "gpus")["msg"] == "expected 16 GPUs (gpu_count), found 8 on the PCI bus"


def test_installed_driver_newer_than_the_loaded_one_is_drift():
    facts = fixture_facts("debian12-l40s-x2-package")
    facts["driver"]["installed"]["version"] = "550.163.02"
    facts["driver"]["found"] = found_driver(facts["driver"])
    result, dummy = V.validate_host(CaptureHost("debian12-l40s-x2-package"), {"container_runtime": "none"}, facts=facts)
    assert check(result, "driver_installed") == {
        "name": "driver_installed",
        "status": "drift",
        "msg": "driver 550.163.02 is installed but 550.163.01 is loaded: reboot (or reload the nvidia modules) to run it",
    }
    assert result["driver"]["installed"] == "550.163.02"


def test_operator_managed_driver_is_not_checked_on_the_host():
    result, dummy = V.validate_host(
        CaptureHost("ubuntu2404-h200-smi-failing"), {"driver_method": "operator", "container_runtime": "none"}
    )
    assert result["status"] == "ok"
    assert check(result, "driver")["status"] == "skipped"
    assert check(result, "cuda")["msg"] == "CUDA vectorAdd on the host: not run: the driver is in the GPU Operator's container"


@pytest.mark.parametrize(
    "declared, status",
    [("1.17.8", "ok"), ("1.17", "ok"), ("1.17.8-1", "ok"), ("1:1.17.8-1", "ok"), ("1.17.8-2", "drift"),
     ("1.18.0", "drift"), ("1.17.80", "drift")],
)
def test_toolkit_version(declared, status):
    result, dummy = V.validate_host(
        CaptureHost("debian12-l40s-x2-package"), {"toolkit_version": declared, "container_runtime": "none"}
    )
    assert check(result, "toolkit_version")["status"] == status
    assert result["toolkit"] == {"installed": "1.17.8-1"}


@pytest.mark.parametrize(
    "declared, installed, match",
    [("1.17.8-1", "1.17.8", True), ("1.17.8-1", "1.17.8-1", True), ("1.17.8-1", "1.17.9", False), ("1.17", "1.17.8~rc.1-1", True)],
)
def test_toolkit_version_read_from_nvidia_ctk_has_no_revision(declared, installed, match):
    assert _toolkit_matches(declared, installed) is match  # pylint: disable=protected-access


def test_toolkit_declared_but_missing():
    result, dummy = V.validate_host(CaptureHost(H200), {"toolkit_version": "1.17.8", "container_runtime": "none"})
    assert check(result, "toolkit_version")["msg"] == "NVIDIA Container Toolkit 1.17.8 is declared but none is installed"


# --- runtime handler ----------------------------------------------------------------------------


def test_docker_handler_from_the_capture():
    result, dummy = V.validate_host(CaptureHost("debian12-l40s-x2-package"), {"container_runtime": "docker"})
    assert check(result, "runtime") == {
        "name": "runtime",
        "status": "ok",
        "msg": "Docker runtime 'nvidia' runs nvidia-container-runtime (/etc/docker/daemon.json)",
    }
    assert result["runtime"]["present"] is True


@pytest.fixture
def tree(tmp_path):
    """A host tree with GPU facts from the H200 capture and the NVIDIA runtime installed."""
    host = TreeHost(tmp_path)
    host.binary("/usr/bin/nvidia-container-runtime")
    return host


def _runtime(host, runtime, facts=None, **params):
    params.setdefault("container_runtime", runtime)
    return V.validate_host(host, params, facts=facts or h200_facts())[0]


@pytest.mark.parametrize(
    "daemon_json, status, msg",
    [
        ('{"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}', "ok",
         "Docker runtime 'nvidia' runs nvidia-container-runtime (/etc/docker/daemon.json)"),
        ('{"runtimes": {"nvidia": {"path": "/opt/nvidia/nvidia-container-runtime"}}}', "failed",
         "/etc/docker/daemon.json runtimes.nvidia.path is /opt/nvidia/nvidia-container-runtime, which does not exist on the node"),
        ('{"runtimes": {"nvidia": {"path": "/usr/bin/runc"}}}', "failed",
         "/etc/docker/daemon.json runtimes.nvidia.path runs /usr/bin/runc, not nvidia-container-runtime"),
        ('{"log-driver": "json-file"}', "failed", "Docker has no runtime 'nvidia' in /etc/docker/daemon.json (runtimes: none)"),
        ('{"runtimes": ', "failed", None),
        (None, "failed", "/etc/docker/daemon.json does not exist: Docker has no runtime 'nvidia'"),
    ],
)
def test_docker_daemon_json(tree, daemon_json, status, msg):
    tree.binary("/usr/bin/dockerd")
    if daemon_json is not None:
        tree.put("/etc/docker/daemon.json", daemon_json)
    result = _runtime(tree, "docker")
    found = check(result, "runtime")
    assert found["status"] == status
    if msg:
        assert found["msg"] == msg
    else:
        assert found["msg"].startswith("/etc/docker/daemon.json is not valid JSON (dockerd will not start):")


# --- a node prepared without a GPU (gpufleet_prepare_without_gpu: the lab, image builds) -----------


def _prepared_facts(package_version="535.309.01-0+deb12u1", toolkit="1.17.8-1"):
    """The Debian 12 capture without GPU, with a driver package and the toolkit as the host layers
    leave them (the lab's versions)."""
    facts = copy.deepcopy(fixture_facts("debian12-nogpu"))
    facts["driver"]["package"] = {"name": "nvidia-driver", "version": package_version} if package_version else None
    facts["driver"]["installed"] = {}
    facts["driver"]["found"] = found_driver(facts["driver"])
    facts["container"]["toolkit"] = {"version": toolkit} if toolkit else {}
    return facts


DOCKER_NVIDIA = '{"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}'


@pytest.mark.parametrize(
    "params, facts_args, expect",
    [
        ({"driver_version": "535", "toolkit_version": "1.17.8-1"}, {},
         [("gpus", "skipped", V.PREPARED_NO_GPU_MESSAGE),
          ("driver_version", "ok", "installed driver 535.309.01 is the declared 535 (not loaded: no GPU)"),
          ("toolkit_version", "ok", "NVIDIA Container Toolkit 1.17.8-1 is the declared 1.17.8-1"),
          ("runtime", "ok", "Docker runtime 'nvidia' runs nvidia-container-runtime (/etc/docker/daemon.json)")]),
        ({"driver_version": "550"}, {},
         [("gpus", "skipped", V.PREPARED_NO_GPU_MESSAGE),
          ("driver_version", "drift", "declared driver 550, installed 535.309.01"),
          ("runtime", "ok", "Docker runtime 'nvidia' runs nvidia-container-runtime (/etc/docker/daemon.json)")]),
        ({"driver_version": "535", "toolkit_version": "1.17.8-1"}, {"package_version": None, "toolkit": None},
         [("gpus", "skipped", V.PREPARED_NO_GPU_MESSAGE),
          ("driver_version", "failed", "no NVIDIA driver is installed (driver_method package)"),
          ("toolkit_version", "failed", "NVIDIA Container Toolkit 1.17.8-1 is declared but none is installed"),
          ("runtime", "ok", "Docker runtime 'nvidia' runs nvidia-container-runtime (/etc/docker/daemon.json)")]),
        ({"driver_method": "preinstalled"}, {},
         [("gpus", "skipped", V.PREPARED_NO_GPU_MESSAGE),
          ("driver_version", "skipped", "driver version: not checked on a node without GPU (driver_method preinstalled)"),
          ("runtime", "ok", "Docker runtime 'nvidia' runs nvidia-container-runtime (/etc/docker/daemon.json)")]),
    ],
)
def test_node_prepared_without_gpu_checks_what_was_installed(tree, params, facts_args, expect):
    tree.binary("/usr/bin/dockerd")
    tree.put("/etc/docker/daemon.json", DOCKER_NVIDIA)
    params = dict(params, prepared_without_gpu=True, container_runtime="docker")
    result = V.validate_host(tree, params, facts=_prepared_facts(**facts_args))[0]
    got = [(c["name"], c["status"], c["msg"]) for c in result["checks"]]
    assert got[:len(expect)] == expect
    # and the day-2 checks that need no GPU: the kernel's module, the runtime's files, isolation
    assert [c[0] for c in got[len(expect):]] == ["kernel_next_boot", "runtime_drift", "isolation"], got
    worst = max((c[1] for c in got), key=lambda s: RANK[s])
    assert result["status"] == worst
    # no GPU: neither nvidia-smi, nor CDI, nor the CUDA test ran
    assert result["cuda"]["ran"] is False and result["cdi"]["enabled"] is None


def test_without_prepared_without_gpu_the_same_node_has_nothing_to_validate(tree):
    result = V.validate_host(tree, {"driver_version": "535", "container_runtime": "docker"}, facts=_prepared_facts())[0]
    assert names(result) == [("gpus", "skipped")]
    assert result["summary"] == V.NO_GPU_MESSAGE


def test_docker_not_installed(tree):
    assert check(_runtime(tree, "docker"), "runtime")["msg"] == "dockerd is not installed (container_runtime docker)"


def test_crio_dropin(tree):
    tree.binary("/usr/bin/crio")
    tree.put("/etc/crio/crio.conf", _read(os.path.join(RUNTIME, "crio.conf")))
    tree.put("/etc/crio/crio.conf.d/10-crio.conf", _read(os.path.join(RUNTIME, "crio-10-crio.conf")))
    missing = check(_runtime(tree, "crio"), "runtime")
    assert missing["status"] == "failed"
    assert missing["msg"].startswith("CRI-O has no runtime 'nvidia' ([crio.runtime.runtimes.nvidia] not in /etc/crio/crio.conf + ")
    tree.put(
        "/etc/crio/crio.conf.d/99-nvidia.toml",
        '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\nruntime_type = "oci"\n',
    )
    found = check(_runtime(tree, "crio"), "runtime")
    assert found["status"] == "ok", found
    assert found["msg"].startswith("CRI-O runtime 'nvidia' runs /usr/bin/nvidia-container-runtime (/etc/crio/crio.conf + ")


def test_containerd_not_installed(tree):
    assert check(_runtime(tree, "containerd"), "runtime")["msg"] == "containerd is not installed (container_runtime containerd)"


def test_containerd_dump_failure_is_reported_with_containerds_words(tree):
    tree.binary("/usr/bin/containerd")
    tree.put("/etc/containerd/config.toml", "version = 2\n")
    tree.commands["containerd"] = (
        1,
        "",
        'containerd: failed to load TOML from /etc/containerd/config.toml: invalid plugin key URI "cri" expect io.containerd.x.vx\n',
    )
    found = check(_runtime(tree, "containerd"), "runtime")
    assert found["msg"] == (
        "containerd cannot load /etc/containerd/config.toml: containerd: failed to load TOML from "
        '/etc/containerd/config.toml: invalid plugin key URI "cri" expect io.containerd.x.vx'
    )
    assert tree.calls[-1] == ["/usr/bin/containerd", "--config", "/etc/containerd/config.toml", "config", "dump"]


def _real_containerd(binary, tree):
    """Run the real binary on the tree's files: /etc/... paths point into the tree."""

    def run(argv):
        argv = [binary] + [a.replace("/etc/", tree.root + "/etc/") if a.startswith("/etc/") else a for a in argv[1:]]
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False, timeout=60)
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()

    return run


def _major(binary):
    out = subprocess.run([binary, "--version"], stdout=subprocess.PIPE, check=False).stdout.decode()
    return int(out.split()[2].lstrip("v").split(".")[0])


@pytest.mark.parametrize("binary", _containerd_binaries())
@pytest.mark.parametrize(
    "case, main, dropin, status, msg",
    [
        ("ctk-dropin-debian", "containerd16-debian-etc--dropin/output.toml", "containerd16-debian-etc--dropin/dropin-99-nvidia.toml",
         "ok", "containerd runtime handler 'nvidia' runs /usr/bin/nvidia-container-runtime"),
        ("ctk-dropin-v3", "containerd21-default--dropin/output.toml", "containerd21-default--dropin/dropin-99-nvidia.toml",
         "ok", "containerd runtime handler 'nvidia' runs /usr/bin/nvidia-container-runtime"),
        ("debian-no-handler", "../debian-containerd-etc-config.toml", None,
         "failed", "containerd has no runtime handler 'nvidia'"),
        # containerd 2.x reports the plugin by its full name.
        ("docker-cri-disabled", "../docker-containerd.io-config.toml", None, "failed", "containerd's CRI plugin is disabled (disabled_plugins = ["),
        ("no-config", None, None, "failed", "containerd has no runtime handler 'nvidia'"),
    ],
)
def test_containerd_handler_through_a_real_config_dump(tree, binary, case, main, dropin, status, msg):
    major = _major(binary)
    if case == "ctk-dropin-v3" and major < 2:
        pytest.skip("a version 3 config is for containerd 2.x")
    tree.binary("/usr/bin/containerd")
    if main:
        text = _read(os.path.join(CTK, main)).replace('"/etc/containerd/', '"%s/etc/containerd/' % tree.root)
        tree.put("/etc/containerd/config.toml", text.replace("'/etc/containerd/", "'%s/etc/containerd/" % tree.root))
    if dropin:
        tree.put("/etc/containerd/conf.d/99-nvidia.toml", _read(os.path.join(CTK, dropin)))
    tree.commands["containerd"] = _real_containerd(binary, tree)
    result = _runtime(tree, "containerd")
    found = check(result, "runtime")
    assert found["status"] == status, found
    assert found["msg"].startswith(msg), found
    if status == "ok":
        assert result["runtime"]["source"] == "/usr/bin/containerd --config /etc/containerd/config.toml config dump"
        assert result["runtime"]["present"] is True


@pytest.mark.parametrize("binary", _containerd_binaries())
def test_containerd_handler_running_runc_or_a_missing_binary(tree, binary):
    tree.binary("/usr/bin/containerd")
    main = _read(os.path.join(CTK, "containerd16-debian-etc--dropin", "output.toml"))
    tree.put("/etc/containerd/config.toml", main.replace('"/etc/containerd/', '"%s/etc/containerd/' % tree.root))
    dropin = _read(os.path.join(CTK, "containerd16-debian-etc--dropin", "dropin-99-nvidia.toml"))
    tree.commands["containerd"] = _real_containerd(binary, tree)
    tree.put("/etc/containerd/conf.d/99-nvidia.toml", dropin.replace("/usr/bin/nvidia-container-runtime", "/opt/nvidia/nvidia-container-runtime"))
    assert check(_runtime(tree, "containerd"), "runtime")["msg"].endswith(
        '.options.BinaryName is /opt/nvidia/nvidia-container-runtime, which does not exist on the node'
    )
    tree.put("/etc/containerd/conf.d/99-nvidia.toml", dropin.replace('BinaryName = "/usr/bin/nvidia-container-runtime"', ""))
    # containerd 2.x dumps a version 2 file converted to version 3.
    plugin = "io.containerd.cri.v1.runtime" if _major(binary) >= 2 else "io.containerd.grpc.v1.cri"
    assert check(_runtime(tree, "containerd"), "runtime")["msg"] == (
        'plugins."%s".containerd.runtimes.nvidia.options.BinaryName is not set: '
        "the handler runs runc, not nvidia-container-runtime" % plugin
    )


def test_k3s_generated_config_read_without_a_binary(tree):
    facts = h200_facts()
    facts["container"]["k3s"]["installed"] = True
    path = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"
    assert check(_runtime(tree, "k3s", facts), "runtime")["msg"] == (
        "k3s has not generated %s yet (is k3s running?)" % path
    )
    base = _read(os.path.join(RUNTIME, "k3s-v1.30-config.toml"))
    tree.put(path, base)
    missing = check(_runtime(tree, "k3s", facts), "runtime")
    assert missing["status"] == "failed" and "no runtime handler 'nvidia'" in missing["msg"]
    tree.put(
        path,
        base
        + '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes."nvidia"]\n  runtime_type = "io.containerd.runc.v2"\n'
        + '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes."nvidia".options]\n'
        + '  BinaryName = "/usr/bin/nvidia-container-runtime"\n  SystemdCgroup = true\n',
    )
    found = check(_runtime(tree, "k3s", facts), "runtime")
    assert found == {
        "name": "runtime",
        "status": "ok",
        "msg": "containerd runtime handler 'nvidia' runs /usr/bin/nvidia-container-runtime (from %s)" % path,
    }


def test_k3s_v3_config_with_an_imported_dropin(tree):
    facts = h200_facts()
    facts["container"]["k3s"]["installed"] = True
    base = "/var/lib/rancher/k3s/agent/etc/containerd"
    tree.put(base + "/config.toml", _read(os.path.join(RUNTIME, "k3s-v1.33-config.toml")))
    tree.put(
        base + "/config-v3.toml.d/99-nvidia.toml",
        'version = 3\n[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]\nruntime_type = "io.containerd.runc.v2"\n'
        '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]\nBinaryName = "/usr/bin/nvidia-container-runtime"\n',
    )
    found = check(_runtime(tree, "k3s", facts), "runtime")
    assert found["status"] == "ok", found
    assert found["msg"].endswith("(from %s/config.toml + %s/config-v3.toml.d/99-nvidia.toml)" % (base, base))


# --- CDI ----------------------------------------------------------------------------------------


def test_cdi_not_enabled_is_not_checked(tree):
    assert check(_runtime(tree, "none"), "cdi")["msg"] == "CDI spec: not checked: CDI is not enabled and no spec is installed"


def test_cdi_spec_of_nvidia_ctk_names_the_h200(tree):
    tree.put("/etc/cdi/nvidia.yaml", _read(CDI_SPEC))
    result = _runtime(tree, "none")
    assert check(result, "cdi") == {"name": "cdi", "status": "ok", "msg": "/etc/cdi/nvidia.yaml names all 1 GPU"}
    assert result["cdi"]["why"] == ["a spec is installed"]
    assert result["cdi"]["specs"] == [
        {
            "path": "/etc/cdi/nvidia.yaml",
            "kind": "nvidia.com/gpu",
            "devices": ["0", "GPU-5865af09-6dee-d4a4-5fb2-a29f36b8411a", "all"],
            "driver_version": "580.159.04",
            "error": None,
        }
    ]


def test_cdi_enabled_but_no_spec(tree):
    result = _runtime(tree, "none", cdi="enabled")
    assert check(result, "cdi")["msg"] == (
        "CDI is enabled (declared enabled) but no spec of kind nvidia.com/gpu is in /etc/cdi, /var/run/cdi"
    )


def test_cdi_enabled_by_the_toolkit_mode(tree):
    tree.put("/etc/nvidia-container-runtime/config.toml", '[nvidia-container-runtime]\nmode = "cdi"\n')
    assert check(_runtime(tree, "none"), "cdi")["msg"].startswith(
        'CDI is enabled (/etc/nvidia-container-runtime/config.toml has mode = "cdi") but no spec'
    )


def test_cdi_enabled_by_dockers_features(tree):
    tree.binary("/usr/bin/dockerd")
    tree.put("/etc/docker/daemon.json", '{"features": {"cdi": true}, "runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}}')
    tree.put("/var/run/cdi/nvidia.json", '{"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [{"name": "0"}]}')
    result = _runtime(tree, "docker")
    assert result["cdi"]["why"] == ["docker enables CDI"]
    assert check(result, "cdi")["msg"] == "/var/run/cdi/nvidia.json names all 1 GPU"


@pytest.mark.parametrize(
    "edit, msg",
    [
        (lambda t: t.replace("580.159.04", "580.95.05"),
         "/etc/cdi/nvidia.yaml was written for driver 580.95.05, the loaded driver is 580.159.04: regenerate it"),
        (lambda t: t.replace('- name: "0"', '- name: "1"').replace("- name: GPU-5865af09", "- name: GPU-00000000"),
         "/etc/cdi/nvidia.yaml names no device for GPU 0 (GPU-d35d5d0d-d305-4f92-c0d5-c310f071b577)"),
        (lambda t: t.replace("kind: nvidia.com/gpu\n", "kind: nvidia.com/gpu\n  bad: [\n"), None),
    ],
)
def test_cdi_spec_problems(tree, edit, msg):
    tree.put("/etc/cdi/nvidia.yaml", edit(_read(CDI_SPEC)))
    found = check(_runtime(tree, "none"), "cdi")
    assert found["status"] == "failed"
    if msg:
        assert found["msg"] == msg
    else:
        assert found["msg"].startswith("/etc/cdi/nvidia.yaml does not parse as a CDI spec:")


def test_cdi_yaml_subset_reader_agrees_with_pyyaml():
    yaml = pytest.importorskip("yaml")
    text = _read(CDI_SPEC)
    full = yaml.safe_load(text)
    subset = parse_cdi_yaml_subset(text)
    assert subset["kind"] == full["kind"] == "nvidia.com/gpu"
    assert subset["cdiVersion"] == full["cdiVersion"]
    assert [d["name"] for d in subset["devices"]] == [d["name"] for d in full["devices"]]


def test_cdi_yaml_subset_reader_refuses_what_it_cannot_read():
    with pytest.raises(ValueError):
        parse_cdi_yaml_subset("cdiVersion: 0.5.0\n\tkind: x\n")
    with pytest.raises(ValueError):
        parse_cdi_yaml_subset("just some text\n")


# --- CUDA vector add ----------------------------------------------------------------------------


PASSED_OUTPUT = "[Vector addition of 50000 elements on 1 device(s)]\ndevice 0 (NVIDIA H200): 50000 elements added\nTest PASSED\n"


def _cuda_host(tmp_path, build=(0, "", ""), run=(0, PASSED_OUTPUT, "")):
    host = TreeHost(tmp_path)
    host.binary("/usr/local/cuda/bin/nvcc")
    os.makedirs(os.path.join(str(tmp_path), "tmp"))
    seen = {}

    def runner(argv):
        if posixpath.basename(argv[0]) == "nvcc":
            seen["build"] = list(argv)
            seen["source"] = _read(os.path.join(host.root, argv[-1].lstrip("/")))
            return build
        seen["run"] = list(argv)
        return run

    return host, runner, seen


def test_cuda_vector_add_passes(tmp_path):
    host, runner, seen = _cuda_host(tmp_path)
    result, dummy = V.validate_host(host, {"container_runtime": "none"}, facts=h200_facts(), cuda_runner=runner)
    assert check(result, "cuda") == {
        "name": "cuda",
        "status": "ok",
        "msg": "CUDA vectorAdd passed on the host ([Vector addition of 50000 elements on 1 device(s)])",
    }
    assert result["cuda"]["passed"] is True and result["cuda"]["nvcc"] == "/usr/local/cuda/bin/nvcc"
    build = seen["build"]
    assert build[0] == "/usr/local/cuda/bin/nvcc" and build[1] == "-o"
    assert build[2].startswith("/tmp/gpufleet-vectoradd-") and build[3] == posixpath.join(posixpath.dirname(build[2]), "vectoradd.cu")
    assert seen["run"] == [build[2]]
    assert "cudaMalloc" in seen["source"] and "Test PASSED" in seen["source"]
    assert os.listdir(os.path.join(str(tmp_path), "tmp")) == []  # the work folder is gone


@pytest.mark.parametrize(
    "build, run, status, msg",
    [
        ((1, "", "nvcc fatal   : Failed to find a host compiler\n"), None, "skipped",
         "CUDA vectorAdd on the host: not run: /usr/local/cuda/bin/nvcc could not build it: nvcc fatal   : Failed to find a host compiler"),
        ((0, "", ""), (1, "cudaGetDeviceCount failed: no CUDA-capable device is detected (cudaErrorNoDevice)\nTest FAILED\n", ""), "failed",
         "CUDA vectorAdd failed on the host: exit 1: cudaGetDeviceCount failed: no CUDA-capable device is detected (cudaErrorNoDevice)"),
        ((0, "", ""), (124, "", "vectoradd timed out after 180 seconds"), "failed",
         "CUDA vectorAdd failed on the host: did not finish in time"),
        ((0, "", ""), (0, "no verdict\n", ""), "failed", "CUDA vectorAdd failed on the host: exit 0: no verdict"),
    ],
)
def test_cuda_vector_add_problems(tmp_path, build, run, status, msg):
    host, runner, dummy = _cuda_host(tmp_path, build=build, run=run or (0, "", ""))
    result, dummy = V.validate_host(host, {"container_runtime": "none"}, facts=h200_facts(), cuda_runner=runner)
    assert check(result, "cuda") == {"name": "cuda", "status": status, "msg": msg}
    assert os.listdir(os.path.join(str(tmp_path), "tmp")) == []


def test_cuda_test_turned_off(tmp_path):
    host, runner, seen = _cuda_host(tmp_path)
    result, dummy = V.validate_host(host, {"container_runtime": "none", "cuda_test": False}, facts=h200_facts(), cuda_runner=runner)
    assert check(result, "cuda")["msg"] == "CUDA vectorAdd on the host: turned off (cuda_test false)"
    assert seen == {}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_the_vector_add_source_builds_with_the_real_nvcc(tmp_path, monkeypatch):
    """Builds with this machine's nvcc and runs; without a GPU it must say Test FAILED and why."""
    host = common_host.Host("/")
    checks = Checks()
    made = []  # the work folder this check makes (other test runs may share /tmp)
    mkdtemp = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **kw: made.append(mkdtemp(**kw)) or made[-1])
    result = check_cuda(checks, host, True, shutil.which("nvcc"), True, common_host.subprocess_runner("/", 300))
    assert result["ran"] is True, checks.items  # built
    if result["passed"]:
        assert checks.items[0]["status"] == "ok" and "Test PASSED" in result["output"]
    else:
        assert checks.items[0]["msg"].startswith("CUDA vectorAdd failed on the host: exit 1: ")
        assert "Test FAILED" in result["output"] and "(cuda" in result["output"]
    assert len(made) == 1 and os.path.basename(made[0]).startswith("gpufleet-vectoradd-") and not os.path.exists(made[0])


def test_summary_line_counts_the_checks():
    facts = copy.deepcopy(h200_facts())
    result, dummy = V.validate_host(CaptureHost(H200), {"driver_version": "575", "container_runtime": "none"}, facts=facts)
    assert result["summary"] == "drift: 3 ok, 1 drifted, 0 failed, 7 not checked - declared driver 575, loaded 580.159.04"


# --- the steps of the checks ---------------------------------------------------------------------


def test_driver_problems_in_order():
    assert _smi_problem({"state": "ok"}) is None
    assert _smi_problem({"state": "error"}) == "nvidia-smi failed: no answer"
    assert _library_mismatch("580.1", {"driver_version": "580.1"}) is None
    assert _library_mismatch(None, {"driver_version": "580.1"}) is None
    assert _library_mismatch("575.1", {"driver_version": "580.1"}).startswith("driver/library version mismatch")
    pci = [{"bus_id": "0000:01:00.0"}, {"bus_id": "0000:02:00.0"}]
    assert _unseen_gpus(pci, pci) is None and _unseen_gpus([], []) is None
    assert _unseen_gpus(pci, pci[:1]) == "nvidia-smi sees 1 of the 2 GPUs on the PCI bus (not seen: 0000:02:00.0)"
    assert _unseen_gpus([{"bus_id": None}] * 2, [{"bus_id": None}]) == "nvidia-smi sees 1 of the 2 GPUs on the PCI bus (not seen: unknown)"


@pytest.mark.parametrize("enabled, driver_ok, why", [
    (True, True, None),
    (False, True, "CUDA vectorAdd on the host: turned off (cuda_test false)"),
    (True, False, "CUDA vectorAdd on the host: not run: the driver does not answer"),
    (True, None, "CUDA vectorAdd on the host: not run: the driver is in the GPU Operator's container"),
])
def test_cuda_not_run(enabled, driver_ok, why):
    assert _cuda_not_run(enabled, driver_ok) == why


def test_vector_add_failure():
    assert _vector_add_failure(124, "", "") == "did not finish in time"
    assert _vector_add_failure(2, "a\nb\n\nc\nd\nTest FAILED\n", "e") == "exit 2: c; d; e"
    assert _vector_add_failure(1, "", "") == "exit 1: no output"


def test_cdi_missing_by_nvidia_smi_or_by_count():
    facts = h200_facts()
    smi = facts["driver"]["nvidia_smi"]["gpus"][0]
    assert _cdi_missing(facts, {"0"}) == ([], 1)
    assert _cdi_missing(facts, {smi["uuid"]}) == ([], 1)
    assert _cdi_missing(facts, {"all"}) == (["GPU 0 (%s)" % smi["uuid"]], 1)
    facts["driver"]["nvidia_smi"]["state"] = "error"
    assert _cdi_missing(facts, {"all", "0000:3b:00.0", "GPU-x"}) == (["1 of 1 GPUs"], 1)
    assert _cdi_missing(facts, {"0"}) == ([], 1)


def test_read_cdi_data_fills_what_it_read_before_it_refuses():
    entry = _cdi_entry("/etc/cdi/x.json")
    with pytest.raises(ValueError, match="a device without a name"):
        _read_cdi_data(entry, {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [{"name": 0}, {}]})
    assert (entry["kind"], entry["devices"]) == ("nvidia.com/gpu", ["0"])
    for data, why in (([], "not a mapping"), ({}, "no cdiVersion"), ({"cdiVersion": "1", "devices": []}, "no devices")):
        with pytest.raises(ValueError, match=why):
            _read_cdi_data(_cdi_entry("x"), data)


def test_yaml_lines_skip_comments_and_refuse_tabs():
    assert list(_yaml_lines("---\n# c\n\nkind: x\n  - a\n")) == [(4, "kind: x"), (5, "  - a")]
    with pytest.raises(ValueError, match="^line 2: a tab in the indentation$"):
        list(_yaml_lines("a: 1\n\tb: 2\n"))


def test_locate_containerd(tree):
    assert _locate_containerd(tree, {}, "containerd") == (None, None, "containerd is not installed (container_runtime containerd)")
    tree.binary("/usr/bin/containerd")
    assert _locate_containerd(tree, {}, "containerd") == ("/etc/containerd/config.toml", "/usr/bin/containerd", None)
    config = "/var/lib/rancher/rke2/agent/etc/containerd/config.toml"
    assert _locate_containerd(tree, {"container": {"rke2": {"installed": True}}}, "rke2") == (
        None, None, "rke2 has not generated %s yet (is rke2 running?)" % config)
    tree.put(config, "version = 2\n")
    assert _locate_containerd(tree, {"container": {"rke2": {"installed": True}}}, "rke2") == (config, None, None)
