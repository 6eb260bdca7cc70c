# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The driver's part of the day-2 guards: the headers of the kernel the node boots next."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import apt as driver_apt


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
    assert driver_apt.next_boot_headers(host, "6.8.0-45-generic") == ["linux-headers-6.8.0-51-generic"]


def test_no_other_headers_when_the_node_boots_the_running_kernel_or_none_is_installed(tmp_path):
    assert driver_apt.next_boot_headers(_host(tmp_path / "a", {"/boot/vmlinuz-6.8.0-45-generic": ""}), "6.8.0-45-generic") == []
    assert driver_apt.next_boot_headers(_host(tmp_path / "b", {}), "6.8.0-45-generic") == []


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
    assert driver_apt._next_kernel_of(name, "6.8.0-45-generic") == release
