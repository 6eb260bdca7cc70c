"""Tests of module_utils/cdi.py: the CDI spec built from a replay of the H200 test host.

The H200 host is rebuilt under ``tmp_path`` from ``tests/unit/fixtures/cdi/h200/tree.txt`` (empty
files, the host's symlinks, device nodes as plain files) with an ``/etc/ld.so.cache`` written
from the host's ``ldconfig -p``; the spec built from it is compared with the one nvidia-ctk 1.20
wrote on that host (``nvidia-ctk-cdi.yaml``). ``tests/unit/fixtures/cdi/README.md`` says where each
fixture line comes from and lists the differences from nvidia-ctk; the tests below check that
they are the only ones.
"""

from __future__ import annotations

import copy
import importlib.util
import io
import json
import os
import shutil
import signal
import struct
import subprocess

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import cdi
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "cdi")
H200 = os.path.join(FIXTURES, "h200")
VERSION = "580.159.04"
KERNEL = "6.18.44-fc-v657-gpu"
UUID = "GPU-d35d5d0d-d305-4f92-c0d5-c310f071b577"
# The golden spec was taken on an earlier instance of the same machine type; its GPU had this UUID.
GOLDEN_UUID = "GPU-5865af09-6dee-d4a4-5fb2-a29f36b8411a"
LIBDIR = "/usr/local/nvidia/lib64"


# --------------------------------------------------------------------------------------------
# Helpers: rebuild the host, write an ld.so.cache, build tiny ELF files
# --------------------------------------------------------------------------------------------


def parse_ldconfig_p(text):
    """``ldconfig -p`` lines as ``[(name, path, flags)]`` (flags as glibc stores them)."""
    entries = []
    for line in text.splitlines():
        if "=>" not in line:
            continue
        left, path = line.strip().split(" => ")
        name, _sep, kind = left.partition(" (")
        flags = 0x0303 if "x86-64" in kind else 0x0003
        entries.append((name.strip(), path.strip(), flags))
    return entries


def write_ldcache(path, entries, old_format_first=False, old_only=False):
    """Write ``entries`` ``[(name, path, flags)]`` in glibc's binary ld.so.cache layout."""
    if old_only:
        strings = bytearray()
        rows = b""
        for name, target, flags in entries:
            key = len(strings)
            strings += name.encode() + b"\0"
            value = len(strings)
            strings += target.encode() + b"\0"
            rows += struct.pack("<iII", flags, key, value)
        data = b"ld.so-1.7.0\0" + struct.pack("<I", len(entries)) + rows + bytes(strings)
        with open(path, "wb") as handle:
            handle.write(data)
        return
    header_size, row_size = 48, 24
    base = header_size + row_size * len(entries)
    strings = bytearray()
    offsets = {}

    def offset(text):
        if text not in offsets:
            offsets[text] = base + len(strings)
            strings.extend(text.encode() + b"\0")
        return offsets[text]

    rows = b"".join(struct.pack("<iIIIQ", flags, offset(n), offset(p), 0, 0) for n, p, flags in entries)
    new = struct.pack("<20sIIB3xI12x", b"glibc-ld.so.cache1.1", len(entries), len(strings), 2, 0) + rows + bytes(strings)
    prefix = b""
    if old_format_first:
        # An old-format table with no entries, padded to 8 bytes, then the new one.
        prefix = b"ld.so-1.7.0\0" + struct.pack("<I", 0)
        prefix += b"\0" * ((-len(prefix)) % 8)
    with open(path, "wb") as handle:
        handle.write(prefix + new)


