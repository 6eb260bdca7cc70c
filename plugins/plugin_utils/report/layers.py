# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What this run did on each node's host layers, and whether their packages are held.

The report (``report/fleet.py``) puts :func:`row_layers` in each row from the results the roles
register on the node: ``nvidia_driver_result`` (``gpufleet.nvidia.nvidia_driver``: the driver's
packages are installed pinned and held with ``apt-mark hold``, or locked with ``dnf versionlock``)
and ``container_toolkit_result`` (``gpufleet.nvidia.toolkit_packages``: its ``held`` packages, the
runtime's result under ``runtime``; on EL the role's own record, with the packages ``dnf versionlock``
locked as ``held`` and ``backend: dnf``). A node the roles did not reach has no layer here.
"""

from __future__ import annotations

#: The per-host results the rows read, beside report/fleet.py's HOST_VARS.
RESULT_VARS = ("nvidia_driver_result", "container_toolkit_result")


def row_layers(hv):
    """``{layer: {changed, msg, held, packages}}`` for the driver, the toolkit and the runtime; {} without results."""
    layers = {}
    driver = hv.get("nvidia_driver_result")
    if isinstance(driver, dict) and not driver.get("skipped"):
        layers["driver"] = _driver(driver)
    toolkit = hv.get("container_toolkit_result")
    if isinstance(toolkit, dict) and not toolkit.get("skipped"):
        layers["toolkit"] = _toolkit(toolkit)
        runtime = toolkit.get("runtime")
        if isinstance(runtime, dict) and not runtime.get("skipped"):
            layers["runtime"] = {"changed": bool(runtime.get("changed")), "msg": runtime.get("msg"), "held": None,
                                 "packages": [], "files": list(runtime.get("changed_files") or [])}
    return layers


def _driver(result):
    """The driver layer: pinned and held (apt) or locked (dnf) where the role installed packages."""
    packages = sorted(result.get("packages") or {})
    if result.get("method") == "preinstalled":
        held = "not managed: pre-installed"
    elif not packages:
        held = None
    else:
        held = "locked" if result.get("backend") == "dnf" else "held"
    return {"changed": bool(result.get("changed")), "msg": result.get("msg"), "held": held, "packages": packages,
            "flavor": result.get("flavor"), "files": []}


def _toolkit(result):
    """The toolkit layer: its installed packages held (apt) or locked (dnf: the role's result says
    ``backend: dnf``, its ``held`` the packages ``dnf versionlock`` locked), or which are not."""
    packages = sorted(p for p, v in (result.get("packages") or {}).items() if v)
    held = sorted(result.get("held") or [])
    word = "locked" if result.get("backend") == "dnf" else "held"
    state = None
    if packages:
        state = word if set(packages) <= set(held) else "not %s: %s" % (word, ", ".join(p for p in packages if p not in held))
    return {"changed": bool(result.get("changed")), "msg": result.get("msg"), "held": state, "packages": packages,
            "files": list(result.get("files") or [])}


def changed_text(layers):
    """``driver, toolkit`` (the layers this run changed), ``nothing`` where the roles ran and changed nothing, None where none ran."""
    if not layers:
        return None
    return ", ".join(name for name, layer in layers.items() if layer["changed"]) or "nothing"
