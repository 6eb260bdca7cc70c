"""What the built collection tarball holds: its content, and nothing generated or of the tools.

Run by scripts/run-package.sh on the tarball ansible-galaxy built:

    python tests/package/check_tarball.py gpufleet-nvidia-X.Y.Z.tar.gz

Fails, naming the members, when the tarball carries a generated report, a tool's cache or
configuration, the development harness (scripts/, bench/, the Makefile), compiled Python, or
misses the collection's own content; and when MANIFEST.json's dependencies are not galaxy.yml's.
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
import tarfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Patterns of member paths that must not be shipped (fnmatch, on the whole path and each part).
FORBIDDEN_PARTS = (
    "gpufleet-report", ".ansible", ".ansible-lint", ".cache", ".venv", ".build", ".git", ".pytest_cache",
    ".mypy_cache", "__pycache__", "*.pyc", "*.tar.gz", ".whl", ".ci",
)
FORBIDDEN_TOP = ("bench", "scripts", "Makefile", "pytest.ini", "tests/output")
REQUIRED = (
    "MANIFEST.json", "FILES.json", "README.md", "meta/runtime.yml", "playbooks/site.yml",
    "plugins/modules/gpu_facts.py", "plugins/module_utils/common/host.py", "roles/discover/tasks/main.yml",
)


def problems(members, manifest, galaxy):
    """What is wrong with a tarball of ``members`` (paths) and ``manifest`` against ``galaxy``."""
    found = []
    for member in members:
        parts = member.split("/")
        if any(fnmatch.fnmatch(p, pattern) for p in parts for pattern in FORBIDDEN_PARTS):
            found.append("%s: generated, or a tool's file" % member)
        elif any(member == top or member.startswith(top + "/") for top in FORBIDDEN_TOP):
            found.append("%s: the development harness, not the collection" % member)
    for path in REQUIRED:
        if path not in members:
            found.append("%s: missing" % path)
    declared = galaxy.get("dependencies") or {}
    shipped = manifest.get("collection_info", {}).get("dependencies") or {}
    if shipped != declared:
        found.append("MANIFEST.json dependencies %r are not galaxy.yml's %r" % (shipped, declared))
    return found


def main(path):
    with tarfile.open(path) as tar:
        members = [m.name[2:] if m.name.startswith("./") else m.name for m in tar.getmembers()]
        manifest = json.load(tar.extractfile("MANIFEST.json"))
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        galaxy = yaml.safe_load(handle)
    found = problems(members, manifest, galaxy)
    for line in found:
        print("%s: %s" % (os.path.basename(path), line), file=sys.stderr)
    if found:
        sys.exit(1)
    print("%s: %d members, none generated or of the tools; dependencies %s"
          % (os.path.basename(path), len(members), json.dumps(galaxy.get("dependencies") or {})))


if __name__ == "__main__":
    main(sys.argv[1])
