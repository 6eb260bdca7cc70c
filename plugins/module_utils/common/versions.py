# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA driver and CUDA versions: parsing, comparison, CUDA -> minimum driver.

A driver version is a branch (``580``), a branch and minor (``580.95``) or a full release
(``580.95.05``, ``570.26``). A branch stands for "the newest release of that branch", so a
branch satisfies a minimum of the same branch.

The CUDA table is the one of the CUDA Toolkit release notes (tables 2 and 3, Linux x86_64);
the family minimums are the minor-version compatibility floors of the same notes (CUDA 11.x
>= 450.80.02, 12.x >= 525, 13.x >= 580). CUDA 11.1 and 11.3 are not in the table: they are
checked against the family minimum only.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

DRIVER_VERSION_HINT = "expected e.g. 580 or 580.95.05"
CUDA_VERSION_HINT = "expected e.g. 12.4, 12.4.1 or 13.0"

# ASCII digits only: without re.ASCII, \d (like str.isdigit() and int()) also takes "５８０".
_DRIVER_RE = re.compile(r"^(\d{2,4})(?:\.(\d{1,3})(?:\.(\d{1,3}))?)?$", re.ASCII)
_CUDA_RE = re.compile(r"^(\d{1,2})\.(\d{1,2})(?:\.(\d{1,2}))?$", re.ASCII)

# CUDA release (major, minor, update) -> minimum Linux x86_64 driver. Update 0 is GA.
CUDA_MIN_DRIVER = {
    (13, 2, 2): "595.71.05",
    (13, 2, 1): "595.58.03",
    (13, 2, 0): "595.45.04",
    (13, 1, 1): "590.48.01",
    (13, 1, 0): "590.44.01",
    (13, 0, 2): "580.95.05",
    (13, 0, 1): "580.82.07",
    (13, 0, 0): "580.65.06",
    (12, 9, 1): "575.57.08",
    (12, 9, 0): "575.51.03",
    (12, 8, 1): "570.124.06",
    (12, 8, 0): "570.26",
    (12, 6, 3): "560.35.05",
    (12, 6, 2): "560.35.03",
    (12, 6, 1): "560.35.03",
    (12, 6, 0): "560.28.03",
    (12, 5, 1): "555.42.06",
    (12, 5, 0): "555.42.02",
    (12, 4, 1): "550.54.15",
    (12, 4, 0): "550.54.14",
    (12, 3, 1): "545.23.08",
    (12, 3, 0): "545.23.06",
    (12, 2, 2): "535.104.05",
    (12, 2, 1): "535.86.09",
    (12, 2, 0): "535.54.03",
    (12, 1, 0): "530.30.02",
    (12, 0, 1): "525.85.12",
    (12, 0, 0): "525.60.13",
    (11, 8, 0): "520.61.05",
    (11, 7, 1): "515.48.07",
    (11, 7, 0): "515.43.04",
    (11, 6, 0): "510.39.01",
    (11, 5, 0): "495.29.05",
    (11, 4, 0): "470.42.01",
    (11, 2, 0): "460.27.03",
    (11, 0, 0): "450.51.05",
}

# Minor-version compatibility: the oldest driver that runs any release of the CUDA major.
CUDA_FAMILY_MIN_DRIVER = {
    11: "450.80.02",
    12: "525",
    13: "580",
}


class DriverVersion(object):
    """A parsed driver version; compares by its numeric parts."""

    __slots__ = ("text", "parts")

    def __init__(self, text: str, parts: tuple) -> None:
        self.text = text
        self.parts = parts

    @property
    def branch(self) -> int:
        return self.parts[0]

    @property
    def is_branch(self) -> bool:
        return len(self.parts) == 1

    def key(self) -> tuple:
        """The parts padded to three numbers, for ordering full releases."""
        return tuple(self.parts) + (0,) * (3 - len(self.parts))

    def __repr__(self) -> str:
        return "DriverVersion(%r)" % self.text

    def __str__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DriverVersion) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())


def _numbers(pattern, value, what, hint):
    """``(text, numbers)`` of ``value`` that ``pattern`` matches (its groups that matched, as ints); else GpuFleetError."""
    text = str(value).strip() if value is not None else ""
    match = pattern.match(text)
    if not match:
        raise GpuFleetError("version '%s' is not a %s version (%s)" % (value, what, hint), value=value, expected=hint)
    return text, tuple(int(p) for p in match.groups() if p is not None)


