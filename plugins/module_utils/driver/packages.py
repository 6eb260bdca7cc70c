# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The driver's packages as the orchestrator and both package backends handle them.

Their versions (``535.261.03`` out of ``535.261.03-1`` or ``3:580.95.05-1.el9``, sorted and
chosen), the read-only commands that list them (run, and shown as a shell would show them), the
lines of a package diff, and the mark of every file the module writes.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs, versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

MANAGED_BY = "Managed by gpufleet.nvidia.nvidia_driver"


# --- what the host answered, before it is written ---------------------------------------------


def checked(where, what, validator, value):
    """``value`` when ``validator`` takes it; else the refusal, before anything was changed.

    For what the host answered (apt-cache, dpkg, rpm, dnf) and then goes into a file or a
    command's argv: a name or version that would break ``where`` (a new line in a pin, an
    argument apt-get reads as an option) is refused, not written.
    """
    return inputs.checked("nvidia_driver: %s: %s" % (where, what), validator, value, after="; nothing was changed")


def checked_names(where, names, rule):
    """``names`` (a list) when each is a package name ``rule`` takes (:func:`checked`)."""
    for name in names:
        checked(where, "package", rule, name)
    return list(names)


def checked_packages(where, packages, name_rule, version_rule):
    """``packages`` (``{name: version}``, a version None for none) when every name and version is what ``where`` takes."""
    for name, version in sorted(packages.items()):
        checked(where, "package", name_rule, name)
        if version is not None:
            checked(where, "the version of %s" % name, version_rule, version)
    return packages


# --- commands ---------------------------------------------------------------------------------


def command_line(argv):
    """An argv as a shell would show it, for plans and messages."""
    out = []
    for arg in argv:
        if arg == "" or re.search(r"[^A-Za-z0-9_./:=+@%,~-]", arg):
            out.append("'%s'" % arg.replace("'", "'\"'\"'"))
        else:
            out.append(arg)
    return " ".join(out)


def run_checked(host, argv, what, env=None, ok=(0,)):
    """Run a read-only command and return its stdout; raise GpuFleetError when it fails."""
    rc, out, err = host.run(argv, env=env)
    if rc not in ok:
        raise GpuFleetError(
            "could not %s: `%s` exited %s: %s"
            % (what, command_line(argv), rc, tail(err) or tail(out) or "no output"),
            command=list(argv),
            rc=rc,
            stderr=err,
        )
    return out


def tail(text, count=6):
    """The last ``count`` non-empty lines of a command's output, joined for a message."""
    kept = [line for line in (text or "").strip().splitlines() if line.strip()]
    return " / ".join(kept[-count:])


# --- versions ---------------------------------------------------------------------------------


def sort_versions(items):
    """Driver versions (strings) sorted oldest first; those that do not parse go last."""

    def key(text):
        parsed = versions.try_parse_driver_version(text)
        return (0, parsed.key()) if parsed else (1, (text,))

    return sorted(set(items), key=key)


def choose_version(requested, available, flavor, where):
    """The newest of ``available`` (upstream versions) that ``requested`` names; or fail listing them."""
    matching = [v for v in available if versions.try_parse_driver_version(v) and versions.matches(requested, v)]
    if matching:
        return sort_versions(matching)[-1]
    listed = ", ".join(sort_versions(available)) or "none"
    raise GpuFleetError(
        "version %s (%s) is not available from %s; available: %s"
        % (requested, flavor, where, listed),
        version=str(requested),
        flavor=flavor,
        available_versions=sort_versions(available),
    )


def common_upstreams(found, names):
    """The upstream versions at which every one of ``names`` is in ``found`` (``{name: [package version, ...]}``), sorted."""
    upstreams = None
    for name in names:
        at = set(versions.upstream_version(v) for v in found.get(name, []))
        upstreams = at if upstreams is None else upstreams & at
    return sorted(upstreams or [])


def version_at(found, name, version, required=True, prefer=None):
    """The first (newest) package version of ``name`` in ``found`` at upstream ``version``, ``prefer`` where it is one;
    None where there is none, or a GpuFleetError when ``required``."""
    candidates = [v for v in found.get(name, []) if versions.upstream_version(v) == version]
    if candidates:
        return prefer if prefer in candidates else candidates[0]
    if required:
        raise GpuFleetError("%s has no version %s in the repositories" % (name, version), package=name)
    return None


def package_diff(before, after):
    """Ansible's diff of the packages, one line each of ``before`` and ``after`` (sorted); None when they are the same."""
    if before == after:
        return None
    return {"before_header": "packages", "after_header": "packages", "before": "".join("%s\n" % b for b in before),
            "after": "".join("%s\n" % a for a in after)}


def plan_result(pin_file, changes, diff, fabric_manager, notes=(), version=None, available=(), want=None, kernel_modules=None):
    """What a backend's plan returns: the version chosen among the ``available`` ones and the packages it wants (none
    for state absent), what moves (``changes``) and its diff, the fabric manager's part."""
    return {"version": version, "available_versions": sort_versions(available), "packages": dict(sorted((want or {}).items())),
            "kernel_modules": kernel_modules, "pin_file": pin_file, "notes": list(notes), "changes": changes,
            "package_diff": diff, "fabric_manager": fabric_manager}