def materialize(root, fixture=H200, ldcache=True):
    """Build the listing of ``fixture/tree.txt`` under ``root``."""
    with open(os.path.join(fixture, "tree.txt"), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    for line in lines:
        if not line or line.startswith("#"):
            continue
        kind, path, rest = (line.split(" ", 2) + [""])[:3]
        dest = root + path
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if kind == "d":
            os.makedirs(dest, exist_ok=True)
        elif kind == "l":
            os.symlink(rest, dest)
        elif kind in ("f", "x", "c"):
            open(dest, "w").close()
            if kind == "x":
                os.chmod(dest, 0o755)
        elif kind == "t":
            with open(dest, "w", encoding="utf-8") as out:
                out.write(rest + "\n")
        elif kind == "@":
            shutil.copyfile(os.path.join(fixture, rest), dest)
        else:
            raise AssertionError("unknown line in tree.txt: %r" % line)
    if ldcache:
        with open(os.path.join(fixture, "ldconfig-p.txt"), encoding="utf-8") as handle:
            entries = parse_ldconfig_p(handle.read())
        os.makedirs(root + "/etc", exist_ok=True)
        write_ldcache(root + "/etc/ld.so.cache", entries)
    return root


def make_host(root, **kwargs):
    """A Host reading everything under ``root``; plain files count as device nodes."""
    kwargs.setdefault("driver_root", root)
    kwargs.setdefault("dev_root", root)
    kwargs.setdefault("system_root", root)
    kwargs.setdefault("is_device_node", os.path.isfile)
    kwargs.setdefault("kernel_release", KERNEL)
    return cdi.driver_host(**kwargs)


@pytest.fixture
def h200(tmp_path):
    return materialize(str(tmp_path / "host"))


def golden():
    with open(os.path.join(H200, "nvidia-ctk-cdi.yaml"), encoding="utf-8") as handle:
        spec = yaml.safe_load(handle.read().replace(GOLDEN_UUID, UUID))
    return spec


def load_compare_script():
    path = os.path.join(FIXTURES, "compare_with_nvidia_ctk.py")
    spec = importlib.util.spec_from_file_location("compare_with_nvidia_ctk", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def unroot(spec, root):
    """The spec with ``root`` taken off every host path, as if it had been built on the host."""
    text = json.dumps(spec).replace(json.dumps(root)[1:-1], "")
    spec = json.loads(text)
    for edits in [spec["containerEdits"]] + [d["containerEdits"] for d in spec["devices"]]:
        for node in edits.get("deviceNodes", []):
            if node.get("hostPath") == node["path"]:
                del node["hostPath"]
    return spec


def make_elf(soname, klass=2, little=True):
    """A minimal ELF shared object with one PT_LOAD, one PT_DYNAMIC and (maybe) a DT_SONAME."""
    end = "<" if little else ">"
    vaddr = 0x400000
    strtab = b"\0" + (soname.encode() + b"\0" if soname else b"")
    if klass == 2:
        ehsize, phentsize, dynsize = 64, 56, 16
    else:
        ehsize, phentsize, dynsize = 52, 32, 8
    phoff = ehsize
    dyn_off = phoff + 2 * phentsize
    dyn_entries = [(5, 0)] + ([(14, 1)] if soname else []) + [(0, 0)]
    str_off = dyn_off + dynsize * len(dyn_entries)
    total = str_off + len(strtab)
    dyn_entries[0] = (5, vaddr + str_off)
    ident = b"\x7fELF" + bytes([klass, 1 if little else 2, 1, 0]) + b"\0" * 8
    if klass == 2:
        header = ident + struct.pack(end + "HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, 0, 0, ehsize, phentsize, 2, 0, 0, 0)
        phdrs = struct.pack(end + "IIQQQQQQ", 1, 5, 0, vaddr, vaddr, total, total, 0x1000)
        phdrs += struct.pack(end + "IIQQQQQQ", 2, 6, dyn_off, vaddr + dyn_off, vaddr + dyn_off, dynsize * len(dyn_entries), dynsize * len(dyn_entries), 8)
        dyn = b"".join(struct.pack(end + "qQ", t, v) for t, v in dyn_entries)
    else:
        header = ident + struct.pack(end + "HHIIIIIHHHHHH", 3, 3, 1, 0, phoff, 0, 0, ehsize, phentsize, 2, 0, 0, 0)
        phdrs = struct.pack(end + "IIIIIIII", 1, 0, vaddr, vaddr, total, total, 5, 0x1000)
        phdrs += struct.pack(end + "IIIIIIII", 2, dyn_off, vaddr + dyn_off, vaddr + dyn_off, dynsize * len(dyn_entries), dynsize * len(dyn_entries), 6, 4)
        dyn = b"".join(struct.pack(end + "iI", t, v) for t, v in dyn_entries)
    data = header + phdrs + dyn + strtab
    assert len(data) == total
    return data


# --------------------------------------------------------------------------------------------
# The H200 host against nvidia-ctk's spec
# --------------------------------------------------------------------------------------------


def test_h200_counts_match_what_nvidia_ctk_found(h200):
    result = cdi.generate(make_host(h200))
    assert result["driver_version"] == VERSION
    assert result["devices"] == ["0", UUID, "all"]
    # golden README: 26 driver libraries, 5 binaries, 2 vendor JSON, 2 GSP firmware, 6 hooks,
    # 4 device nodes, 35 mounts.
    assert result["counts"] == {
        "device_nodes": 4,
        "libraries": 26,
        "binaries": 5,
        "firmware": 2,
        "configs": 2,
        "ipc": 0,
        "hooks": 6,
        "mounts": 35,
    }
    assert result["warnings"] == []


def test_h200_compare_script_finds_only_the_intended_differences(h200):
    """The comparison the lead runs on the real H200, on the replayed host.

    Intended differences (also in fixtures/cdi/README.md):
    * nvidia-ctk writes major, minor and fileMode on every device node; the module leaves them
      out so the runtime reads them from the host node when a container starts (nvidia-uvm's
      major is allocated at module load and may differ after a reboot);
    * the golden spec's GPU UUID is that of an earlier instance of the machine: it is replaced by
      today's before comparing (golden()).
    """
    compare = load_compare_script()
    spec = cdi.generate(make_host(h200))["spec"]
    result = compare.compare(spec, golden(), strip_root=h200)
    assert result["differences"] == []
    assert result["counts"]["libraries"] == (26, 26)
    assert result["counts"]["mounts"] == (35, 35)
    assert result["counts"]["hooks"] == (6, 6)
    assert sorted(line.split(":")[0] for line in result["expected"]) == [
        "device node /dev/nvidia-uvm",
        "device node /dev/nvidia-uvm-tools",
        "device node /dev/nvidia0",
        "device node /dev/nvidiactl",
    ]


def test_h200_compare_script_exit_status(h200, tmp_path, capsys):
    compare = load_compare_script()
    result = cdi.generate(make_host(h200))
    spec_file = tmp_path / "nvidia.yaml"
    spec_file.write_text(cdi.render(result["spec"], str(spec_file), VERSION))
    golden_file = tmp_path / "golden.yaml"
    golden_file.write_text(yaml.safe_dump(golden()))
    assert compare.main([str(spec_file), str(golden_file), "--strip-root", h200]) == 0
    out = capsys.readouterr().out
    assert "0 difference(s)" in out and "expected: device node /dev/nvidiactl" in out
    # One library less is a difference and fails.
    broken = copy.deepcopy(result["spec"])
    broken["containerEdits"]["mounts"] = [m for m in broken["containerEdits"]["mounts"] if "libcuda.so" not in m["containerPath"]]
    spec_file.write_text(json.dumps(broken))
    assert compare.main([str(spec_file), str(golden_file), "--strip-root", h200]) == 1
    assert "libraries: only in nvidia-ctk: %s/libcuda.so.%s" % (LIBDIR, VERSION) in capsys.readouterr().out


def test_h200_mounts_hooks_and_env_equal_nvidia_ctk(h200):
    """Everything but the device nodes is the same as nvidia-ctk's, in the same order."""
    spec = unroot(cdi.generate(make_host(h200))["spec"], h200)
    expected = golden()
    assert spec["cdiVersion"] == expected["cdiVersion"] == "0.5.0"
    assert spec["kind"] == expected["kind"]
    assert spec["containerEdits"]["mounts"] == expected["containerEdits"]["mounts"]
    assert spec["containerEdits"]["hooks"] == expected["containerEdits"]["hooks"]
    assert spec["containerEdits"]["env"] == expected["containerEdits"]["env"]
    assert [d["name"] for d in spec["devices"]] == [d["name"] for d in expected["devices"]]


def test_h200_device_nodes_are_nvidia_ctks_without_numbers(h200):
    spec = unroot(cdi.generate(make_host(h200))["spec"], h200)
    expected = golden()

    def strip(nodes):
        return [{k: v for k, v in n.items() if k not in ("major", "minor", "fileMode")} for n in nodes]

    assert spec["containerEdits"]["deviceNodes"] == strip(expected["containerEdits"]["deviceNodes"])
    for mine, theirs in zip(spec["devices"], expected["devices"]):
        assert mine["containerEdits"] == {"deviceNodes": strip(theirs["containerEdits"]["deviceNodes"])}


def test_h200_host_and_container_paths(h200):
    """Host paths keep the driver root, container paths drop it; device nodes get a hostPath."""
    spec = cdi.generate(make_host(h200))["spec"]
    mount = [m for m in spec["containerEdits"]["mounts"] if m["containerPath"].endswith("libcuda.so." + VERSION)][0]
    assert mount == {
        "hostPath": h200 + LIBDIR + "/libcuda.so." + VERSION,
        "containerPath": LIBDIR + "/libcuda.so." + VERSION,
        "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"],
    }
    assert spec["containerEdits"]["deviceNodes"][-1] == {
        "path": "/dev/nvidiactl",
        "hostPath": h200 + "/dev/nvidiactl",
        "permissions": "rwm",
    }


def test_h200_yaml_reads_back_and_is_stable(h200):
    host = make_host(h200)
    first = cdi.generate(host)
    text = cdi.render(first["spec"], "/etc/cdi/nvidia.yaml", first["driver_version"])
    assert text.startswith("---\n# Managed by gpufleet.nvidia.cdi_spec (driver 580.159.04)")
    assert yaml.safe_load(text) == first["spec"]
    assert '  - name: "0"\n' in text  # a digit-only name is quoted
    assert "        - --link\n" in text  # plain where YAML reads it back as the same string
    again = cdi.generate(host)
    assert cdi.render(again["spec"], "/etc/cdi/nvidia.yaml", VERSION) == text
    as_json = cdi.render(first["spec"], "/etc/cdi/nvidia.json")
    assert json.loads(as_json) == first["spec"]


def test_h200_without_ld_so_cache_scans_the_library_folders(tmp_path):
    """No /etc/ld.so.cache: libcuda is found by scanning LIBRARY_DIRS; same spec."""
    with_cache = materialize(str(tmp_path / "a"))
    without = materialize(str(tmp_path / "b"), ldcache=False)
    spec_a = unroot(cdi.generate(make_host(with_cache))["spec"], with_cache)
    spec_b = unroot(cdi.generate(make_host(without))["spec"], without)
    assert spec_a == spec_b


def test_separate_dev_root(h200, tmp_path):
    """Driver files and device nodes from different roots."""
    dev_root = str(tmp_path / "devroot")
    shutil.copytree(h200 + "/dev", dev_root + "/dev")
    shutil.rmtree(h200 + "/dev")
    spec = cdi.generate(make_host(h200, dev_root=dev_root))["spec"]
    node = spec["devices"][0]["containerEdits"]["deviceNodes"][0]
    assert node == {"path": "/dev/nvidia0", "hostPath": dev_root + "/dev/nvidia0", "permissions": "rwm"}


def test_root_slash_writes_no_host_path_for_nodes(h200, monkeypatch):
    """With dev_root / a device node is only its path, as in nvidia-ctk's spec."""
    host = make_host(h200, dev_root="/", is_device_node=lambda p: os.path.isfile(h200 + p))
    spec = cdi.generate(host)["spec"]
    assert spec["containerEdits"]["deviceNodes"][0] == {"path": "/dev/nvidia-uvm", "permissions": "rwm"}


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "strategy, names",
    [("index", ["0", "all"]), ("uuid", [UUID, "all"]), ("both", ["0", UUID, "all"])],
)
def test_device_name_strategy(h200, strategy, names):
    assert cdi.generate(make_host(h200), device_name_strategy=strategy)["devices"] == names


@pytest.mark.parametrize(
    "disabled, left",
    [
        ([], ["create-symlinks", "create-symlinks", "enable-cuda-compat", "update-ldcache",
              "disable-device-node-modification", "update-application-profile"]),
        (["enable-cuda-compat", "disable-device-node-modification", "update-application-profile"],
         ["create-symlinks", "create-symlinks", "update-ldcache"]),
        (["create-symlinks"], ["enable-cuda-compat", "update-ldcache", "disable-device-node-modification",
                               "update-application-profile"]),
        (["all"], []),
    ],
)
def test_disabled_hooks(h200, disabled, left):
    result = cdi.generate(make_host(h200), disabled_hooks=disabled)
    hooks = result["spec"]["containerEdits"].get("hooks", [])
    assert [h["args"][1] for h in hooks] == left
    assert result["counts"]["hooks"] == len(left)


def test_nvidia_ctk_as_hook_program(h200):
    """A hook path named nvidia-ctk runs hooks as `nvidia-ctk hook NAME`, as nvidia-ctk does."""
    spec = cdi.generate(make_host(h200), hook_path="/usr/local/bin/nvidia-ctk")["spec"]
    ldcache = spec["containerEdits"]["hooks"][3]
    assert ldcache == {
        "hookName": "createContainer",
        "path": "/usr/local/bin/nvidia-ctk",
        "args": ["nvidia-ctk", "hook", "update-ldcache", "--folder", LIBDIR],
        "env": ["NVIDIA_CTK_DEBUG=false"],
    }


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"device_name_strategy": "serial"}, "device_name_strategy 'serial' is not one of index, uuid, both"),
        ({"disabled_hooks": ["chmod"]}, "disabled_hooks has unknown hook(s) chmod"),
    ],
)
def test_bad_arguments(h200, kwargs, message):
    with pytest.raises(GpuFleetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cdi.generate(make_host(h200), **kwargs)


# --------------------------------------------------------------------------------------------
# Other hosts: made by editing the H200 tree
# --------------------------------------------------------------------------------------------


def write(path, text=""):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def gpu_information(uuid, bus, minor, excluded="No"):
    return (
        "Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t %s\nBus Location: \t %s\nDevice Minor: \t %s\n"
        "GPU Excluded:\t %s\n" % (uuid, bus, minor, excluded)
    )


def test_several_gpus_are_indexed_in_bus_order(h200):
    """NVML numbers GPUs by PCI bus id, not by device minor."""
    shutil.rmtree(h200 + "/proc/driver/nvidia/gpus")
    gpus = h200 + "/proc/driver/nvidia/gpus/"
    write(gpus + "0000:41:00.0/information", gpu_information("GPU-aaaa", "0000:41:00.0", 0))
    write(gpus + "0000:01:00.0/information", gpu_information("GPU-bbbb", "0000:01:00.0", 1))
    write(gpus + "0000:81:00.0/information", gpu_information("GPU-cccc", "0000:81:00.0", 2, excluded="Yes"))
    write(h200 + "/dev/nvidia1")
    result = cdi.generate(make_host(h200))
    devices = {d["name"]: [n["path"] for n in d["containerEdits"]["deviceNodes"]] for d in result["spec"]["devices"]}
    assert devices == {
        "0": ["/dev/nvidia1"],
        "1": ["/dev/nvidia0"],
        "GPU-aaaa": ["/dev/nvidia0"],
        "GPU-bbbb": ["/dev/nvidia1"],
        "all": ["/dev/nvidia0", "/dev/nvidia1"],
    }
    assert result["devices"] == ["0", "1", "GPU-aaaa", "GPU-bbbb", "all"]
    assert result["counts"]["device_nodes"] == 5


def test_drm_nodes_and_by_path_links(h200):
    bus = "0000:00:06.0"
    for name in ("card1", "renderD128"):
        os.makedirs(h200 + "/sys/bus/pci/devices/%s/drm/%s" % (bus, name))
        write(h200 + "/dev/dri/" + name)
    os.makedirs(h200 + "/dev/dri/by-path")
    os.symlink("../card1", h200 + "/dev/dri/by-path/pci-%s-card" % bus)
    os.symlink("../renderD128", h200 + "/dev/dri/by-path/pci-%s-render" % bus)
    os.symlink("../card0", h200 + "/dev/dri/by-path/pci-0000:00:02.0-card")  # another GPU's
    result = cdi.generate(make_host(h200))
    device = result["spec"]["devices"][0]["containerEdits"]
    assert [n["path"] for n in device["deviceNodes"]] == ["/dev/nvidia0", "/dev/dri/card1", "/dev/dri/renderD128"]
    assert device["hooks"][0]["args"] == [
        "nvidia-cdi-hook", "create-symlinks",
        "--link", "../card1::/dev/dri/by-path/pci-%s-card" % bus,
        "--link", "../renderD128::/dev/dri/by-path/pci-%s-render" % bus,
    ]
    assert result["spec"]["devices"][-1]["containerEdits"]["hooks"] == device["hooks"]
    assert result["counts"]["hooks"] == 7
    assert result["counts"]["device_nodes"] == 6


def test_ipc_sockets_are_mounted_noexec(h200):
    write(h200 + "/run/nvidia-persistenced/socket")
    os.makedirs(h200 + "/tmp/nvidia-mps")
    result = cdi.generate(make_host(h200))
    ipc = [m for m in result["spec"]["containerEdits"]["mounts"] if m["options"][0] != "ro"]
    assert [(m["containerPath"], m["options"]) for m in ipc] == [
        ("/tmp/nvidia-mps", ["nosuid", "nodev", "rbind", "rprivate", "noexec"]),
        ("/run/nvidia-persistenced/socket", ["nosuid", "nodev", "rbind", "rprivate", "noexec"]),
    ]
    assert result["counts"]["ipc"] == 2 and result["counts"]["mounts"] == 37


def test_graphics_extras(h200):
    """EGL GBM/Wayland libraries and Xorg modules are mounted; glxserver gets its .so link."""
    write(h200 + LIBDIR + "/libnvidia-egl-gbm.so.1.1.2")
    os.symlink("libnvidia-egl-gbm.so.1.1.2", h200 + LIBDIR + "/libnvidia-egl-gbm.so.1")
    write(h200 + "/usr/lib/xorg/modules/drivers/nvidia_drv.so")
    write(h200 + "/usr/lib/xorg/modules/extensions/libglxserver_nvidia.so." + VERSION)
    result = cdi.generate(make_host(h200))
    paths = [m["containerPath"] for m in result["spec"]["containerEdits"]["mounts"]]
    assert LIBDIR + "/libnvidia-egl-gbm.so.1.1.2" in paths
    assert "/usr/lib/xorg/modules/drivers/nvidia_drv.so" in paths
    assert "/usr/lib/xorg/modules/extensions/libglxserver_nvidia.so." + VERSION in paths
    assert result["counts"]["libraries"] == 29
    graphics_hook = result["spec"]["containerEdits"]["hooks"][0]["args"]
    assert graphics_hook[2:] == [
        "--link", "../libnvidia-allocator.so.1::%s/gbm/nvidia-drm_gbm.so" % LIBDIR,
        "--link", "libglxserver_nvidia.so.%s::/usr/lib/xorg/modules/extensions/libglxserver_nvidia.so" % VERSION,
    ]


def test_vulkan_icd_in_the_driver_root_itself(h200):
    """GKE keeps the ICD at <driver root>/vulkan; the container still sees it under /etc."""
    os.remove(h200 + "/usr/share/vulkan/icd.d/nvidia_icd.json")
    write(h200 + "/vulkan/icd.d/nvidia_icd.json")
    mounts = cdi.generate(make_host(h200))["spec"]["containerEdits"]["mounts"]
    vulkan = [m for m in mounts if "vulkan" in m["containerPath"]]
    assert vulkan == [{
        "hostPath": h200 + "/vulkan/icd.d/nvidia_icd.json",
        "containerPath": "/etc/vulkan/icd.d/nvidia_icd.json",
        "options": list(cdi.MOUNT_OPTIONS),
    }]


def test_firmware_in_lib_firmware_without_a_custom_path(h200):
    os.remove(h200 + "/sys/module/firmware_class/parameters/path")
    for name in ("gsp_ga10x.bin", "gsp_tu10x.bin"):
        write(h200 + "/usr/lib/firmware/nvidia/%s/%s" % (VERSION, name))
    result = cdi.generate(make_host(h200))
    firmware = [m["containerPath"] for m in result["spec"]["containerEdits"]["mounts"] if "firmware" in m["containerPath"]]
    assert firmware == ["/lib/firmware/nvidia/%s/gsp_ga10x.bin" % VERSION, "/lib/firmware/nvidia/%s/gsp_tu10x.bin" % VERSION]


def test_mig_instances_give_a_warning(h200):
    os.makedirs(h200 + "/proc/driver/nvidia/capabilities/gpu0/mig/gi1")
    assert "MIG is enabled" in cdi.generate(make_host(h200))["warnings"][0]


def test_nvidia_smi_fallback(h200):
    """Without /proc/driver/nvidia/gpus the GPUs come from nvidia-smi -q -x (run in the driver root)."""
    shutil.rmtree(h200 + "/proc/driver/nvidia/gpus")
    with open(os.path.join(H200, "nvidia-smi-q-x.xml"), encoding="utf-8") as handle:
        xml = handle.read()
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, xml, ""

    result = cdi.generate(make_host(h200, run_command=run))
    assert calls == [["chroot", h200, "/usr/local/nvidia/bin/nvidia-smi", "-q", "-x"]]
    assert result["devices"] == ["0", UUID, "all"]


def test_nvidia_smi_fallback_failing(h200):
    shutil.rmtree(h200 + "/proc/driver/nvidia/gpus")
    host = make_host(h200, run_command=lambda argv: (9, "", "NVIDIA-SMI has failed because it couldn't communicate"))
    with pytest.raises(GpuFleetError, match=r"no GPU under .* and `chroot .* -q -x` failed \(rc 9\): NVIDIA-SMI has failed"):
        cdi.generate(host)


def test_no_gpu(h200):
    shutil.rmtree(h200 + "/proc/driver/nvidia/gpus")
    with pytest.raises(GpuFleetError) as err:
        cdi.generate(make_host(h200))
    assert err.value.msg == (
        "cdi_spec: no NVIDIA GPU found: %s/proc/driver/nvidia/gpus lists none (is the nvidia kernel "
        "module loaded?)" % h200
    )


def test_no_driver_libraries(h200):
    os.remove(h200 + LIBDIR + "/libcuda.so." + VERSION)
    with pytest.raises(GpuFleetError) as err:
        cdi.generate(make_host(h200))
    assert err.value.msg == (
        "cdi_spec: no NVIDIA driver library found under driver_root %s: looked for libcuda.so.%s in "
        "%s/etc/ld.so.cache; install the driver's user-space libraries or point driver_root at them"
        % (h200, VERSION, h200)
    )


def test_no_driver_libraries_nor_cache(h200):
    os.remove(h200 + "/etc/ld.so.cache")
    os.remove(h200 + LIBDIR + "/libcuda.so." + VERSION)
    os.remove(h200 + "/proc/driver/nvidia/version")
    with pytest.raises(GpuFleetError) as err:
        cdi.generate(make_host(h200))
    assert err.value.msg.startswith(
        "cdi_spec: %s/proc/driver/nvidia/version names no driver (is the nvidia kernel module loaded?) and no "
        "NVIDIA driver library found under driver_root %s: looked for libcuda.so.*.* in /lib64, /usr/lib64, " % (h200, h200)
    )
    assert "(no ld.so.cache at %s/etc/ld.so.cache)" % h200 in err.value.msg


def test_kernel_module_and_libraries_of_different_versions(h200):
    write(h200 + "/proc/driver/nvidia/version",
          "NVRM version: NVIDIA UNIX x86_64 Kernel Module  590.44.01  Tue Nov 18 2025\n")
    with pytest.raises(GpuFleetError, match=r"kernel module is driver 590.44.01 but the user-space library .* "
                                            r"is /usr/local/nvidia/lib64/libcuda.so.580.159.04 \(driver/library version mismatch\)"):
        cdi.generate(make_host(h200))


def test_version_from_libcuda_when_proc_has_none(h200):
    os.remove(h200 + "/proc/driver/nvidia/version")
    assert cdi.generate(make_host(h200))["driver_version"] == VERSION


@pytest.mark.parametrize("node", ["/dev/nvidia0", "/dev/nvidiactl"])
def test_missing_device_node(h200, node):
    os.remove(h200 + node)
    with pytest.raises(GpuFleetError, match="%s%s" % (h200, node)):
        cdi.generate(make_host(h200))


def test_missing_uvm_node_gives_a_warning(h200):
    os.remove(h200 + "/dev/nvidia-uvm")
    result = cdi.generate(make_host(h200))
    assert result["warnings"] == [
        "%s/dev/nvidia-uvm does not exist, so the spec does not give it to containers and CUDA will "
        "fail in them: create it (nvidia-modprobe -u -c=0) and run this again" % h200
    ]


def test_optional_control_nodes(h200):
    os.remove(h200 + "/dev/nvidia-uvm-tools")
    write(h200 + "/dev/nvidia-modeset")
    nodes = cdi.generate(make_host(h200))["spec"]["containerEdits"]["deviceNodes"]
    assert [n["path"] for n in nodes] == ["/dev/nvidia-modeset", "/dev/nvidia-uvm", "/dev/nvidiactl"]


# --------------------------------------------------------------------------------------------
# Parsers and small helpers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, version",
    [
        ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)\n", "580.159.04"),
        ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 03:22:07 UTC 2024\n", "550.127.05"),
        ("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.86.15  Release Build\n", "570.86.15"),
        ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  525.60  Fri\n", "525.60"),
        ("garbage", None),
        (None, None),
    ],
)
def test_parse_nvrm_version(text, version):
    assert cdi.parse_nvrm_version(text) == version


