# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``isolation`` check of host validation: the toolkit's config.toml against what the node
declares (``isolate_unprivileged``, else the container_toolkit role's rule: true except Docker).

The files are derived from ``tests/unit/fixtures/toolkit_config/config-1.20.toml`` (the toolkit's
packaged default, both keys commented out): isolated by the collection's own editor
(``runtime.toolkit_config.plan_isolation``), half set by hand, with a string for a boolean.
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import toolkit_config
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate import day2 as vday2
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate import host as V
from ansible_collections.gpufleet.nvidia.plugins.module_utils.validate.checks import Checks
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.discovery.captures import CaptureHost

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(HERE, "..", "..", "fixtures", "toolkit_config", "config-1.20.toml")) as _handle:
    PACKAGED = _handle.read()
ISOLATED = toolkit_config.plan_isolation(PACKAGED, toolkit_config.CONFIG_PATH, "present")[0]
HALF = "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n" + PACKAGED
AS_STRING = 'accept-nvidia-visible-devices-envvar-when-unprivileged = "false"\n' \
            "accept-nvidia-visible-devices-as-volume-mounts = true\n" + PACKAGED
WITH_TOOLKIT = {"container": {"toolkit": {"installed": True, "version": "1.20.0-1"}}}
WITHOUT_TOOLKIT = {"container": {"toolkit": {"installed": False}}}


def node(tmp_path, text):
    if text is not None:
        local = tmp_path / toolkit_config.CONFIG_PATH.lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(text)
    return common_host.Host(str(tmp_path), runner=lambda argv: (127, "", "not found"), path_env="")


def isolation(tmp_path, text, declared=None, runtime="containerd", facts=None):
    checks = Checks()
    vday2.check_isolation(checks, node(tmp_path, text), facts or WITH_TOOLKIT, declared, runtime)
    assert [c["name"] for c in checks.items] == ["isolation"]
    return checks.items[0]


def test_the_editors_isolation_passes(tmp_path):
    found = isolation(tmp_path, ISOLATED)
    assert found["status"] == "ok"
    assert found["msg"].startswith("unprivileged containers are isolated (the container_toolkit role's default for containerd")
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false" in found["msg"]


def test_the_packaged_file_is_drift_where_isolation_is_declared(tmp_path):
    found = isolation(tmp_path, PACKAGED)
    assert found["status"] == "drift"
    assert "an unprivileged container can take any GPU by setting NVIDIA_VISIBLE_DEVICES" in found["msg"]
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged unset (the toolkit's default, true)" in found["msg"]
    assert "Fix: run the container_toolkit role with container_toolkit_isolate_unprivileged: true" in found["msg"]


@pytest.mark.parametrize("text, harm, shown", [
    (HALF, "the device list is not read from volume mounts", "accept-nvidia-visible-devices-as-volume-mounts unset"),
    (AS_STRING, "by setting NVIDIA_VISIBLE_DEVICES", 'accept-nvidia-visible-devices-envvar-when-unprivileged = "false"'),
    (None, "by setting NVIDIA_VISIBLE_DEVICES", "config.toml (absent: the toolkit's defaults)"),
])
def test_half_isolation_a_string_or_no_file_is_drift(tmp_path, text, harm, shown):
    found = isolation(tmp_path, text, declared=True)
    assert found["status"] == "drift" and harm in found["msg"] and shown in found["msg"]
    assert found["msg"].startswith("isolation of unprivileged containers is declared (declared true (isolate_unprivileged))")


@pytest.mark.parametrize("declared, runtime, why", [
    (None, "docker", "the container_toolkit role's default for docker (true except with Docker)"),
    (False, "containerd", "declared false (isolate_unprivileged)"),
])
def test_not_declared_is_ok_and_says_what_the_file_does(tmp_path, declared, runtime, why):
    found = isolation(tmp_path, PACKAGED, declared=declared, runtime=runtime)
    assert found["status"] == "ok"
    assert found["msg"].startswith("isolation of unprivileged containers not declared (%s)" % why)


def test_no_toolkit_is_not_checked_and_a_broken_file_fails(tmp_path):
    assert isolation(tmp_path / "a", None, facts=WITHOUT_TOOLKIT)["status"] == "skipped"
    broken = isolation(tmp_path / "b", "accept-nvidia-visible-devices-envvar-when-unprivileged = \n")
    assert broken["status"] == "failed" and "does not parse as TOML" in broken["msg"]


def test_validate_host_runs_the_check_with_the_declared_setting():
    """debian12-l40s-x2-package: a real capture whose config.toml is the packaged one (keys commented)."""
    drifted, dummy = V.validate_host(CaptureHost("debian12-l40s-x2-package"), {"container_runtime": "none"})
    found = next(c for c in drifted["checks"] if c["name"] == "isolation")
    assert found["status"] == "drift" and drifted["declared"]["isolate_unprivileged"] is True
    assert "NVIDIA_VISIBLE_DEVICES" in drifted["drifted"][-1]
    declined, dummy = V.validate_host(CaptureHost("debian12-l40s-x2-package"), {"container_runtime": "none", "isolate_unprivileged": False})
    assert next(c for c in declined["checks"] if c["name"] == "isolation")["status"] == "ok"
    assert declined["declared"]["isolate_unprivileged"] is False
