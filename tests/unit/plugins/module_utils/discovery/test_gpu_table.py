"""Tests of module_utils/discovery/gpu_G.py: the table of data-center GPUs and its lookups."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import gpu_table as G


def test_every_row_names_a_known_architecture_that_its_chip_agrees_with():
    for device, (chip, name, arch) in G.GPUS.items():
        assert arch in G.ARCHITECTURES, hex(device)
        assert G.architecture_from_name("%s [%s]" % (chip, name)) == arch, hex(device)


def test_the_driver_requirements_name_rows_and_architectures_of_the_table():
    assert set(G.DEVICE_MIN_DRIVER) <= set(G.GPUS)
    assert set(G.OPEN_MODULES_REQUIRED_DEVICES) <= set(G.GPUS)
    for arch in list(G.ARCHITECTURE_MAX_BRANCH) + list(G.ARCHITECTURE_MIN_DRIVER) + list(G.OPEN_MODULES_REQUIRED_ARCHITECTURES):
        assert arch in G.ARCHITECTURES
    assert G.OPEN_MODULES_MIN_ARCHITECTURE in G.ARCHITECTURES


def test_lookup_names_a_device_in_pci_ids_form():
    assert G.lookup(0x2335) == ("GH100 [H200 SXM 141GB]", "Hopper")
    assert G.lookup(0x25B6) == ("GA107GL [A2 / A16]", "Ampere")
    assert G.lookup(0x25B6, 0x10DE, 0x14A9) == ("GA107GL [A16]", "Ampere")
    assert G.lookup(0x25B6, 0x10DE, 0x157E) == ("GA107GL [A2]", "Ampere")
    assert G.lookup(0xFFFF) == (None, None)
    assert G.lookup(None) == (None, None)


@pytest.mark.parametrize("value, arch", [
    ("Hopper", "Hopper"), ("hopper ", "Hopper"), ("Ada Lovelace", "Ada Lovelace"), ("Ada", "Ada Lovelace"),
    ("AdaLovelace", "Ada Lovelace"), ("Rubin", None), ("", None), (None, None),
])
def test_normalise_architecture(value, arch):
    assert G.normalise_architecture(value) == arch


@pytest.mark.parametrize("name, arch", [
    ("GB202GL [RTX PRO 6000 Blackwell Server Edition]", "Blackwell"), ("TU104GL [Tesla T4]", "Turing"),
    ("AD102GL [L40S]", "Ada Lovelace"), ("GH100", "Hopper"), ("NV44", None), ("G", None), ("", None), (None, None),
])
def test_architecture_from_name(name, arch):
    assert G.architecture_from_name(name) == arch


def test_architecture_rank_orders_the_architectures():
    assert G.architecture_rank("Volta") < G.architecture_rank(G.OPEN_MODULES_MIN_ARCHITECTURE) < G.architecture_rank("Blackwell")
    assert G.architecture_rank("Rubin") is None


def test_the_driver_requirement_tables_name_known_architectures():
    for arch in (list(G.ARCHITECTURE_MAX_BRANCH) + list(G.ARCHITECTURE_MAX_CUDA_MAJOR)
                 + list(G.ARCHITECTURE_MIN_DRIVER) + list(G.OPEN_MODULES_REQUIRED_ARCHITECTURES)):
        assert G.architecture_rank(arch) is not None, arch
    # the architectures that lose CUDA 13 are those whose last driver is R580
    assert sorted(G.ARCHITECTURE_MAX_CUDA_MAJOR) == sorted(a for a, b in G.ARCHITECTURE_MAX_BRANCH.items() if b == 580)
    # open by default from R560; the open modules need Turing
    assert G.OPEN_DEFAULT_BRANCH == 560 and G.OPEN_MODULES_MIN_ARCHITECTURE == "Turing"