@pytest.mark.parametrize(
    "bus, expected",
    [("00000000:00:06.0", "0000:00:06.0"), ("0000:41:00.0", "0000:41:00.0"), ("0001:1A:00.0", "0001:1a:00.0"), ("41:00.0", "0000:41:00.0")],
)
def test_normalise_bus_id(bus, expected):
    assert cdi.normalise_bus_id(bus) == expected


def test_parse_gpu_information():
    with open(os.path.join(H200, "gpu-information.txt"), encoding="utf-8") as handle:
        info = cdi.parse_gpu_information(handle.read())
    assert (info["GPU UUID"], info["Bus Location"], info["Device Minor"]) == (UUID, "0000:00:06.0", "0")


@pytest.mark.parametrize(
    "name, link",
    [
        ("libcuda.so.580.159.04", "libcuda.so"),
        ("libcuda.so.1", "libcuda.so"),
        ("libcuda.so", "libcuda.so"),
        ("libnvidia-egl-gbm.so.1.1.2", "libnvidia-egl-gbm.so"),
        ("nvidia_drv", ""),
    ],
)
def test_so_link_name(name, link):
    assert cdi.so_link_name(name) == link


@pytest.mark.parametrize(
    "path, resolved",
    [
        ("/usr/lib/libcuda.so.1", LIBDIR + "/libcuda.so.580.159.04"),  # absolute link, then relative
        ("/lib/libcuda.so", LIBDIR + "/libcuda.so.580.159.04"),  # /lib -> usr/lib, then a chain
        ("/usr/share/vulkan/icd.d/nvidia_icd.json", "/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json"),
        ("/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi"),  # a wrapper of its own on this host
        ("/usr/local/nvidia/lib64/../bin/nvidia-smi", "/usr/local/nvidia/bin/nvidia-smi"),
        ("/usr/lib/libmissing.so", None),
        ("/loop", None),
    ],
)
def test_resolve_in_root(h200, path, resolved):
    os.symlink("/loop", h200 + "/loop")
    assert cdi.resolve_in_root(h200, path) == resolved


