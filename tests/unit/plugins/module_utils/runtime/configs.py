"""The runtime-config tests' shared helpers: the fixture corpus and the real containerd binaries found on this machine."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

import pytest
import tomlkit

from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import config_plan

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "runtime-configs")
#: The same folder under the name test_validate.py and test_toml_subset.py read it by, and its nvidia-ctk files.
RUNTIME = FIXTURES
CTK = os.path.join(RUNTIME, "nvidia-ctk-1.20.0")


def fixture_text(name: str) -> str:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def _read(path):
    with open(path) as handle:
        return handle.read()


def toml_plain(text):
    return tomlkit.parse(text or "").unwrap()


# --------------------------------------------------------------------------------------
# Real containerd binaries (for the tests that load the produced configs)
# --------------------------------------------------------------------------------------


def _binary_version(path: str):
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return config_plan.parse_containerd_version(out)


def containerd_binaries() -> dict:
    """``{"1.6": path, "1.7": path, "2.1": path, ...}`` of the containerd binaries found.

    Looked for: ``containerd`` in ``PATH`` (Debian 12's 1.6 here), the paths listed in
    ``$GPUFLEET_CONTAINERD_BINARIES`` (``os.pathsep``-separated) and
    ``.cache/containerd/<version>/usr/bin/containerd`` (extracted from Debian packages, see
    tests/unit/fixtures/runtime-configs/README.md).
    """
    candidates = []
    if shutil.which("containerd"):
        candidates.append(shutil.which("containerd"))
    candidates += [p for p in os.environ.get("GPUFLEET_CONTAINERD_BINARIES", "").split(os.pathsep) if p]
    candidates += sorted(glob.glob(os.path.join(ROOT, ".cache", "containerd", "*", "usr", "bin", "containerd")))
    found = {}
    for path in candidates:
        version = _binary_version(path) if os.access(path, os.X_OK) else None
        if version:
            found.setdefault(".".join(version.split(".")[:2]), path)
    return found


BINARIES = containerd_binaries()
#: The containerd minor versions the corpus is checked against, when present: Debian 12's
#: 1.6, Debian 13's 1.7 and the newest 2.x (Debian unstable's, which moves; see
#: scripts/fetch-containerd.sh).
WANTED_BINARIES = ("1.6", "1.7", max((k for k in BINARIES if k.startswith("2.")), default="2.1"))


def binary_param(minor: str):
    """A pytest param for one containerd minor version, skipped (visibly) when absent."""
    path = BINARIES.get(minor)
    return pytest.param(
        path,
        id="containerd-%s" % minor,
        marks=pytest.mark.skipif(
            path is None,
            reason="containerd %s binary not found (PATH, $GPUFLEET_CONTAINERD_BINARIES, "
            ".cache/containerd/; see tests/unit/fixtures/runtime-configs/README.md)" % minor,
        ),
    )


def containerd_dump(binary: str, tmp_path, main_text, dropin_text=None, import_glob=None) -> str:
    """``containerd config dump`` of a main file (+ drop-in, imported where the glob was)."""
    main_path = tmp_path / "config.toml"
    doc = tomlkit.parse(main_text or "")
    if dropin_text is not None:
        dropin_path = tmp_path / "99-nvidia.toml"
        dropin_path.write_text(dropin_text)
        doc["imports"] = [str(dropin_path) if i == import_glob else i for i in (doc.get("imports") or [])]
    main_path.write_text(doc.as_string())
    proc = subprocess.run(
        [binary, "--config", str(main_path), "config", "dump"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# The validate tests' containerd binaries, as pytest params: PATH (Debian 12's 1.6) and
# .cache/containerd/<version>.
def _containerd_binaries():
    found = []
    system = shutil.which("containerd")
    if system:
        found.append(pytest.param(system, id="containerd-path"))
    for path in sorted(glob.glob(os.path.join(ROOT, ".cache", "containerd", "*", "usr", "bin", "containerd"))):
        found.append(pytest.param(path, id="containerd-" + path.split(os.sep)[-4]))
    if not found:
        found.append(pytest.param(None, marks=pytest.mark.skip(reason="no containerd binary on this machine"), id="none"))
    return found
