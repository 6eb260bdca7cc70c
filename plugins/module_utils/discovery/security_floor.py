# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight's ``security_floor`` rule: the declared and installed driver, the installed Container
Toolkit and containerd against the security floors of ``common/security.py`` on a date.

A version below a floor is a warning, or blocking with the mode ``fail``; each problem names the
bulletin and the version that fixes it. Nothing here touches the host.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import security
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

RULE = "security_floor"
#: The rule of preflight: id -> what it checks.
PREFLIGHT_RULES = (
    (RULE, "the declared and installed driver, the toolkit and containerd are at or above their security floors"),
)
#: A version below a floor is a warning (warn) or blocking (fail).
MODES = ("warn", "fail")

_REASONS = {
    "driver": "The driver's kernel modules run in every GPU workload's path; a release below the floor keeps the "
              "vulnerabilities the bulletin fixed.",
    "toolkit": "The toolkit's hooks run as root for every GPU container; a release below the floor keeps the "
               "container escapes the bulletin fixed.",
    "runtime": "A containerd line past its end of life gets no more security fixes.",
    "pairing": "The kubelet of that Kubernetes release does not support containerd 1.x.",
}
# The message names the bulletin and the fixing version; the fix says where to set it.
_FIXES = {
    "driver": "Declare that release or a later one in nvidia_driver_version (on a pre-installed node, install it in the "
              "image), or waive security_floor.",
    "toolkit": "Set container_toolkit_version to that release or a later one (the four packages move together), or waive "
               "security_floor.",
    "runtime": "Upgrade containerd to that line or a later one, or waive security_floor.",
    "pairing": "Upgrade containerd before the kubelet, or waive security_floor.",
}


def check_mode(mode):
    """GpuFleetError for a mode that is not one."""
    if mode not in MODES:
        raise GpuFleetError("security_floors: '%s' is not a mode (expected %s)" % (mode, " or ".join(MODES)),
                            value=mode, expected=list(MODES))


def subjects(drivers, facts, toolkit=None):
    """``[(of, kwargs of security.judge)]``: each driver of ``drivers`` (``[(of, version, label)]`` as
    driver_lifecycle judges them: ``declared`` or ``installed``), the declared ``toolkit`` (what the
    toolkit role installs), else the installed one, then the installed containerd of ``facts``."""
    found = [(of, {"driver": str(version)}) for of, version, dummy in drivers]
    installed = dig(facts, "container", "toolkit", "version")
    if toolkit or installed:
        found.append(("declared" if toolkit else "installed", {"toolkit": toolkit or installed}))
    containerd = dig(facts, "container", "containerd") or {}
    if containerd.get("installed") and containerd.get("version"):
        found.append(("installed", {"containerd": containerd["version"]}))
    return found


def check_preflight(report, drivers, facts, versions_declared, today, mode):
    """The rule on a preflight ``report``; returns what :func:`security.judge` said of each subject.
    ``versions_declared``: ``{toolkit, kubernetes}``, each the declared version or None."""
    judged = []
    kubernetes = versions_declared.get("kubernetes")
    for of, versions in subjects(drivers, facts, versions_declared.get("toolkit")):
        if "containerd" in versions:
            versions["kubernetes"] = kubernetes
        entry = dict(security.judge(today=today, **versions), of=of,
                     versions=[v for k, v in sorted(versions.items()) if v and k != "kubernetes"])
        judged.append(entry)
        for finding in entry["findings"]:
            report.problem(RULE, "blocking" if mode == "fail" else "warning", "%s %s" % (of, finding["text"]),
                           _REASONS[finding["kind"]] + " (security floors read %s)" % security.READ_ON,
                           _FIXES[finding["kind"]])
    said = [e for e in judged if e["state"] != "not_judged"]
    if not said:
        report.skip(RULE, "no driver release (a branch alone installs its newest), toolkit or containerd version to judge")
    elif not any(e["findings"] for e in said):
        report.passed(RULE, "; ".join("%s %s: %s" % (e["of"], "/".join(e["versions"]), e["text"]) for e in said))
    return judged