def test_sonames_from_the_hosts_links(h200):
    host = make_host(h200)
    assert cdi.sonames_for(host, LIBDIR + "/libcuda.so." + VERSION) == ("libcuda.so.1", "links")
    assert cdi.sonames_for(host, LIBDIR + "/libnvidia-nvvm.so." + VERSION) == ("libnvidia-nvvm.so.4", "links")
    assert cdi.sonames_for(host, LIBDIR + "/libnvidia-tls.so." + VERSION) == ("libnvidia-tls.so." + VERSION, "links")


def test_sonames_from_elf(h200):
    """A real ELF file's DT_SONAME wins over the host's links."""
    with open(h200 + LIBDIR + "/libcuda.so." + VERSION, "wb") as handle:
        handle.write(make_elf("libcuda.so.1"))
    with open(h200 + LIBDIR + "/libnvidia-tls.so." + VERSION, "wb") as handle:
        handle.write(make_elf(""))
    host = make_host(h200)
    assert cdi.sonames_for(host, LIBDIR + "/libcuda.so." + VERSION) == ("libcuda.so.1", "elf")
    assert cdi.sonames_for(host, LIBDIR + "/libnvidia-tls.so." + VERSION) == ("libnvidia-tls.so." + VERSION, "elf")
    # And the spec is unchanged by it.
    spec = unroot(cdi.generate(host)["spec"], h200)
    assert spec["containerEdits"]["hooks"] == golden()["containerEdits"]["hooks"]


