# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Security floors: the oldest version of each component that has the fixes of the bulletins
behind it, the runtime lines past their end of life, and the Kubernetes / containerd pairing; the
one table.

Preflight's ``security_floor`` rule, the fleet report and the validate role's node labels all read
it through :func:`judge`; a new bulletin is one entry of :data:`BULLETINS` and one row per fixed
version. A row names its bulletin, and every text built from it names the bulletin and the version
that fixes it.

"Today" is always an argument (a :class:`datetime.date` or ``YYYY-MM-DD``), as in
``common/lifecycle.py``: a bulletin counts from the day it was published, a runtime line is past
its end of life after that day; without a date every bulletin counts and no end of life is judged.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import lifecycle, versions

__all__ = ["BULLETINS", "CONTAINERD_LINES", "DRIVER_FLOORS", "KUBERNETES_CONTAINERD", "OPERATOR_FLOORS", "READ_ON",
           "TOOLKIT_FLOORS", "judge", "label_value", "operator_floor"]

# When the table was last compared with its sources.
READ_ON = "2026-12-03"

# id -> (what it is, published YYYY-MM-DD, where it was read). The id is what labels carry.
BULLETINS = {
    "nvidia-5659": ("NVIDIA security bulletin 5659 (Container Toolkit, July 2025: CVE-2025-23266, CVE-2025-23267)",
                    "2025-07-15", "https://github.com/NVIDIA/product-security/tree/main/2025/5659"),
    "nvidia-5821": ("NVIDIA security bulletin 5821 (GPU Display Driver, May 2026: CVE-2026-24187 and 14 more)",
                    "2026-05-21", "https://github.com/NVIDIA/product-security/tree/main/2026/5821"),
    "nvidia-5850": ("NVIDIA security bulletin 5850 (Container Toolkit, June 2026: CVE-2026-24260)",
                    "2026-06-30", "https://github.com/NVIDIA/product-security/tree/main/2026/5850"),
    "nvidia-5861": ("NVIDIA security bulletin 5861 (GPU Display Driver, September 2026: CVE-2026-47587 and more)",
                    "2026-09-30", "https://github.com/NVIDIA/product-security/tree/main/2026/5861"),
    # RELEASES.md "Current State of containerd Releases" as containerd#13739 left it (2026-07-09)
    "containerd-eol": ("containerd's support horizon (RELEASES.md, containerd#13739)", "2026-07-09",
                       "https://github.com/containerd/containerd/pull/13739"),
    # "if you are using containerd 1.X, you must switch to 2.0 or later before upgrading Kubernetes
    # to the next version" (the v1.35 sneak peek, quoted in containerd#12706)
    "k8s-containerd": ("Kubernetes v1.35's deprecation of containerd 1.x (removed from v1.36)", "2025-11-26",
                       "https://kubernetes.io/blog/2025/11/26/kubernetes-v1-35-sneak-peek/"),
}

# The data-center (Tesla) Linux rows: (branch, fixed in, bulletin). A branch a bulletin does not
# list (R570, past its end of life) has no floor here: driver_lifecycle says what it is.
DRIVER_FLOORS = (
    (535, "535.309.01", "nvidia-5821"),
    (580, "580.159.03", "nvidia-5821"),
    (595, "595.71.05", "nvidia-5821"),
    (580, "580.178.04", "nvidia-5861"),
    (595, "595.91.07", "nvidia-5861"),
    (610, "610.57.04", "nvidia-5861"),
    (615, "615.71.09", "nvidia-5861"),
)

# The Container Toolkit: (fixed in, bulletin, interim mitigation or None).
TOOLKIT_FLOORS = (
    # The mitigation is the toolkit's feature flag that turns the enable-cuda-compat hook off (the
    # hook of CVE-2025-23266), as NVIDIA's first revision of the bulletin gave it (quoted by third
    # parties; the revision read here names only the upgrades): known, not verified here.
    ("1.17.8", "nvidia-5659", "disable-cuda-compat-lib-hook"),
    ("1.19.1", "nvidia-5850", None),  # no 1.18.x fix
)

# The GPU Operator releases the same toolkit bulletins fix: (fixed in, bulletin). Its own default
# driver is not judged here: 26.3.2 and 26.3.3 default to 580.126.20, below bulletin 5821's floor.
OPERATOR_FLOORS = (
    ("25.3.2", "nvidia-5659"),
    ("26.3.2", "nvidia-5850"),
)

# containerd release lines: (major, minor) -> end of life, (y, m, d) or (y, m) where only the month
# is decided ("September 2026*" for 1.7, "March, 2027**" for 2.0). 2.4 is out (September 2026)
# with no end of life read here: a line not in the table is not judged.
CONTAINERD_LINES = {
    (1, 6): (2025, 8, 23),
    (1, 7): (2026, 9),
    (2, 0): (2027, 3),
    (2, 1): (2026, 7, 3),
    (2, 2): (2026, 11, 6),
    (2, 3): (2028, 4, 30),
}

# From this Kubernetes minor on, containerd below this version is not supported.
KUBERNETES_CONTAINERD = ((1, 36), (2, 0, 0), "k8s-containerd")


def _published(bulletin, today):
    """Whether ``bulletin`` was out on ``today`` (every one without a date)."""
    return today is None or lifecycle.parse_today(BULLETINS[bulletin][1]) <= today


def _named(ids):
    return "; ".join(BULLETINS[i][0] for i in ids)


def _finding(kind, component, version, fixed, ids, text, mitigation=None):
    return {"kind": kind, "component": component, "version": version, "fixed": fixed, "bulletins": list(ids),
            "mitigation": mitigation, "text": text}


