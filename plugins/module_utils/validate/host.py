# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host validation: what NVIDIA's validator checks on a node, read only, in one pass.

:func:`validate_host` takes a :class:`~ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host.Host`, gathers fresh ``gpufleet_nvidia``
facts and checks, in order:

- ``gpus``: the node has the GPUs it is declared to have (``gpu_count``); a node without GPU
  and none declared has nothing to validate, and says so;
- ``driver``: ``nvidia-smi`` answers and sees every GPU of the PCI bus, and the loaded kernel
  module is the version nvidia-smi's libraries are (the "driver/library version mismatch");
- ``driver_version``: the loaded driver is the declared release or branch (drift otherwise);
- ``driver_installed``: the driver on disk is the loaded one (drift otherwise: a reboot is due);
- ``toolkit_version``: the NVIDIA Container Toolkit is the declared version;
- ``runtime``: the container runtime has a handler named ``nvidia`` running
  nvidia-container-runtime (containerd through ``containerd config dump``, so drop-ins count;
  k3s / RKE2 from their generated config; CRI-O from its config and drop-ins; Docker from
  ``daemon.json``);
- ``cdi``: where CDI is enabled (by the runtime's config, the toolkit's ``mode = "cdi"``, a spec
  on disk, or the caller) a spec of kind ``nvidia.com/gpu`` parses, names every GPU and was
  written for the loaded driver;
- ``cuda``: with ``nvcc`` on the node, a vector-add CUDA program built in a temporary folder runs
  on every GPU and prints ``Test PASSED``;