@pytest.mark.parametrize(
    "data, soname",
    [
        (make_elf("libfoo.so.1"), "libfoo.so.1"),
        (make_elf("libfoo.so.1", klass=1, little=False), "libfoo.so.1"),
        (make_elf("libbar.so.2", klass=1, little=True), "libbar.so.2"),
        (make_elf("libbar.so.2", klass=2, little=False), "libbar.so.2"),
        (make_elf(""), ""),
        (make_elf("libfoo.so.1")[:100], None),  # truncated
        (b"not an elf file at all" * 4, None),
        (b"", None),
    ],
)
def test_elf_soname(data, soname):
    assert cdi.elf_soname(io.BytesIO(data)) == soname


def test_elf_soname_of_a_real_library():
    for candidate in ("/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib64/libz.so.1", "/lib/aarch64-linux-gnu/libz.so.1"):
        if os.path.exists(candidate):
            with open(candidate, "rb") as handle:
                assert cdi.elf_soname(handle) == "libz.so.1"
            return
    pytest.skip("no libz.so.1 on this machine")


def test_parse_ldcache_new_format(tmp_path):
    path = str(tmp_path / "ld.so.cache")
    write_ldcache(path, [("libcuda.so.1", "/usr/lib64/libcuda.so.1", 0x0303),
                         ("libcuda.so.1", "/usr/lib/libcuda.so.1", 0x0003),  # 32-bit: left out
                         ("libnvidia-ml.so.1", "/usr/lib64/libnvidia-ml.so.1", 0x0A03)])
    with open(path, "rb") as handle:
        assert cdi.parse_ldcache(handle.read()) == [
            ("libcuda.so.1", "/usr/lib64/libcuda.so.1"),
            ("libnvidia-ml.so.1", "/usr/lib64/libnvidia-ml.so.1"),
        ]


