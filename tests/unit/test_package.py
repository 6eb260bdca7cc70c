"""tests/package/check_tarball.py's judgement of a tarball's members, on made-up lists."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "package"))

import check_tarball  # noqa: E402  pylint: disable=wrong-import-position

GALAXY = {"dependencies": {"kubernetes.core": ">=6.2.0"}}
MANIFEST = {"collection_info": {"dependencies": {"kubernetes.core": ">=6.2.0"}}}


def test_the_collections_own_content_passes():
    assert check_tarball.problems(list(check_tarball.REQUIRED) + ["roles/report/README.md"], MANIFEST, GALAXY) == []


def test_generated_and_tool_files_and_the_harness_are_named():
    members = list(check_tarball.REQUIRED) + [
        "gpufleet-report/fleet-report.html", ".ansible-lint", "plugins/modules/__pycache__/x.cpython-311.pyc",
        "scripts/test.sh", "Makefile", "tests/unit/.pytest_cache/v", "tests/output/junit.xml",
    ]
    assert [p.split(":")[0] for p in check_tarball.problems(members, MANIFEST, GALAXY)] == members[len(check_tarball.REQUIRED):]


def test_missing_content_and_other_dependencies_are_named():
    found = check_tarball.problems(["MANIFEST.json", "FILES.json"], {"collection_info": {}}, GALAXY)
    assert "README.md: missing" in found and "playbooks/site.yml: missing" in found
    assert found[-1].startswith("MANIFEST.json dependencies {} are not galaxy.yml's")
