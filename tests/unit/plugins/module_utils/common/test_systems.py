"""Tests of module_utils/common/systems.py: the one table of the systems method package supports."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import systems


@pytest.mark.parametrize(
    "os_facts, release, supported",
    [
        ({"id": "debian", "version_id": "12", "version_major": "12"}, "12", True),
        ({"id": "debian", "version_id": "11", "version_major": "11"}, "11", False),
        ({"id": "ubuntu", "version_id": "24.04", "version_major": "24"}, "24.04", True),
        ({"id": "ubuntu", "version_id": "20.04", "version_major": "20"}, "20.04", False),
        ({"id": "rocky", "version_id": "9.5", "version_major": "9"}, "9", True),
        ({"id": "rhel", "version_id": "8.10"}, "8", True),  # the major of VERSION_ID when none is given
        ({"id": "almalinux", "version_id": "10.0", "version_major": "10"}, "10", True),
        ({"id": "rocky", "version_id": "11.0", "version_major": "11"}, "11", False),
        ({"id": "fedora", "version_id": "41", "version_major": "41"}, "41", False),
        ({"id": None, "version_id": None, "version_major": None}, "", False),
        ({}, "", False),
    ],
)
def test_package_supported(os_facts, release, supported):
    assert systems.package_release(os_facts) == release
    assert systems.package_supported(os_facts) is supported


def test_the_table_in_one_line():
    assert systems.package_supported_list() == (
        "almalinux 8/9/10, debian 12/13, rhel 8/9/10, rocky 8/9/10, ubuntu 22.04/24.04"
    )


def test_the_names_say_the_table():
    names = systems.PACKAGE_OS_NAMES.lower().replace("/", " ").replace(",", " ").split()
    for os_id, releases in systems.PACKAGE_OS.items():
        assert os_id in names and all(r in names for r in releases), os_id
