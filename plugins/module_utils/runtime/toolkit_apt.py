# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA Container Toolkit's packages on Debian and Ubuntu, in one pass.

What ``roles/container_toolkit`` used to do in eight tasks (keyring directory, key download,
source file, cache refresh, pin, install, four holds, the runtime module's Python dependency),
done by one module call: read the key, the source and pin files and the packages' dpkg state,
build the desired files in memory, compare, and only then write, refresh the lists (only when
the repository changed, or when an install needs lists older than ``cache_valid_time``),
install the exact version and hold. A run that changes nothing costs one ``dpkg-query``.
Given ``runtime``, the module then runs the ``container_runtime`` module's work in the same
process, and :func:`with_runtime` folds its result into this one.

:func:`plan` is a pure function of the current state and the parameters; :func:`apply` carries
a plan out through the host (``common.host.Host``: files, commands), so both are unit-tested
without apt. The key's download (:func:`fetch_key`) is given to :func:`converge` as a function.
"""

from __future__ import annotations

import functools
import posixpath
import re
import time

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.dpkg import APT_ENV, DPKG_QUERY, parse_dpkg_query
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.files import read_text

MANAGED_BY = "Managed by gpufleet.nvidia.container_toolkit"
PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1")
KEYRING = "/etc/apt/keyrings/nvidia-container-toolkit.asc"
ARMOR = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
SOURCE_FILE = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
PIN_FILE = "/etc/apt/preferences.d/nvidia-container-toolkit.pref"
LISTS_DIR = "/var/lib/apt/lists"
APT_GET_INSTALL = [
    "apt-get", "install", "-y", "-q", "--no-install-recommends", "--allow-downgrades",
    "--allow-change-held-packages", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold",
]
_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.~+]+)?$")

#: What each option's value must be, checked before anything is read or written (in check mode
#: too): a value that reaches the source line, the pin stanza or apt's argv must not be able to
#: change what they say (a newline, a space, a leading ``-``). ``version`` is :func:`full_version`'s.
PARAM_RULES = {
    "packages": inputs.debian_package,
    "extra_packages": inputs.debian_package,
    "hold": inputs.boolean,
    "repo_manage": inputs.boolean,
    "repo_url": inputs.optional(inputs.url),
    "repo_key_url": inputs.optional(inputs.url),
    "repo_key_refresh": inputs.boolean,
    "keyring": inputs.keyring,
    "source_file": inputs.absolute_path,
    "pin_file": inputs.absolute_path,
    "update_cache": inputs.boolean,
    "cache_valid_time": inputs.integer(0),
}
#: The options that are lists: each item is checked, and named by its index (``packages[0]``).
LIST_OPTIONS = ("packages", "extra_packages")


def check_params(params):
    """Every option of :data:`PARAM_RULES` that ``params`` sets, checked; the first refusal raised, naming it."""
    full_version(params.get("version"))
    for option, validator in PARAM_RULES.items():
        value = params.get(option)
        if value is None:
            continue
        if option not in LIST_OPTIONS:
            inputs.checked(option, validator, value)
            continue
        if not isinstance(value, (list, tuple)):
            raise GpuFleetError("%s %r is not a list of Debian package names" % (option, value), value=value)
        for index, item in enumerate(value):
            inputs.checked("%s[%d]" % (option, index), validator, item)
    _check_distinct_files(params)
    return params


def _check_distinct_files(params):
    """The keyring, the source file and the pin file are three files: apt would read one as the other."""
    seen = {}
    for option in ("keyring", "source_file", "pin_file"):
        path = params.get(option)
        if path in seen:
            raise GpuFleetError(
                "%s %r is also %s: the keyring, the source file and the pin file are three files (expected three "
                "different paths); nothing was changed" % (option, path, seen[path]), option=option, value=path)
        if path is not None:
            seen[path] = option


def full_version(version):
    """``1.17.8`` -> ``1.17.8-1`` (NVIDIA's package revision); ``1.17.8-1`` as is."""
    text = str(version or "").strip()
    if not _VERSION.match(text):
        raise GpuFleetError(
            "version: %r is not a toolkit version (expected e.g. 1.17.8 or 1.17.8-1)" % (version,), version=version
        )
    return text if "-" in text else text + "-1"


def render_source(url, keyring, key_origin=None):
    """The apt source; its comment says where the keyring's key came from (a URL, or repo_key).

    What goes into the line is checked once more (:func:`check_params` checked the options): a
    newline or a space in it would add a source or an option such as ``trusted=yes``.
    """
    inputs.checked("repo_url", inputs.url, url)
    inputs.checked("keyring", inputs.keyring, keyring)
    if key_origin and key_origin != "repo_key":
        inputs.checked("repo_key_url", inputs.url, key_origin)
    origin = "; key from %s" % key_origin if key_origin else ""
    return "# %s%s\ndeb [signed-by=%s] %s /\n" % (MANAGED_BY, origin, keyring, url)


def key_origin(params):
    return "repo_key" if params["repo_key"] else params["repo_key_url"]


def render_pin(packages, version):
    """The apt preferences stanza; its names and version are checked once more (a newline would add a stanza)."""
    for index, name in enumerate(packages):
        inputs.checked("packages[%d]" % index, inputs.debian_package, name)
    inputs.checked("version", inputs.debian_version, version)
    return (
        "# %s: the toolkit packages move together.\nPackage: %s\nPin: version %s\nPin-Priority: 1001\n"
        % (MANAGED_BY, " ".join(packages), version)
    )


def read_state(host, params):
    """What is on the node now: the three files and the packages' dpkg state."""
    names = list(params["packages"]) + [p for p in params["extra_packages"] if p not in params["packages"]]
    rc, out, err = host.run(DPKG_QUERY + names)
    if rc not in (0, 1):  # 1: some of the packages are unknown to dpkg
        raise GpuFleetError("dpkg-query failed (rc %s): %s" % (rc, (err or out).strip()), rc=rc)
    return {
        "files": dict((path, read_text(host, path)) for path in (params["keyring"], params["source_file"], params["pin_file"])),
        "packages": parse_dpkg_query(out),
        "lists_age": lists_age(host),
    }


def lists_age(host):
    """Seconds since apt last refreshed its package lists (their newest file), None without lists."""
    lists = [p for p in host.glob(posixpath.join(LISTS_DIR, "*"))
             if not p.endswith("lock") and not posixpath.basename(p).startswith(".")]
    times = [t for t in (host.mtime(p) for p in lists) if t is not None]
    if not times:
        return None
    return time.time() - max(times)


def fetch_key(module, url):
    """The repository key at ``url``, downloaded through the module (``fetch_url``: its proxy and TLS settings)."""
    # Imported here: only a key download needs it, and importing it (http.client, ssl) costs
    # about 50 ms on the node (docs/performance.md).
    from ansible.module_utils.urls import fetch_url  # pylint: disable=import-outside-toplevel

    response, info = fetch_url(module, url, timeout=30)
    if info.get("status") != 200 or response is None:
        raise GpuFleetError(
            "could not download the repository key from %s: %s (HTTP %s); nothing was changed"
            % (url, info.get("msg"), info.get("status")),
            url=url,
        )
    return to_native(response.read())


def desired_files(params, key):
    files = {params["pin_file"]: render_pin(params["packages"], full_version(params["version"]))}
    if params["repo_manage"]:
        if not params["repo_url"]:
            raise GpuFleetError("repo_url: empty while repo_manage is true (the repository to install from)")
        files[params["keyring"]] = key
        files[params["source_file"]] = render_source(params["repo_url"], params["keyring"], key_origin(params))
    return files


def plan(current, params, key):
    """What to change: ``{'files', 'install', 'hold', 'unhold', 'update_cache', 'actions'}``."""
    version = full_version(params["version"])
    files = dict(
        (path, text) for path, text in desired_files(params, key).items() if current["files"].get(path) != text
    )
    install = packages_to_install(current["packages"], params, version)
    hold, unhold = holds_to_change(current["packages"], params, install)
    todo = {"files": files, "install": install, "hold": hold, "unhold": unhold,
            "update_cache": needs_update(current, params, files, install)}
    todo["actions"] = actions(todo)
    return todo


def packages_to_install(installed, params, version):
    """The toolkit's packages not at ``version`` (pinned to it), then the extra packages not installed."""
    install = ["%s=%s" % (name, version) for name in params["packages"] if _info(installed, name).get("version") != version]
    return install + [name for name in params["extra_packages"] if name not in installed and name not in params["packages"]]


def holds_to_change(installed, params, install=()):
    """``(to hold, to release)``: the toolkit's packages whose hold is not what ``hold`` asks once ``install`` ran.

    ``apt-get install --allow-change-held-packages`` releases the hold of each package it moves
    (dpkg's selection goes back to ``install``), so a package in ``install`` counts as not held:
    a version change holds the four packages again after the install, and the next run is a no-op.
    """
    moving = set(spec.partition("=")[0] for spec in install)
    held = [name for name in params["packages"] if _info(installed, name).get("held", False) and name not in moving]
    if params["hold"]:
        return [name for name in params["packages"] if name not in held], []
    return [], held


def needs_update(current, params, files, install):
    """Refresh the lists when the repository changed, or before an install with stale lists (or when asked)."""
    repo_changed = params["repo_manage"] and any(p in files for p in (params["keyring"], params["source_file"]))
    age = current.get("lists_age")
    stale = age is None or age > params["cache_valid_time"]
    return bool(repo_changed or (install and (stale or params["update_cache"])))


#: What each kind of package change runs, in the order they run.
PACKAGE_ACTIONS = (("install", "apt-get install "), ("hold", "apt-mark hold "), ("unhold", "apt-mark unhold "))


def actions(todo):
    """A plan's steps as the module reports them, in the order :func:`apply` takes them."""
    steps = ["write %s" % path for path in sorted(todo["files"])]
    if todo["update_cache"]:
        steps.append("apt-get update")
    return steps + [command + " ".join(todo[key]) for key, command in PACKAGE_ACTIONS if todo[key]]


def _info(packages, name):
    return packages.get(name) or {}


def diff(current, todo, version):
    """One diff entry per file, and one for the packages."""
    entries = [{
        "before_header": path, "after_header": path,
        "before": current["files"].get(path) or "", "after": todo["files"][path],
    } for path in sorted(todo["files"])]
    if todo["install"] or todo["hold"] or todo["unhold"]:
        entries.append({
            "before_header": "packages", "after_header": "packages (toolkit %s)" % version,
            "before": _package_lines(dict((n, _info(current["packages"], n)) for n in current["packages"]), "(not installed)"),
            "after": _package_lines(packages_after(current["packages"], todo)),
        })
    return entries


def packages_after(packages, todo):
    """The packages' versions and holds once ``todo`` is applied."""
    after = dict(packages)
    for spec in todo["install"]:
        name, _sep, version = spec.partition("=")
        after[name] = dict(_info(after, name), version=version or "(latest)")
    for name in todo["hold"]:
        after[name] = dict(_info(after, name), held=True)
    for name in todo["unhold"]:
        after[name] = dict(_info(after, name), held=False)
    return after


def _package_lines(packages, missing=None):
    return "".join(
        "%s=%s%s\n" % (name, info.get("version", missing), " (held)" if info.get("held", False) else "")
        for name, info in sorted(packages.items())
    )


def apply(host, todo, before=None):
    """Carry a plan out: files first, then the lists, the install, the holds.

    The files are written before apt runs (apt reads them); when apt fails before the install
    is done, they are put back as they were in ``before`` (``{path: text or None}``, what
    :func:`read_state` read): byte for byte, and a file that was not there removed. Once the
    install is done the files stay: they pin what is installed now.
    """
    before = before or {}
    written = sorted(todo["files"])
    for path in written:
        host.write(path, todo["files"][path])
    try:
        if todo["update_cache"]:
            _checked(host, ["apt-get", "update", "-q"], "apt-get update")
        if todo["install"]:
            _checked(host, APT_GET_INSTALL + todo["install"], "apt-get install " + " ".join(todo["install"]))
            written = []
        for key in ("hold", "unhold"):
            if todo[key]:
                _checked(host, ["apt-mark", key] + todo[key], "apt-mark " + key)
    except GpuFleetError as exc:
        raise put_back(host, before, written, exc)


def put_back(host, before, paths, exc):
    """``exc`` once each of ``paths`` is as ``before`` says (None: removed), saying what was put back."""
    restored, failed = [], []
    for path in reversed(paths):
        try:
            if before.get(path) is None:
                host.remove(path)
            else:
                host.write(path, before[path])
        except (GpuFleetError, IOError, OSError) as error:
            failed.append("%s: %s" % (path, getattr(error, "msg", error)))
            continue
        restored.append(path)
    if not paths:
        return exc
    msg = exc.msg + ("; put back as they were: %s" % ", ".join(sorted(restored)) if restored else "")
    msg += "; could not put back: %s" % "; ".join(failed) if failed else ""
    return GpuFleetError(msg, **dict(exc.details, restored=sorted(restored), not_restored=failed))


def _checked(host, argv, what):
    rc, out, err = host.run(argv, APT_ENV)
    if rc != 0:
        tail = "\n".join(((err or "") + "\n" + (out or "")).strip().splitlines()[-15:])
        raise GpuFleetError("%s failed (rc %s): %s" % (what, rc, tail), rc=rc, command=argv)
    return out


def wanted_key(params, current, fetch):
    """The key the keyring must hold, and whether it was downloaded to know it.

    Given in ``repo_key``, it is that. From ``repo_key_url``, it is downloaded only when it must be:
    with ``repo_key_refresh``, when the keyring holds no armored key, or when the source file does
    not say that the keyring came from this URL (a new URL or repository, a key given inline
    before, or a source file written before the file said so). Otherwise the keyring stays as it
    is, and a run that changes nothing does not depend on the key's server.
    """
    if params["repo_key"]:
        key, downloaded = params["repo_key"], False
    else:
        held = current["files"].get(params["keyring"]) or ""
        source = render_source(params["repo_url"], params["keyring"], key_origin(params))
        if not params["repo_key_refresh"] and ARMOR in held and current["files"].get(params["source_file"]) == source:
            return held, False
        key, downloaded = fetch(params["repo_key_url"]), True
    if ARMOR not in key:
        raise GpuFleetError(
            "the repository key from %s is not an ASCII-armored OpenPGP public key (it starts %r); "
            "nothing was changed" % (key_origin(params), key[:40]),
        )
    return (key if key.endswith("\n") else key + "\n"), downloaded


def converge(host, params, check_mode=False, want_diff=False, fetch=None):
    """Read, plan, and (unless check mode) apply; the module's result.

    ``fetch(url)`` downloads the repository key (default: :func:`fetch_key` through ``host.module``).
    """
    check_params(params)
    version = full_version(params["version"])
    current = read_state(host, params)
    fetch = fetch or functools.partial(fetch_key, host.module)
    key, downloaded = wanted_key(params, current, fetch) if params["repo_manage"] else (None, False)
    todo = plan(current, params, key)
    changed = bool(todo["actions"])
    if changed and not check_mode:
        apply(host, todo, current["files"])
        after = parse_dpkg_query(host.run(DPKG_QUERY + list(params["packages"]))[1])
    else:
        after = current["packages"]
    result = {
        "changed": changed,
        "version": version,
        "packages": dict((n, (after.get(n) or {}).get("version")) for n in params["packages"]),
        "held": sorted(n for n in params["packages"] if (after.get(n) or {}).get("held")),
        "actions": todo["actions"],
        "files": sorted(todo["files"]),
        "key_downloaded": downloaded,
        "msg": ("NVIDIA Container Toolkit %s: %s" % (version, "; ".join(todo["actions"])) if changed
                else "NVIDIA Container Toolkit %s installed, pinned%s" % (version, " and held" if params["hold"] else "")),
    }
    if want_diff:
        result["diff"] = diff(current, todo, version)
    return result


def with_runtime(packages, runtime):
    """The packages' result with the runtime's (``configure``'s) under ``runtime``.

    ``changed`` is either's, ``diff`` both lists, ``msg`` both lines; the runtime's own
    ``changed`` (what the restart handler reads) and every key it returns stay under
    ``runtime``. Its ``warnings`` move to the top, for ``module.warn``.
    """
    runtime = dict(runtime)
    result = dict(packages)
    result["warnings"] = list(packages.get("warnings") or []) + list(runtime.pop("warnings", None) or [])
    result["runtime"] = runtime
    result["changed"] = bool(packages["changed"] or runtime["changed"])
    result["msg"] = "%s; %s" % (packages["msg"], runtime["msg"])
    if "diff" in packages or "diff" in runtime:
        result["diff"] = list(packages.get("diff") or []) + list(runtime.get("diff") or [])
    return result
