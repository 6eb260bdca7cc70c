"""The containerd editor's output, loaded by the real containerd (``containerd config dump``) on a
sample of the generated files: where containerd loads the original, it loads the result too, with
the handler among the CRI runtimes and the default runtime defined. Skipped (visibly) where no
containerd binary is found; see tests/unit/plugins/module_utils/runtime/configs.py."""

from __future__ import annotations

import os
import subprocess
import tempfile

import pytest
import tomlkit
from hypothesis import given, note, settings, strategies as st

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import containerd as ctd, containerd_config
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.config_check import dump_problems
from ansible_collections.gpufleet.nvidia.tests.property import strategies as s
from ansible_collections.gpufleet.nvidia.tests.property.tally import tally
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.configs import (
    BINARIES,
    _binary_version,
)

MAIN = "/etc/containerd/config.toml"
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
GLOB = "/etc/containerd/conf.d/*.toml"
#: One call of containerd costs a tenth of a second or more: a sample, half of the profile's examples.
SAMPLE = max(8, settings().max_examples // 2)


def dump(binary, folder, main, dropin=None):
    """``(rc, stdout, stderr)`` of ``containerd config dump`` on the files, the drop-in imported where the glob was."""
    main_path = os.path.join(folder, "config.toml")
    if dropin is not None:
        dropin_path = os.path.join(folder, "99-nvidia.toml")
        with open(dropin_path, "w", encoding="utf-8") as handle:
            handle.write(dropin)
        doc = tomlkit.parse(main or "")
        doc["imports"] = [dropin_path if i == GLOB else i for i in (doc.get("imports") or [])]
        main = doc.as_string()
    with open(main_path, "w", encoding="utf-8") as handle:
        handle.write(main or "")
    proc = subprocess.run([binary, "--config", main_path, "config", "dump"], capture_output=True, text=True, timeout=60, check=False)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.skipif(not BINARIES, reason="no containerd binary found (PATH, $GPUFLEET_CONTAINERD_BINARIES, .cache/containerd/)")
@settings(max_examples=SAMPLE)
@given(
    minor=st.sampled_from(sorted(BINARIES) or ["none"]),
    main=s.toml_file(s.containerd_tree(), s.CONTAINERD_FIXTURES),
    mode=st.sampled_from(["dropin", "inplace"]),
    set_as_default=st.booleans(),
)
def test_containerd_loads_what_it_loaded(minor, main, mode, set_as_default):
    binary = BINARIES[minor]
    note(repr(main))
    with tempfile.TemporaryDirectory() as folder:
        rc, out, err = dump(binary, folder, main)
        if rc != 0 or dump_problems(out, "runc", "absent"):
            return tally("containerd binary", "original not loaded")
        options = containerd_config.ContainerdOptions(mode=mode, set_as_default=set_as_default, containerd_version=_binary_version(binary))
        try:
            plan = ctd.plan_containerd(MAIN, main, None, options)
        except GpuFleetError as exc:
            kind = "refused: version the binary does not hold" if "does not fit the installed containerd" in exc.msg else "refused"
            return tally("containerd binary", kind)
        after = {f.path: f.after for f in plan.files}
        rc, out, err = dump(binary, folder, after[MAIN], after[DROPIN])
        assert rc == 0, err
        assert dump_problems(out, "nvidia", "present") == [], out
    tally("containerd binary", "loaded")
