"""Molecule tests the tree, not an installed copy (issue 35: its prerun installed the collection into
~/.ansible/collections, tested that copy, warned "Another version ... only the first one will be
used", and left it for every later Ansible run)."""

from __future__ import annotations

import glob
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCENARIOS = sorted(glob.glob(os.path.join(ROOT, "extensions", "molecule", "*", "molecule.yml")))


@pytest.mark.parametrize("path", SCENARIOS, ids=[os.path.basename(os.path.dirname(p)) for p in SCENARIOS])
def test_every_scenario_runs_without_the_prerun_install(path):
    with open(path) as f:
        config = yaml.safe_load(f)
    assert config.get("prerun") is False


def test_the_molecule_stage_finds_the_tree_through_the_link_of_env_sh():
    with open(os.path.join(ROOT, "scripts", "env.sh")) as f:
        env = f.read()
    assert "export ANSIBLE_COLLECTIONS_PATH=$_gpufleet_root/.cache/collections" in env
    assert SCENARIOS