def test_parse_ldcache_old_then_new_and_old_only(tmp_path):
    entries = [("libcuda.so.1", "/usr/lib64/libcuda.so.1", 0x0303)]
    both, old = str(tmp_path / "both"), str(tmp_path / "old")
    write_ldcache(both, entries, old_format_first=True)
    write_ldcache(old, entries, old_only=True)
    for path in (both, old):
        with open(path, "rb") as handle:
            assert cdi.parse_ldcache(handle.read()) == [("libcuda.so.1", "/usr/lib64/libcuda.so.1")]


@pytest.mark.parametrize("data", [b"", b"garbage" * 10, b"glibc-ld.so.cache1.1" + struct.pack("<II", 1000, 0) + b"\0" * 24])
def test_parse_ldcache_rejects(data):
    with pytest.raises(ValueError):
        cdi.parse_ldcache(data)


def test_parse_ldcache_matches_ldconfig_on_this_machine():
    """The parser against glibc's own reader, on this machine's real cache."""
    if not os.path.exists("/etc/ld.so.cache") or not shutil.which("ldconfig"):
        pytest.skip("no ld.so.cache / ldconfig here")
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("ldconfig -p does not run here")
    machine = os.uname().machine
    arch = {"x86_64": "x86-64", "aarch64": "AArch64"}.get(machine)
    if arch is None:
        pytest.skip("no 64-bit flag name known for %s" % machine)
    expected = [(n, p) for n, p, _f in parse_ldconfig_p("\n".join(l for l in out.splitlines() if arch in l))]
    with open("/etc/ld.so.cache", "rb") as handle:
        assert cdi.parse_ldcache(handle.read()) == expected


