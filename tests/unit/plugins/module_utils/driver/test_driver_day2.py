# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The driver's part of the day-2 guards: the headers (kernel-devel) of the kernel the node boots next."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_layouts import (
    _next_kernel_of,
    next_boot_headers,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import dnf as driver_dnf


def _host(tmp_path, files, running="6.8.0-45-generic"):
    for path, text in files.items():
        local = tmp_path / path.lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(text)
    return common_host.Host(str(tmp_path), runner=lambda argv: (127, "", ""), kernel_root=str(tmp_path),
                            kernel_release=running, path_env="")


def test_the_next_boot_kernel_gets_its_headers(tmp_path):
    host = _host(tmp_path, {
        "/boot/vmlinuz-6.8.0-45-generic": "", "/boot/vmlinuz-6.8.0-51-generic": "",
        "/boot/grub/grubenv": "saved_entry=gnulinux-advanced-x>gnulinux-6.8.0-51-generic-advanced-x\n",
    })
    assert next_boot_headers(host, "6.8.0-45-generic") == ["linux-headers-6.8.0-51-generic"]


def test_no_other_headers_when_the_node_boots_the_running_kernel_or_none_is_installed(tmp_path):
    assert next_boot_headers(_host(tmp_path / "a", {"/boot/vmlinuz-6.8.0-45-generic": ""}), "6.8.0-45-generic") == []
    assert next_boot_headers(_host(tmp_path / "b", {}), "6.8.0-45-generic") == []


@pytest.mark.parametrize(
    "name, release",
    [
        ("linux-headers-6.8.0-51-generic", "6.8.0-51-generic"),
        ("linux-headers-6.8.0-45-generic", None),  # the running kernel's: its own note
        ("linux-headers-amd64", None),  # Debian's metapackage
        ("nvidia-dkms-580-server", None),
    ],
)
def test_next_kernel_of_a_headers_package(name, release):
    assert _next_kernel_of(name, "6.8.0-45-generic") == release


class _Need(object):
    required = False


def _dnf(tmp_path, files):
    host = _host(tmp_path, dict({"/boot/vmlinuz-5.14.0-427.el9.x86_64": "", "/boot/vmlinuz-5.14.0-503.el9.x86_64": ""}, **files),
                 running="5.14.0-427.el9.x86_64")
    return driver_dnf.DnfBackend(host, {"kernel_headers": True}, {"version_major": "9"}, "5.14.0-427.el9.x86_64", True, _Need())


def test_dnf_installs_the_kernel_devel_of_the_next_boot_kernel(tmp_path):
    notes = []
    backend = _dnf(tmp_path, {})
    assert backend._next_devel({"kernel-devel": ["0:5.14.0-427.el9", "0:5.14.0-503.el9"]}, notes) == {
        "kernel-devel-5.14.0-503.el9.x86_64": None}
    assert backend._next_devel({"kernel-devel": ["0:5.14.0-427.el9"]}, notes) == {}
    assert notes == ["kernel-devel-5.14.0-503.el9.x86_64 is not in the repositories: DKMS cannot build the nvidia module for the "
                     "kernel the node boots next, 5.14.0-503.el9.x86_64; it would come back without the driver"]


def test_dnf_leaves_the_next_kernel_alone_when_its_sources_are_there(tmp_path):
    backend = _dnf(tmp_path, {"/usr/src/kernels/5.14.0-503.el9.x86_64/Makefile": ""})
    assert backend._next_devel({"kernel-devel": ["0:5.14.0-503.el9"]}, []) == {}