def _driver(value, today):
    """The driver's finding, or None; a branch alone (``580``) installs its newest release: not judged."""
    version = versions.try_parse_driver_version(value)
    if version is None or version.is_branch:
        return None
    rows = [(fixed, b) for branch, fixed, b in DRIVER_FLOORS
            if branch == version.branch and _published(b, today) and version.key() < versions.parse_driver_version(fixed).key()]
    if not rows:
        return None
    fixed = max((versions.parse_driver_version(f) for f, dummy in rows), key=lambda v: v.key())
    ids = [b for dummy, b in rows]
    return _finding("driver", "driver", str(version), str(fixed), ids,
                    "driver %s is below R%d's security floor %s: %s; install %s or later of the branch"
                    % (version, version.branch, fixed, _named(ids), fixed))


def _toolkit(value, today):
    found = versions.version_tuple(value)
    rows = [(fixed, b, m) for fixed, b, m in TOOLKIT_FLOORS if found and found < versions.version_tuple(fixed) and _published(b, today)]
    if not rows:
        return None
    fixed = rows[-1][0]
    mitigations = [m for dummy, dummy2, m in rows if m]
    ids = [b for dummy, b, dummy2 in rows]
    text = "Container Toolkit %s is below its security floor %s: %s; install %s or later" % (value, fixed, _named(ids), fixed)
    for floor, bulletin, mitigation in rows:
        if mitigation:
            text += " (until then, the toolkit feature %s is the interim mitigation of bulletin %s)" % (
                mitigation, bulletin.replace("nvidia-", ""))
    return _finding("toolkit", "toolkit", str(value), fixed, ids, text, mitigations[0] if mitigations else None)


def _end_date(end):
    """The last supported day's (y, m, d) bound: a month alone runs to its end."""
    return end if len(end) == 3 else (end[0], end[1], 31)


def _containerd(value, today):
    found = versions.version_tuple(value)
    end = CONTAINERD_LINES.get(found[:2]) if found else None
    if end is None or today is None or (today.year, today.month, today.day) <= _end_date(end):
        return None
    line = "%d.%d" % found[:2]
    when = "%04d-%02d%s" % (end[0], end[1], "-%02d" % end[2] if len(end) == 3 else "")
    newer = sorted(k for k, e in CONTAINERD_LINES.items() if (today.year, today.month, today.day) <= _end_date(e))
    fix = "%d.%d" % newer[0] if newer else "a supported line"
    return _finding("runtime", "containerd", str(value), fix, ["containerd-eol"],
                    "containerd %s: the %s line's end of life was %s (%s); no more security fixes, move to %s or later"
                    % (value, line, when, _named(["containerd-eol"]), fix))


def _pairing(value, kubernetes, today):
    since, minimum, bulletin = KUBERNETES_CONTAINERD
    found, kube = versions.version_tuple(value), versions.version_tuple(kubernetes)
    if not (found and kube) or kube[:2] < since or found >= minimum or not _published(bulletin, today):
        return None
    fixed = "%d.%d" % minimum[:2]
    return _finding("pairing", "containerd", str(value), fixed, [bulletin],
                    "containerd %s cannot serve Kubernetes %s: %s; Kubernetes %d.%d and later need containerd %s or later"
                    % (value, kubernetes, _named([bulletin]), since[0], since[1], fixed))


def operator_floor(version, today=None):
    """The finding of a GPU Operator release below the toolkit bulletins' floor, or None."""
    today = lifecycle.parse_today(today) if today not in (None, "") else None
    found = versions.version_tuple(version)
    ids = [b for fixed, b in OPERATOR_FLOORS if found and found < versions.version_tuple(fixed) and _published(b, today)]
    if not ids:
        return None
    fixed = [f for f, b in OPERATOR_FLOORS if b == ids[-1]][0]
    return _finding("operator", "GPU Operator", str(version), fixed, ids,
                    "GPU Operator %s is below its security floor %s: %s; plan %s or later"
                    % (version, fixed, _named(ids), fixed))


def judge(driver=None, toolkit=None, containerd=None, kubernetes=None, today=None):
    """What the table says of a node's versions on ``today`` (a date, text, or None).

    Returns ``{state, findings, bulletins, text}``: ``state`` is ``below`` (a finding), ``ok``
    (something judged, nothing found) or ``not_judged`` (no version given); each finding is
    ``{kind, component, version, fixed, bulletins, mitigation, text}``.
    """
    today = lifecycle.parse_today(today) if today not in (None, "") else None
    found = [f for f in (_driver(driver, today), _toolkit(toolkit, today), _containerd(containerd, today),
                         _pairing(containerd, kubernetes, today)) if f]
    release = versions.try_parse_driver_version(driver)
    judged = bool(release and not release.is_branch) or any(versions.version_tuple(v) for v in (toolkit, containerd))
    ids = []
    for finding in found:
        ids += [b for b in finding["bulletins"] if b not in ids]
    state = "below" if found else ("ok" if judged else "not_judged")
    fallback = "at or above every security floor (table read %s)" % READ_ON if judged else "no version to judge"
    text = "; ".join(f["text"] for f in found) or fallback
    return {"state": state, "findings": found, "bulletins": ids, "text": text}


def label_value(judged):
    """``ok``, ``none`` (nothing judged) or the bulletins a node is below, NVIDIA's by their number
    (``5861.containerd-eol``): all six fit in a label value's 63 characters."""
    if judged["state"] == "below":
        return ".".join(b.replace("nvidia-", "") for b in judged["bulletins"])
    return "ok" if judged["state"] == "ok" else "none"