@pytest.mark.parametrize(
    "value",
    [
        "0", "1", "10", "0.5.0", "1.0", "1e5", "12:30", "0x1F", "0o17", "017", "+1", "-1", ".5", ".inf", ".NaN",
        "yes", "No", "on", "OFF", "y", "n", "true", "False", "null", "~", "", " lead", "trail ", "a: b", "key:",
        "#x", "x #y", "-", "- x", "-x", "--link", "---", "2024-01-01", "=", "<<", "@x", "`x", "!x", "&x", "*x",
        "[x]", "{x}", "a,b", "é", "tab\there", "line\nbreak", '"quoted"', "'single'", "%x", "|", ">",
        "NVIDIA_VISIBLE_DEVICES=void", "libcuda.so.1::/usr/lib64/libcuda.so", "GPU-d35d5d0d-d305-4f92-c0d5-c310f071b577",
    ],
)
def test_yaml_scalar_reads_back_as_the_same_string(value):
    assert yaml.safe_load("k: %s\n" % cdi.yaml_scalar(value)) == {"k": value}
    assert yaml.safe_load("- %s\n" % cdi.yaml_scalar(value)) == [value]


@pytest.mark.parametrize(
    "value, text",
    [
        ("0.5.0", "0.5.0"), ("0", '"0"'), ("--link", "--link"), ("/dev/nvidia0", "/dev/nvidia0"),
        ("yes", '"yes"'), (True, "true"), (438, "438"), (None, "null"),
    ],
)
def test_yaml_scalar_style(value, text):
    assert cdi.yaml_scalar(value) == text