- ``kernel_next_boot``, ``driver_libraries``, ``nvml_reload``, ``runtime_drift``, ``isolation``:
  the day-2 checks of :mod:`validate.day2` (the next boot kernel's module, the loaded module
  against the libraries, NVML after ``systemctl daemon-reload``, the runtime files changed by
  someone else, the toolkit's isolation of unprivileged containers against the declared one).

Each check ends in ``ok``, ``drift``, ``failed`` or ``skipped`` with a message that says what
was found and why; the node's status is the worst of them. Nothing on the node changes (the
CUDA test's folder is removed). Nothing here raises because of the node's state; only bad
arguments raise :class:`GpuFleetError`.
"""

from __future__ import annotations

import glob
import json
import os
import posixpath
import re
import shutil
import tempfile

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import toml_subset
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import deep_merge, dig as _dig, plural as _plural
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import facts as gpu_facts
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.driver import found_of
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.container import (
    CONTAINERD_CONFIG,
    CRIO_CONFIG,
    CRIO_DROPIN_DIR,
    CRI_PLUGINS,
    DOCKER_CONFIG,
    TOOLKIT_CONFIG,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.probes import first_line
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate import day2 as day2_checks

SCHEMA = 1
OK = "ok"
DRIFT = "drift"
FAILED = "failed"
SKIPPED = "skipped"
RANK = {SKIPPED: 0, OK: 1, DRIFT: 2, FAILED: 3}

RUNTIMES = ("containerd", "crio", "docker", "k3s", "rke2", "none")
DRIVER_METHODS = ("package", "preinstalled", "operator")
CDI_MODES = ("auto", "enabled", "disabled")
NO_GPU_MESSAGE = "no GPU: nothing to validate"
PREPARED_NO_GPU_MESSAGE = (
    "no GPU: the node was prepared without one (prepared_without_gpu); the driver cannot load and no "
    "CUDA work can run until it has a GPU, so only what is installed and configured was checked"
)

CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
CDI_KIND = "nvidia.com/gpu"
RANCHER_CONTAINERD = {
    "k3s": (
        "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
        ("/var/lib/rancher/k3s/data/current/bin/containerd",),
    ),
    "rke2": (
        "/var/lib/rancher/rke2/agent/etc/containerd/config.toml",
        ("/var/lib/rancher/rke2/bin/containerd",),
    ),
}
NVCC_DIRS = ("/usr/local/cuda/bin",)
PASSED = "Test PASSED"
_TAIL = 600

# The CUDA test: a vector add on every GPU, checked on the host, "Test PASSED" or "Test FAILED".
VECTOR_ADD_CU = r"""// gpufleet.nvidia host validation: vector addition on every GPU.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void vectorAdd(const float *a, const float *b, float *c, int n)
{
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess) {                                                    \
            printf("device %d: %s failed: %s (%s)\n", device, #call,                  \
                   cudaGetErrorString(err_), cudaGetErrorName(err_));                 \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

static int run(int device, const float *a, const float *b, float *c, int n)
{
    size_t size = (size_t)n * sizeof(float);
    float *da = NULL, *db = NULL, *dc = NULL;
    cudaDeviceProp prop;
    CHECK(cudaSetDevice(device));
    CHECK(cudaGetDeviceProperties(&prop, device));
    CHECK(cudaMalloc((void **)&da, size));
    CHECK(cudaMalloc((void **)&db, size));
    CHECK(cudaMalloc((void **)&dc, size));
    CHECK(cudaMemcpy(da, a, size, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b, size, cudaMemcpyHostToDevice));
    int threads = 256;
    int blocks = (n + threads - 1) / threads;
    vectorAdd<<<blocks, threads>>>(da, db, dc, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(c, dc, size, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    for (int i = 0; i < n; ++i) {
        if (fabsf(a[i] + b[i] - c[i]) > 1e-5f) {
            printf("device %d (%s): wrong sum at element %d\n", device, prop.name, i);
            return 1;
        }
    }
    printf("device %d (%s): %d elements added\n", device, prop.name, n);
    return 0;
}

int main(void)
{
    const int n = 50000;
    int device = -1;
    int count = 0;
    float *a = (float *)malloc((size_t)n * sizeof(float));
    float *b = (float *)malloc((size_t)n * sizeof(float));
    float *c = (float *)malloc((size_t)n * sizeof(float));
    if (a == NULL || b == NULL || c == NULL) {
        printf("host memory allocation failed\nTest FAILED\n");
        return 1;
    }
    for (int i = 0; i < n; ++i) {
        a[i] = rand() / (float)RAND_MAX;
        b[i] = rand() / (float)RAND_MAX;
    }
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        printf("cudaGetDeviceCount failed: %s (%s)\nTest FAILED\n", cudaGetErrorString(err), cudaGetErrorName(err));
        return 1;
    }
    printf("[Vector addition of %d elements on %d device(s)]\n", n, count);
    int failed = count == 0;
    for (device = 0; device < count; ++device) {
        failed |= run(device, a, b, c, n);
    }
    free(a);
    free(b);
    free(c);
    printf(failed ? "Test FAILED\n" : "Test PASSED\n");
    return failed;
}
"""


# --- small helpers ------------------------------------------------------------------------------


class Checks(object):
    """The checks of one node, in order, each ``{name, status, msg}``."""

    def __init__(self):
        self.items = []

    def add(self, name, status, msg):
        self.items.append({"name": name, "status": status, "msg": msg})
        return status

    def status(self):
        ranked = [c["status"] for c in self.items if c["status"] != SKIPPED]
        if not ranked:
            return SKIPPED
        return max(ranked, key=lambda s: RANK[s])

    def messages(self, status):
        return [c["msg"] for c in self.items if c["status"] == status]


def _tail(text, limit=_TAIL):
    text = (text or "").strip()
    return text if len(text) <= limit else "..." + text[-(limit - 3):]


def _read(host, path):
    """``(text, error)``: the host file's text, or None and why not."""
    try:
        return host.read_text(path), None
    except (IOError, OSError) as exc:
        return None, "%s: %s" % (path, exc.strerror or exc)


def _read_toml_file(host, path):
    """``(data, error)``; a missing file is ``({}, None)``."""
    if not host.exists(path):
        return {}, None
    text, error = _read(host, path)
    if error:
        return None, error
    try:
        return toml_subset.loads(text), None
    except ValueError as exc:
        return None, "%s is not valid TOML: %s" % (path, exc)


def _executable(host, path):
    """The host path of a runtime binary (absolute, or looked up like the runtime does), or None."""
    if not path:
        return None
    if path.startswith("/"):
        return path if host.exists(path) else None
    return host.which(path)


# --- driver -------------------------------------------------------------------------------------


def check_gpus(checks, facts, expected):
    found = facts.get("gpu_count") or 0
    if expected is None or (expected == 0 and found == 0):
        if found:
            checks.add("gpus", OK, "%s on the PCI bus" % _plural(found, "NVIDIA GPU"))
        return found
    if found == expected:
        checks.add("gpus", OK, "%s on the PCI bus, as declared" % _plural(found, "NVIDIA GPU"))
    else:
        checks.add(
            "gpus",
            FAILED,
            "expected %s (gpu_count), found %s on the PCI bus" % (_plural(expected, "GPU"), found or "none"),
        )
    return found


def check_driver(checks, facts, driver_method):
    """The driver check: nvidia-smi answers, at the kernel module's version, and sees every GPU
    of the PCI bus. True when it passed, False when not, None when it is not the host's to check."""
    if driver_method == "operator":
        checks.add(
            "driver",
            SKIPPED,
            "driver: not checked on the host: the GPU Operator runs it in a container "
            "(driver_method operator); the cluster checks cover it",
        )
        return None
    driver = facts.get("driver") or {}
    smi = driver.get("nvidia_smi") or {}
    seen = smi.get("gpus") or []
    problem = _smi_problem(smi) or _library_mismatch(driver.get("version"), smi) or _unseen_gpus(facts.get("gpus") or [], seen)
    if problem:
        checks.add("driver", FAILED, problem)
        return False
    checks.add(
        "driver",
        OK,
        "nvidia-smi answers: driver %s, CUDA %s, %s"
        % (smi.get("driver_version"), smi.get("cuda_version"), _plural(len(seen), "GPU")),
    )
    return True


def _smi_problem(smi):
    """Why nvidia-smi gave no answer, or None."""
    state = smi.get("state")
    if state == "missing":
        return "nvidia-smi not found (looked in PATH, /usr/local/nvidia/bin and /usr/bin): the driver is not installed"
    if state != "ok":
        return "nvidia-smi failed: %s" % (smi.get("detail") or "no answer")
    return None


def _library_mismatch(loaded, smi):
    """The "driver/library version mismatch": the kernel module is not nvidia-smi's version; or None."""
    if loaded and smi.get("driver_version") and loaded != smi.get("driver_version"):
        return (
            "driver/library version mismatch: the kernel module is %s, nvidia-smi's libraries %s "
            "(reboot, or reload the nvidia modules)" % (loaded, smi.get("driver_version"))
        )
    return None


def _unseen_gpus(pci, seen):
    """Which GPUs of the PCI bus nvidia-smi does not see, as a problem; or None."""
    if not pci or len(seen) >= len(pci):
        return None
    missing = sorted(set(g.get("bus_id") for g in pci) - set(g.get("bus_id") for g in seen))
    return "nvidia-smi sees %d of the %d GPUs on the PCI bus (not seen: %s)" % (
        len(seen), len(pci), ", ".join(b for b in missing if b) or "unknown")


def check_prepared_driver(checks, facts, declared, driver_method):
    """A node prepared without a GPU: the driver on disk against the declared one (none can load)."""
    if driver_method != "package":
        checks.add(
            "driver_version",
            SKIPPED,
            "driver version: not checked on a node without GPU (driver_method %s)" % driver_method,
        )
        return
    installed = found_of(facts)["version"]
    if not installed:
        checks.add("driver_version", FAILED, "no NVIDIA driver is installed (driver_method package)")
    elif not declared:
        checks.add("driver_version", OK, "driver %s installed (none declared), not loaded: no GPU" % installed)
    elif versions.matches(declared, installed):
        checks.add(
            "driver_version", OK, "installed driver %s is the declared %s (not loaded: no GPU)" % (installed, declared)
        )
    else:
        checks.add("driver_version", DRIFT, "declared driver %s, installed %s" % (declared, installed))


def check_driver_version(checks, facts, declared, driver_method):
    driver = facts.get("driver") or {}
    loaded = driver.get("version") or (driver.get("nvidia_smi") or {}).get("driver_version")
    if driver_method == "operator":
        checks.add("driver_version", SKIPPED, "driver version: not checked on the host (driver_method operator)")
        return
    if not declared:
        checks.add("driver_version", SKIPPED, "driver version: none declared (nvidia_driver_version)")
    elif not loaded:
        checks.add("driver_version", SKIPPED, "driver version: no driver loaded to compare with %s" % declared)
    elif versions.try_parse_driver_version(loaded) is None:
        checks.add("driver_version", DRIFT, "declared driver %s, loaded %r (not a driver version)" % (declared, loaded))
    elif versions.matches(declared, loaded):
        checks.add("driver_version", OK, "loaded driver %s is the declared %s" % (loaded, declared))
    else:
        checks.add("driver_version", DRIFT, "declared driver %s, loaded %s" % (declared, loaded))
    installed = (driver.get("installed") or {}).get("version")
    if not loaded or not installed:
        return
    if installed == loaded:
        checks.add("driver_installed", OK, "the driver on disk (%s) is the loaded one" % installed)
    else:
        checks.add(
            "driver_installed",
            DRIFT,
            "driver %s is installed but %s is loaded: reboot (or reload the nvidia modules) to run it"
            % (installed, loaded),
        )


def _without_epoch(version):
    return version.rsplit(":", maxsplit=1)[-1]


def _toolkit_matches(declared, installed):
    """``1.17.8`` matches 1.17.8-1 and 1.17.8; ``1.17`` any 1.17.x; ``1.17.8-1`` matches 1.17.8-1,
    and 1.17.8 where the installed version has no package revision (read from nvidia-ctk)."""
    declared, installed = _without_epoch(declared), _without_epoch(installed)
    if installed == declared:
        return True
    if "-" in declared and "-" in installed:
        return False
    upstream = installed.split("-", maxsplit=1)[0].split("~", maxsplit=1)[0]
    wanted = declared.split("-", maxsplit=1)[0]
    return upstream == wanted or upstream.startswith(wanted + ".")


def check_toolkit_version(checks, facts, declared):
    toolkit = _dig(facts, "container", "toolkit") or {}
    installed = toolkit.get("version")
    if not declared:
        return
    if not installed:
        checks.add(
            "toolkit_version", FAILED, "NVIDIA Container Toolkit %s is declared but none is installed" % declared
        )
    elif _toolkit_matches(str(declared), str(installed)):
        checks.add("toolkit_version", OK, "NVIDIA Container Toolkit %s is the declared %s" % (installed, declared))
    else:
        checks.add("toolkit_version", DRIFT, "declared NVIDIA Container Toolkit %s, installed %s" % (declared, installed))


# --- runtime ------------------------------------------------------------------------------------


def _runtime_binary_problem(host, binary, where):
    """Why ``binary`` cannot be the NVIDIA runtime, or None."""
    if not binary:
        return "%s is not set: the handler runs runc, not nvidia-container-runtime" % where
    name = posixpath.basename(str(binary))
    if not name.startswith("nvidia-container-runtime"):
        return "%s runs %s, not nvidia-container-runtime" % (where, binary)
    if _executable(host, str(binary)) is None:
        return "%s is %s, which does not exist on the node" % (where, binary)
    return None


def host_glob(host, pattern):
    """The host paths of the files matching ``pattern`` (a host path), sorted as containerd does."""
    root = host.root
    local = pattern if root == "/" else os.path.join(root, pattern.lstrip("/"))
    matches = sorted(m for m in glob.glob(local) if os.path.isfile(m))
    if root == "/":
        return matches
    return ["/" + os.path.relpath(m, root) for m in matches]


def containerd_imports(host, path, data):
    """The files that ``imports`` of ``data`` (read from ``path``) name, in containerd's order."""
    found = []
    for pattern in data.get("imports") or []:
        if not isinstance(pattern, str):
            continue
        if not pattern.startswith("/"):
            pattern = posixpath.join(posixpath.dirname(path), pattern)
        found.extend(m for m in host_glob(host, pattern) if m not in found)
    return found


def _containerd_files(host, path):
    """``(files, datas, error)``: the config and its imports, each read."""
    data, error = _read_toml_file(host, path)
    if error:
        return [path], [], error
    files = [path] if host.exists(path) else []
    datas = [data] if files else []
    for extra in containerd_imports(host, path, data):
        more, error = _read_toml_file(host, extra)
        files.append(extra)
        if error:
            return files, datas, error
        datas.append(more)
    return files, datas, None


def _cri_table(config):
    for plugin in CRI_PLUGINS:
        table = _dig(config, "plugins", plugin)
        if isinstance(_dig(table, "containerd", "runtimes"), dict):
            return plugin, table
    return None, None


def _explicit_cdi(files_data):
    for data in files_data:
        for plugin in CRI_PLUGINS:
            if _dig(data, "plugins", plugin, "enable_cdi") is True:
                return True
    return False


def check_containerd(host, facts, flavor, handler):
    """``(status, msg, info)`` of the handler in containerd's (or k3s / RKE2's) merged config."""
    info = {"config": None, "source": None, "cdi": False, "default_runtime": None}
    path, binary, problem = _locate_containerd(host, facts, flavor)
    if problem:
        return FAILED, problem, info
    info["config"] = path
    merged, problem = _containerd_config(host, path, binary, info)
    if problem:
        return FAILED, problem, info
    status, msg = _containerd_handler(host, merged, path, handler, info)
    return status, msg, info


def _locate_containerd(host, facts, flavor):
    """``(config, binary, problem)``: the config file and the containerd binary of ``flavor``
    (containerd, k3s or rke2), or why there is none."""
    if flavor == "containerd":
        binary = host.which("containerd")
        if binary is None:
            return None, None, "containerd is not installed (container_runtime containerd)"
        return CONTAINERD_CONFIG, binary, None
    path, bundled = RANCHER_CONTAINERD[flavor]
    if not (_dig(facts, "container", flavor, "installed") or host.which(flavor)):
        return None, None, "%s is not installed (container_runtime %s)" % (flavor, flavor)
    if not host.exists(path):
        return None, None, "%s has not generated %s yet (is %s running?)" % (flavor, path, flavor)
    return path, next((b for b in bundled if host.exists(b)), None), None


def _containerd_config(host, path, binary, info):
    """``(merged, problem)``: containerd's config with its imports, as containerd itself merges it
    where its binary is there, else merged here; ``info`` gets its source and whether it enables CDI."""
    files, datas, error = _containerd_files(host, path)
    info["cdi"] = _explicit_cdi(datas)
    info["source"] = " + ".join(files) if files else "%s (absent: containerd's defaults)" % path
    if binary is not None and files:
        return _containerd_dump(host, binary, path, info)
    if error:
        return None, error
    merged = {}
    for data in datas:
        merged = deep_merge(merged, data)
    return merged, None


def _containerd_dump(host, binary, path, info):
    """``(merged, problem)`` from ``containerd config dump``."""
    # What containerd itself makes of the config and its imports: the authority. (containerd
    # 1.x refuses a --config that does not exist; without a file it runs on its defaults,
    # which have no nvidia handler.)
    rc, out, err = host.run([binary, "--config", path, "config", "dump"])
    if rc != 0:
        detail = first_line(err) or first_line(out) or "exit %s" % rc
        return None, "containerd cannot load %s: %s" % (path, detail)
    try:
        merged = toml_subset.loads(out)
    except ValueError as exc:
        return None, "cannot read the output of containerd config dump: %s" % exc
    info["source"] = "%s --config %s config dump" % (binary, path)
    return merged, None


def _containerd_handler(host, merged, path, handler, info):
    """``(status, msg)`` of the handler in the merged config: the CRI plugin enabled, the handler
    there with a runtime_type, running nvidia-container-runtime; ``info`` gets the default runtime."""
    disabled = [p for p in (merged.get("disabled_plugins") or []) if p in CRI_PLUGINS]
    if disabled:
        return (
            FAILED,
            "containerd's CRI plugin is disabled (disabled_plugins = %s in %s): Kubernetes cannot use it"
            % (json.dumps(disabled), path),
        )
    plugin, cri = _cri_table(merged)
    runtimes = _dig(cri, "containerd", "runtimes") or {}
    info["default_runtime"] = _dig(cri, "containerd", "default_runtime_name")
    where = 'plugins."%s".containerd.runtimes.%s' % (plugin or CRI_PLUGINS[1], handler)
    if handler not in runtimes:
        return (
            FAILED,
            "containerd has no runtime handler %r (%s not in %s; handlers: %s)"
            % (handler, where, info["source"], ", ".join(sorted(runtimes)) or "none"),
        )
    entry = runtimes[handler] if isinstance(runtimes[handler], dict) else {}
    if not entry.get("runtime_type"):
        return FAILED, "%s has no runtime_type (containerd 2.3 refuses to start)" % where
    problem = _runtime_binary_problem(host, _dig(entry, "options", "BinaryName"), where + ".options.BinaryName")
    if problem:
        return FAILED, problem
    return OK, "containerd runtime handler %r runs %s (from %s)" % (handler, _dig(entry, "options", "BinaryName"), info["source"])


def check_docker(host, facts, handler):
    info = {"config": DOCKER_CONFIG, "source": DOCKER_CONFIG, "cdi": False, "default_runtime": None}
    if not (_dig(facts, "container", "docker", "installed") or host.which("dockerd")):
        return FAILED, "dockerd is not installed (container_runtime docker)", info
    path = DOCKER_CONFIG
    if not host.exists(path):
        return FAILED, "%s does not exist: Docker has no runtime %r" % (path, handler), info
    text, error = _read(host, path)
    if error:
        return FAILED, error, info
    try:
        data = json.loads(text or "{}")
    except ValueError as exc:
        return FAILED, "%s is not valid JSON (dockerd will not start): %s" % (path, exc), info
    if not isinstance(data, dict):
        return FAILED, "%s is not a JSON object" % path, info
    info["cdi"] = _dig(data, "features", "cdi") is True
    info["default_runtime"] = data.get("default-runtime")
    runtimes = data.get("runtimes") if isinstance(data.get("runtimes"), dict) else {}
    if handler not in runtimes:
        return FAILED, "Docker has no runtime %r in %s (runtimes: %s)" % (handler, path, ", ".join(sorted(runtimes)) or "none"), info
    problem = _runtime_binary_problem(host, _dig(runtimes, handler, "path"), "%s runtimes.%s.path" % (path, handler))
    if problem:
        return FAILED, problem, info
    return OK, "Docker runtime %r runs %s (%s)" % (handler, _dig(runtimes, handler, "path"), path), info


def check_crio(host, facts, handler):
    info = {"config": CRIO_CONFIG, "source": None, "cdi": False, "default_runtime": None}
    if not (_dig(facts, "container", "crio", "installed") or host.which("crio")):
        return FAILED, "crio is not installed (container_runtime crio)", info
    files = [CRIO_CONFIG] if host.exists(CRIO_CONFIG) else []
    if host.isdir(CRIO_DROPIN_DIR):
        try:
            names = host.listdir(CRIO_DROPIN_DIR)
        except OSError as exc:
            return FAILED, "%s: %s" % (CRIO_DROPIN_DIR, exc), info
        files += [posixpath.join(CRIO_DROPIN_DIR, n) for n in names if not n.startswith(".")]
    merged = {}
    for path in files:
        data, error = _read_toml_file(host, path)
        if error:
            return FAILED, error, info
        merged = deep_merge(merged, data)
    info["source"] = " + ".join(files) or "none"
    info["default_runtime"] = _dig(merged, "crio", "runtime", "default_runtime")
    runtimes = _dig(merged, "crio", "runtime", "runtimes") or {}
    if handler not in runtimes:
        return (
            FAILED,
            "CRI-O has no runtime %r ([crio.runtime.runtimes.%s] not in %s)" % (handler, handler, info["source"]),
            info,
        )
    problem = _runtime_binary_problem(
        host, _dig(runtimes, handler, "runtime_path"), "crio.runtime.runtimes.%s.runtime_path" % handler
    )
    if problem:
        return FAILED, problem, info
    return OK, "CRI-O runtime %r runs %s (%s)" % (handler, _dig(runtimes, handler, "runtime_path"), info["source"]), info


def check_runtime(checks, host, facts, runtime, handler):
    """The runtime check; returns what the CDI check needs to know of the runtime."""
    if runtime == "none":
        checks.add("runtime", SKIPPED, "runtime handler: not checked: no container runtime declared (container_runtime none)")
        return {"name": runtime, "handler": handler, "present": None, "cdi": False}
    if runtime == "docker":
        status, msg, info = check_docker(host, facts, handler)
    elif runtime == "crio":
        status, msg, info = check_crio(host, facts, handler)
    else:
        status, msg, info = check_containerd(host, facts, runtime, handler)
    checks.add("runtime", status, msg)
    info.update({"name": runtime, "handler": handler, "present": status == OK})
    return info


# --- CDI ----------------------------------------------------------------------------------------

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


def _toolkit_mode(host):
    data, error = _read_toml_file(host, TOOLKIT_CONFIG)
    if error or not data:
        return None
    return _dig(data, "nvidia-container-runtime", "mode")


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
    if _toolkit_mode(host) == "cdi":
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


# --- CUDA ---------------------------------------------------------------------------------------


def check_cuda(checks, host, enabled, nvcc_path, driver_ok, runner, tmp_root="/tmp"):
    """The CUDA check: the vector add built with the node's nvcc in a temporary folder (removed
    afterwards) and run on every GPU. Returns what the result says of it."""
    result = {"ran": False, "passed": None, "nvcc": None, "output": None}
    why_not = _cuda_not_run(enabled, driver_ok)
    if why_not:
        checks.add("cuda", SKIPPED, why_not)
        return result
    nvcc = _nvcc(host, nvcc_path)
    result["nvcc"] = nvcc
    if nvcc is None:
        checks.add(
            "cuda",
            SKIPPED,
            "CUDA vectorAdd on the host: not run: no nvcc on the node (install the CUDA toolkit to run it)",
        )
        return result
    local_tmp = host.local(tmp_root)
    if not os.path.isdir(local_tmp):
        checks.add("cuda", SKIPPED, "CUDA vectorAdd on the host: not run: the node has no %s" % tmp_root)
        return result
    work = tempfile.mkdtemp(prefix="gpufleet-vectoradd-", dir=local_tmp)
    try:
        status, msg = _run_vector_add(result, nvcc, work, posixpath.join(tmp_root, os.path.basename(work)), runner)
        checks.add("cuda", status, msg)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _cuda_not_run(enabled, driver_ok):
    """Why the CUDA test is not run at all, or None."""
    if not enabled:
        return "CUDA vectorAdd on the host: turned off (cuda_test false)"
    if driver_ok is False:
        return "CUDA vectorAdd on the host: not run: the driver does not answer"
    if driver_ok is None:
        return "CUDA vectorAdd on the host: not run: the driver is in the GPU Operator's container"
    return None


def _nvcc(host, nvcc_path):
    """The nvcc to build with: ``nvcc_path`` where it exists, else the node's (PATH, /usr/local/cuda/bin)."""
    if nvcc_path:
        return nvcc_path if host.exists(nvcc_path) else None
    return host.which("nvcc", extra_dirs=NVCC_DIRS)


def _run_vector_add(result, nvcc, work, host_work, runner):
    """``(status, msg)`` of building the vector add in ``work`` (``host_work`` on the node) and
    running it; ``result`` gets whether it ran, passed, and its output."""
    with open(os.path.join(work, "vectoradd.cu"), "w") as handle:
        handle.write(VECTOR_ADD_CU)
    source = posixpath.join(host_work, "vectoradd.cu")
    binary = posixpath.join(host_work, "vectoradd")
    rc, out, err = runner([nvcc, "-o", binary, source])
    if rc != 0:
        reason = "timed out" if rc == 124 else _tail(err or out, 300) or "exit %s" % rc
        return SKIPPED, "CUDA vectorAdd on the host: not run: %s could not build it: %s" % (nvcc, reason)
    rc, out, err = runner([binary])
    result["ran"] = True
    result["output"] = _tail(out + ("\n" + err if err else ""))
    result["passed"] = rc == 0 and PASSED in out
    if result["passed"]:
        return OK, "CUDA vectorAdd passed on the host (%s)" % (first_line(out) or "Test PASSED")
    return FAILED, "CUDA vectorAdd failed on the host: %s" % _vector_add_failure(rc, out, err)


def _vector_add_failure(rc, out, err):
    """Why the vector add failed: a timeout, or its exit status and last lines."""
    if rc == 124:
        return "did not finish in time"
    lines = [l for l in (out + "\n" + err).splitlines() if l.strip() and "Test FAILED" not in l]
    return "exit %s: %s" % (rc, "; ".join(lines[-3:]) or "no output")


# --- everything ---------------------------------------------------------------------------------


def check_params(params):
    """Raise GpuFleetError for arguments that cannot be right, before anything runs."""
    version = params.get("driver_version")
    if version:
        try:
            versions.parse_driver_version(version)
        except GpuFleetError as exc:
            raise GpuFleetError("driver_version: " + exc.msg, **exc.details)
    count = params.get("gpu_count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        raise GpuFleetError("gpu_count: %r is not a number of GPUs (expected 0 or more)" % (count,), value=count)
    for key, choices in (("container_runtime", RUNTIMES), ("driver_method", DRIVER_METHODS), ("cdi", CDI_MODES)):
        if params.get(key) not in choices:
            raise GpuFleetError(
                "%s: %r is not one of %s" % (key, params.get(key), ", ".join(choices)), value=params.get(key)
            )


# The options of gpufleet.nvidia.host_validate, also those of gpu_facts' ``validate`` (less
# what gpu_facts has of its own) and those its action plugin checks on the control host.
ARGUMENT_SPEC = dict(
    gpu_count=dict(type="int"),
    driver_version=dict(type="str", default=""),
    driver_method=dict(type="str", choices=list(DRIVER_METHODS), default="package"),
    toolkit_version=dict(type="str", default=""),
    container_runtime=dict(type="str", choices=list(RUNTIMES), default="containerd"),
    runtime_handler=dict(type="str", default="nvidia"),
    cdi=dict(type="str", choices=list(CDI_MODES), default="auto"),
    cdi_spec_dirs=dict(type="list", elements="path", default=list(CDI_DIRS)),
    cuda_test=dict(type="bool", default=True),
    nvml_reload_test=dict(type="bool", default=False),
    nvml_reload_test_image=dict(type="str", default=""),
    isolate_unprivileged=dict(type="bool"),
    prepared_without_gpu=dict(type="bool", default=False),
    nvcc_path=dict(type="path"),
    cuda_test_timeout=dict(type="int", default=180),
    command_timeout=dict(type="int", default=60),
    host_root=dict(type="path", default="/"),
    cluster_expect=dict(type="dict", default={}),
    reuse=dict(type="dict"),
)
# Every option's default, for callers of validate_host() that give only some (from the spec).
DEFAULTS = dict(
    (k, v.get("default")) for k, v in ARGUMENT_SPEC.items() if k not in ("cuda_test_timeout", "command_timeout", "host_root", "reuse")
)


# What gpu_facts takes under ``validate``: its own host_root and command_timeout serve both.
# isolate_unprivileged is not among them: discovery's validation takes the toolkit role's default
# rule, so host_validate reuses it where nothing else is declared and reads the node again where
# something is.
GPU_FACTS_SPEC = dict(
    (k, v) for k, v in ARGUMENT_SPEC.items()
    if k not in ("host_root", "command_timeout", "cluster_expect", "reuse", "isolate_unprivileged")
)
# The options that decide what a validation reads and concludes (cluster_expect is only echoed).
READ_KEYS = tuple(k for k in ARGUMENT_SPEC if k not in ("cluster_expect", "reuse"))


def read_params(params):
    """The options of ``params`` that a validation's outcome depends on, to compare two of them."""
    return dict((k, params.get(k)) for k in READ_KEYS)


def reusable(reuse, params):
    """``(validation, why_not)``: the validation of ``reuse`` when it answers ``params``.

    ``reuse`` is a result registered earlier in the run, of gpu_facts run with ``validate`` or of
    host_validate: ``validation`` and the ``validate_params`` it was made with. It answers
    ``params`` when those are the same; the caller vouches that nothing changed the node since.
    ``cluster_expect`` is only echoed, so this call's replaces the earlier one.
    """
    if not isinstance(reuse, dict) or not isinstance(reuse.get("validation"), dict):
        return None, "reuse holds no validation (expected a result of gpu_facts with validate, or of host_validate)"
    made_with = reuse.get("validate_params")
    if not isinstance(made_with, dict):
        return None, "reuse does not say what its validation was made with (validate_params)"
    wanted = read_params(params)
    differ = sorted(k for k in READ_KEYS if made_with.get(k) != wanted[k])
    if differ:
        return None, "the earlier validation was made with other %s" % ", ".join(differ)
    validation = dict(reuse["validation"])
    validation["cluster_expect"] = dict(params.get("cluster_expect") or {})
    return validation, None


def merged_params(params):
    """``params`` over :data:`DEFAULTS` (an unset option takes its default; ``gpu_count`` may be None)."""
    merged = dict(DEFAULTS)
    merged.update(dict((k, v) for k, v in (params or {}).items() if v is not None or k == "gpu_count"))
    return merged


def runtime_summary(runtime):
    """What the result says of the runtime check."""
    return {
        "name": runtime["name"],
        "handler": runtime["handler"],
        "present": runtime["present"],
        "source": runtime.get("source"),
        "default_runtime": runtime.get("default_runtime"),
    }


def validate_host(host, params=None, facts=None, cuda_runner=None):
    """Validate the node ``host``; returns ``(validation, facts)``."""
    p = merged_params(params)
    check_params(p)
    if facts is None:
        facts = gpu_facts.gather_facts(host)
    checks = Checks()
    result = _unchecked_result(p, facts)
    found = check_gpus(checks, facts, p["gpu_count"])
    if not found and not p["gpu_count"] and p["prepared_without_gpu"]:
        _check_prepared_node(checks, result, host, facts, p)
    elif not found and not p["gpu_count"]:
        checks.add("gpus", SKIPPED, NO_GPU_MESSAGE)
    else:
        _check_gpu_node(checks, result, host, facts, p, cuda_runner or host.run)
    _conclude(result, checks)
    return result, facts


def _unchecked_result(p, facts):
    """The validation before any check: what is declared, and what the facts say of the driver and toolkit."""
    smi = _dig(facts, "driver", "nvidia_smi") or {}
    return {
        "schema": SCHEMA,
        "status": SKIPPED,
        "summary": "",
        "gpu_count": facts.get("gpu_count") or 0,
        "declared": {
            "driver_version": p["driver_version"] or None,
            "driver_method": p["driver_method"],
            "toolkit_version": p["toolkit_version"] or None,
            "container_runtime": p["container_runtime"],
            "runtime_handler": p["runtime_handler"],
            "gpu_count": p["gpu_count"],
            "isolate_unprivileged": day2_checks.declared_isolation(p["isolate_unprivileged"], p["container_runtime"])[0],
        },
        "driver": {
            "loaded": _dig(facts, "driver", "version"),
            "installed": found_of(facts)["version"],
            "nvidia_smi": smi.get("driver_version"),
            "cuda": smi.get("cuda_version"),
        },
        "toolkit": {"installed": _dig(facts, "container", "toolkit", "version")},
        "runtime": {"name": p["container_runtime"], "handler": p["runtime_handler"], "present": None},
        "cdi": {"enabled": None, "why": [], "specs": []},
        "cuda": {"ran": False, "passed": None, "nvcc": None, "output": None},
        "checks": [],
        "failed": [],
        "drifted": [],
        "not_checked": [],
        "cluster_expect": dict(p["cluster_expect"] or {}),
    }


def _check_prepared_node(checks, result, host, facts, p):
    """A node without GPU that the host layers prepared: what is installed and configured."""
    checks.add("gpus", SKIPPED, PREPARED_NO_GPU_MESSAGE)
    check_prepared_driver(checks, facts, p["driver_version"], p["driver_method"])
    check_toolkit_version(checks, facts, p["toolkit_version"])
    runtime = check_runtime(checks, host, facts, p["container_runtime"], p["runtime_handler"])
    result["runtime"] = runtime_summary(runtime)
    day2_checks.check_prepared_day2(checks, host, facts, p)


def _check_gpu_node(checks, result, host, facts, p, cuda_runner):
    """A node with GPUs (or declared to have some): every check."""
    driver_ok = check_driver(checks, facts, p["driver_method"])
    check_driver_version(checks, facts, p["driver_version"], p["driver_method"])
    check_toolkit_version(checks, facts, p["toolkit_version"])
    runtime = check_runtime(checks, host, facts, p["container_runtime"], p["runtime_handler"])
    result["runtime"] = runtime_summary(runtime)
    result["cdi"] = check_cdi(checks, host, facts, p["cdi"], p["cdi_spec_dirs"], runtime)
    result["cuda"] = check_cuda(checks, host, p["cuda_test"], p["nvcc_path"], driver_ok, cuda_runner)
    day2_checks.check_day2(checks, host, facts, p)


def _conclude(result, checks):
    """The checks into the result: each check, the node's status, the messages by status, the summary."""
    result["checks"] = checks.items
    result["status"] = checks.status()
    result["failed"] = checks.messages(FAILED)
    result["drifted"] = checks.messages(DRIFT)
    result["not_checked"] = checks.messages(SKIPPED)
    result["summary"] = summary_line(result)


def check_options(params):
    """Raise GpuFleetError for validation options that cannot be right, before anything is read."""
    check_params(merged_params(params))
    timeout = params.get("cuda_test_timeout")
    if timeout is not None and timeout < 1:
        raise GpuFleetError(
            "cuda_test_timeout: %s is not a number of seconds (expected 1 or more)" % timeout,
            cuda_test_timeout=timeout,
        )


def reused_result(validation, params):
    """The result of host_validate when it takes ``validation`` (from :func:`reusable`) as its own."""
    return dict(
        changed=False,
        validation=validation,
        validate_params=read_params(params),
        reused=True,
        ansible_facts={"gpufleet_nvidia_validation": validation},
    )


def validate_node(host, params, option_prefix=""):
    """Validate the node ``host`` (``Host.for_module``) with the module options ``params``: ``(validation, facts)``.

    A bad option fails before anything is read, named with ``option_prefix`` (gpu_facts passes
    ``validate.``, the name of the option that holds them).
    """
    try:
        check_options(params)
    except GpuFleetError as exc:
        raise GpuFleetError(option_prefix + exc.msg, **exc.details)
    timeout = params.get("cuda_test_timeout") or ARGUMENT_SPEC["cuda_test_timeout"]["default"]
    return validate_host(host, params, cuda_runner=common_host.subprocess_runner(host.root, timeout))


def summary_line(result):
    if result["status"] == SKIPPED:
        return (result["not_checked"] or [NO_GPU_MESSAGE])[0]
    counts = dict((s, 0) for s in (OK, DRIFT, FAILED, SKIPPED))
    for check in result["checks"]:
        counts[check["status"]] += 1
    text = "%s: %d ok, %d drifted, %d failed, %d not checked" % (
        result["status"],
        counts[OK],
        counts[DRIFT],
        counts[FAILED],
        counts[SKIPPED],
    )
    first = (result["failed"] or result["drifted"] or [None])[0]
    return text + (" - " + first if first else "")