def parse_driver_version(value: object) -> DriverVersion:
    """Parse ``580``, ``580.95`` or ``580.95.05``; raise GpuFleetError otherwise."""
    return DriverVersion(*_numbers(_DRIVER_RE, value, "driver", DRIVER_VERSION_HINT))


def try_parse_driver_version(value: object):
    """Like parse_driver_version, but None for anything that does not parse."""
    if value is None:
        return None
    try:
        return parse_driver_version(value)
    except GpuFleetError:
        return None


def upstream_version(package_version):
    """``535.261.03`` of a package version ``535.261.03-1``, ``3:580.95.05-1.el9`` or ``580.95.05-0ubuntu1``."""
    text = package_version.split(":", 1)[1] if ":" in package_version else package_version
    return text.split("-", 1)[0]


def as_driver_version(value):
    """Accept a DriverVersion or a string."""
    if isinstance(value, DriverVersion):
        return value
    return parse_driver_version(value)


def satisfies(version, minimum) -> bool:
    """Whether ``version`` is at least ``minimum``.

    A bare branch (``580``) means the newest release of that branch: it satisfies any minimum
    of the same branch or an older one. A full or partial release compares numerically, missing
    parts counting as 0.
    """
    version = as_driver_version(version)
    minimum = as_driver_version(minimum)
    if version.is_branch:
        return version.branch >= minimum.branch
    return version.key() >= minimum.key()


def matches(declared, actual) -> bool:
    """Whether the installed ``actual`` release is what ``declared`` asks for.

    ``580`` matches any 580.x.y, ``580.95`` any 580.95.y, a full release only itself.
    """
    declared = as_driver_version(declared)
    actual = as_driver_version(actual)
    return tuple(actual.parts[: len(declared.parts)]) == tuple(declared.parts)


def parse_cuda_version(value: object) -> tuple:
    """Parse ``12.4`` (GA) or ``12.4.1`` (update 1) into (major, minor, update)."""
    numbers = _numbers(_CUDA_RE, value, "CUDA", CUDA_VERSION_HINT)[1]
    return numbers + (0,) * (3 - len(numbers))


def cuda_requirement(value: object) -> dict:
    """What driver a CUDA release needs.

    Returns ``{'cuda': '12.4', 'release': (12, 4, 0), 'minimum': '550.54.14' or None,
    'family_minimum': '525' or None, 'exact': bool}``. ``exact`` is False when the release is not
    in the table and the nearest older update of the same minor was used; ``minimum`` is None
    when no row of that major.minor is known.
    """
    release = parse_cuda_version(value)
    major, minor, update = release
    minimum = CUDA_MIN_DRIVER.get(release)
    exact = minimum is not None
    if minimum is None:
        candidates = [key for key in CUDA_MIN_DRIVER if key[0] == major and key[1] == minor and key[2] <= update]
        if candidates:
            minimum = CUDA_MIN_DRIVER[max(candidates)]
    return {
        "cuda": str(value).strip(),
        "release": release,
        "minimum": minimum,
        "family_minimum": CUDA_FAMILY_MIN_DRIVER.get(major),
        "exact": exact,
    }


def check_cuda(driver, cuda: object) -> dict:
    """Compare a driver (release or branch) with what a CUDA release needs.

    Returns the requirement dict plus ``outcome``: ``ok`` (meets the release's table minimum),
    ``minor_version_compat`` (meets only the family minimum: runs through minor-version
    compatibility, with its limits), ``too_old`` (below the family minimum) or ``unknown`` (no
    table row or family for that CUDA release).
    """
    req = cuda_requirement(cuda)
    driver = as_driver_version(driver)
    if req["minimum"] is not None and satisfies(driver, req["minimum"]):
        req["outcome"] = "ok"
    elif req["family_minimum"] is None:
        req["outcome"] = "unknown"
    elif not satisfies(driver, req["family_minimum"]):
        req["outcome"] = "too_old"
    elif req["minimum"] is None:
        req["outcome"] = "unknown"
    else:
        req["outcome"] = "minor_version_compat"
    return req


# A component's version as its binary or the API server prints it, suffix and all.
_COMPONENT_RE = re.compile(r"^v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?", re.ASCII)


def version_tuple(text):
    """``(major, minor, patch)`` from text such as ``v1.34.2+k3s1``, ``1.7.24~ds1`` (Debian's
    containerd) or ``26.7.0``; None when it does not start with a version."""
    match = _COMPONENT_RE.match(str(text or "").strip())
    if not match:
        return None
    return tuple(int(g or 0) for g in match.groups())
