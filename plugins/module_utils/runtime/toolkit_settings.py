# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the NVIDIA Container Toolkit reads from ``/etc/nvidia-container-runtime/config.toml``.

Two top-level keys of that file decide whether an unprivileged container can get GPUs by asking
for them (NVIDIA, "Preventing unprivileged access to GPUs in Kubernetes"; the toolkit's
``internal/config``):

* ``accept-nvidia-visible-devices-envvar-when-unprivileged`` (toolkit default ``true``): honour
  ``NVIDIA_VISIBLE_DEVICES`` in an unprivileged container. Any pod that sets the variable gets the
  GPUs it names, whatever it was allocated; ``false`` closes that;
* ``accept-nvidia-visible-devices-as-volume-mounts`` (toolkit default ``false``): read the device
  list from the volume mounts under ``/var/run/nvidia-container-devices`` that the device plugin
  (``deviceListStrategy: volume-mounts``) adds, which a pod cannot forge.

Isolation is the pair ``false`` / ``true``. :func:`isolation_of` and :func:`runtime_mode` read the
file's plain data (validation parses it with ``common.toml_subset``); ``runtime.toolkit_config``
edits the file, with tomlkit.
"""

from __future__ import annotations

CONFIG_PATH = "/etc/nvidia-container-runtime/config.toml"
ENVVAR_KEY = "accept-nvidia-visible-devices-envvar-when-unprivileged"
VOLUME_MOUNTS_KEY = "accept-nvidia-visible-devices-as-volume-mounts"
#: What isolation sets, in the order written.
ISOLATED = ((ENVVAR_KEY, False), (VOLUME_MOUNTS_KEY, True))
#: What the toolkit does when a key is not in the file.
TOOLKIT_DEFAULTS = {ENVVAR_KEY: True, VOLUME_MOUNTS_KEY: False}


def isolation_of(data) -> dict:
    """The two settings as the toolkit reads them from the file's plain ``data`` (its defaults
    for a missing key) and whether together they isolate unprivileged containers."""
    data = data if isinstance(data, dict) else {}
    envvar = data.get(ENVVAR_KEY, TOOLKIT_DEFAULTS[ENVVAR_KEY])
    volumes = data.get(VOLUME_MOUNTS_KEY, TOOLKIT_DEFAULTS[VOLUME_MOUNTS_KEY])
    return {
        "envvar_when_unprivileged": envvar,
        "as_volume_mounts": volumes,
        "isolated": envvar is False and volumes is True,
    }


def runtime_mode(data) -> str:
    """``nvidia-container-runtime.mode`` of the file's plain ``data``; ``auto`` when unset."""
    table = data.get("nvidia-container-runtime") if isinstance(data, dict) else None
    mode = table.get("mode") if isinstance(table, dict) else None
    return mode if isinstance(mode, str) and mode else "auto"