def test_to_yaml_nested_and_empty():
    data = {"a": [{"b": [1, "x"], "c": {}}, [], {}, ["y", ["z"]]], "d": {"e": {"f": []}}, "g": "0"}
    text = cdi.to_yaml(data)
    assert yaml.safe_load(text) == data


@pytest.mark.parametrize(
    "path, message",
    [
        ("relative.yaml", "must be an absolute path"),
        ("/etc/cdi/nvidia.yml", "must end in .yaml or .json"),
        ("/etc/cdi/nvidia", "must end in .yaml or .json"),
    ],
)
def test_check_output_path(path, message):
    with pytest.raises(GpuFleetError, match=message):
        cdi.check_output_path(path)


def test_binary_search_dirs():
    assert cdi.binary_search_dirs("/usr/local/nvidia/lib64")[0] == "/usr/local/nvidia/bin"
    assert cdi.binary_search_dirs("/usr/lib/x86_64-linux-gnu") == list(cdi.BIN_DIRS)
    assert cdi.binary_search_dirs("/usr/lib64") == list(cdi.BIN_DIRS)
    assert cdi.binary_search_dirs("/opt/nvidia/driver/lib")[0] == "/opt/nvidia/driver/bin"


def test_driver_host_is_the_common_host_over_clean_roots(tmp_path):
    host = cdi.driver_host(driver_root=str(tmp_path) + "/", dev_root="//", system_root=str(tmp_path) + "/./")
    assert (host.root, host.dev_root, host.kernel_root) == (str(tmp_path), "/", str(tmp_path))
    assert host.runner is cdi.runs_nothing and host.run(["nvidia-smi"])[0] == 127


def test_module_runner_runs_in_the_c_locale():
    calls = []

    class Module(object):
        def run_command(self, argv, environ_update=None):
            calls.append((argv, environ_update))
            return 0, "out", ""

    host = cdi.driver_host(run_command=cdi.module_runner(Module()))
    assert host.run(["chroot", "/x", "nvidia-smi", "-q", "-x"]) == (0, "out", "")
    assert calls == [(["chroot", "/x", "nvidia-smi", "-q", "-x"], {"LC_ALL": "C"})]


def test_driver_root_reads_do_not_follow_what_does_not_resolve(h200):
    """A path whose links do not resolve inside the driver root is not there, whatever is under it."""
    host = make_host(h200)
    os.symlink("/nowhere/x", h200 + "/usr/lib/dangling.so")
    assert cdi.resolve(host, "/usr/lib/dangling.so") is None
    assert not cdi._isfile(host, "/usr/lib/dangling.so") and cdi._read_bytes(host, "/usr/lib/dangling.so") is None
    assert cdi._listdir(host, "/nowhere") == [] and cdi._open(host, "/nowhere/x") is None
    assert cdi._readlink(host, "/usr/lib/dangling.so") == "/nowhere/x" and cdi._readlink(host, "/usr/lib/none") is None
    assert cdi._read_kernel(host, "/proc/driver/nvidia/none") is None


@pytest.mark.parametrize("machine, arch_icd", [("x86_64", True), ("aarch64", False), ("ppc64le", False)])
def test_the_vulkan_icd_of_the_machine(h200, machine, arch_icd):
    write(h200 + "/usr/share/vulkan/icd.d/nvidia_icd.x86_64.json")
    configs = cdi.locate_configs(make_host(h200), machine)
    assert (("/usr/share/vulkan/icd.d/nvidia_icd.x86_64.json", "/etc/vulkan/icd.d/nvidia_icd.x86_64.json") in configs) is arch_icd


def _alarm(signum, frame):  # pylint: disable=unused-argument
    raise AssertionError("the read blocked: a FIFO was opened for reading")


def test_a_fifo_under_a_librarys_name_is_not_opened(h200):
    """A FIFO swapped in for a driver library is refused without opening it (open() of a FIFO
    with no writer blocks: the module would hang). The open went around the host adapter's
    guard before; the alarm turns a hang into a failure."""
    library = LIBDIR + "/libcuda.so." + VERSION
    os.remove(h200 + library)
    os.mkfifo(h200 + library)
    host = make_host(h200)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(5)
    try:
        assert cdi._open(host, library) is None
        # The SONAME then comes from the host's own links, as for a file that is not ELF.
        assert cdi.sonames_for(host, library) == ("libcuda.so.1", "links")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_library_is_opened_seekable_and_read_only(h200):
    """What _open gives elf_soname: the regular file, at offset 0, seekable, never writable."""
    library = LIBDIR + "/libnvidia-tls.so." + VERSION
    with open(h200 + library, "wb") as handle:
        handle.write(make_elf("libnvidia-tls.so.1"))
    handle = cdi._open(make_host(h200), library)
    with handle:
        assert handle.readable() and not handle.writable() and handle.seekable()
        assert cdi.elf_soname(handle) == "libnvidia-tls.so.1"
