"""Collection artifacts of the collection's dependencies, made from the `ansible` package's copies.

Run by scripts/run-package.sh: Galaxy is not reachable from the test machines, so the
dependencies galaxy.yml declares are installed from tarballs made here, one per dependency, out
of the copy the pinned `ansible` package carries (an installed collection: its MANIFEST.json and
FILES.json, minus the files the package leaves out, such as tests/ and .github/; FILES.json is
written without them, and MANIFEST.json with FILES.json's new checksum, as ansible-galaxy checks
both). ``ansible-galaxy collection install --offline`` then resolves galaxy.yml's dependencies
from these files alone.

    python tests/package/local_source.py OUTDIR   -> prints one tarball path per dependency
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tarfile

import yaml

import ansible_collections

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def installed_copy(name):
    """The folder of collection ``name`` (namespace.name) in the `ansible` package."""
    namespace, collection = name.split(".", 1)
    for base in ansible_collections.__path__:
        path = os.path.join(base, namespace, collection)
        if os.path.isfile(os.path.join(path, "MANIFEST.json")):
            return path
    raise SystemExit("%s: not in the installed `ansible` package (%s)" % (name, ", ".join(ansible_collections.__path__)))


def _add_bytes(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def artifact(src, outdir):
    """A collection tarball of the installed collection at ``src``; returns its path."""
    with open(os.path.join(src, "MANIFEST.json")) as handle:
        manifest = json.load(handle)
    with open(os.path.join(src, "FILES.json")) as handle:
        files = json.load(handle)
    files["files"] = [f for f in files["files"] if f["name"] == "." or os.path.lexists(os.path.join(src, f["name"]))]
    files_bytes = json.dumps(files, indent=True).encode()
    manifest["file_manifest_file"]["chksum_sha256"] = hashlib.sha256(files_bytes).hexdigest()
    info = manifest["collection_info"]
    path = os.path.join(outdir, "%s-%s-%s.tar.gz" % (info["namespace"], info["name"], info["version"]))
    with tarfile.open(path, "w:gz") as tar:
        _add_bytes(tar, "MANIFEST.json", json.dumps(manifest, indent=True).encode())
        _add_bytes(tar, "FILES.json", files_bytes)
        for entry in files["files"]:
            if entry["name"] != ".":
                tar.add(os.path.join(src, entry["name"]), arcname=entry["name"], recursive=False)
    return path


def main(outdir):
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        dependencies = yaml.safe_load(handle).get("dependencies") or {}
    os.makedirs(outdir, exist_ok=True)
    for name in sorted(dependencies):
        print(artifact(installed_copy(name), outdir))


if __name__ == "__main__":
    main(sys.argv[1])
