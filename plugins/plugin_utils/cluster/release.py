# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The parts of a Helm release that every cluster role plans the same way.

The chart (from a repository, or a path on the control host), the release's name, namespace and
timeout, the images' registry and pull secrets, the values a site overrides, and the shape of a
plan (every part None when there are problems). Everything returned is deterministic (dicts built
in a fixed order, lists sorted, YAML dumped the same way each time) so that a second run hands
Helm the very same values and nothing changes.
"""

from __future__ import annotations

import base64
import json
import re

import yaml

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import plain
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.checks import (
    CHART_VERSION, DNS_SUBDOMAIN, check_duration, check_input, check_name, check_namespace, one_of, quoted, to_bool,
)

LABEL_POD_SECURITY = "pod-security.kubernetes.io/enforce"
POD_SECURITY_LEVELS = ("", "privileged", "baseline", "restricted")
NFD_IMAGE = "node-feature-discovery"
_REGISTRY = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*$")
_SECRET_NAME = "a secret name (expected lower-case alphanumerics, '-' and '.')"


def dump_yaml(data, sort_keys=False):
    """YAML text the same way every time: block style, keys in the order they were built (or
    sorted, for data whose order came from the user's inventory)."""
    return yaml.safe_dump(data, default_flow_style=False, sort_keys=sort_keys, width=1000)


def chart_repo_url(url):
    """Whether ``url`` is a whole chart repository URL (http, https or oci, printable ASCII, no whitespace)."""
    try:
        return bool(inputs.url(url, schemes=("http", "https", "oci")))
    except inputs.Invalid:
        return False


def chart(s, name, example, version_pattern=CHART_VERSION):
    """The chart: ``<prefix>_chart_path`` on the control host, else ``name`` at ``<prefix>_chart_version``
    from ``<prefix>_chart_repo_url`` (``example``: a version to name when it is not one)."""
    path = s.get("chart_path") or ""
    if path:
        check_input(path, s.prefix + "_chart_path", inputs.chart_path, s.problems)
        return {"ref": path, "check_values": True}
    version = s.get("chart_version")
    if not isinstance(version, str) or not version_pattern.fullmatch(version):
        s.problems.append("%s_chart_version: %s is not a chart version (expected e.g. %s)" % (s.prefix, quoted(version), example))
    url = s.get("chart_repo_url") or ""
    if not chart_repo_url(url):
        s.problems.append(
            "%s_chart_repo_url: %s is not a chart repository URL (expected http(s)://... or oci://..., "
            "or %s_chart_path for a chart on the control host)" % (s.prefix, quoted(url), s.prefix)
        )
    return {"ref": name, "repo_url": url, "version": version, "check_values": True}


def common(s):
    """The release's namespace, name and timeout, checked; the namespace's Pod Security level ('' when wrong)."""
    check_namespace(s.get("namespace"), s.prefix + "_namespace", s.problems)
    check_input(s.get("release_name"), s.prefix + "_release_name", inputs.release_name, s.problems)
    check_duration(s.get("wait_timeout"), s.prefix + "_wait_timeout", s.problems)
    level = s.get("namespace_pod_security") or ""
    if level not in POD_SECURITY_LEVELS:
        s.problems.append(
            "%s_namespace_pod_security: %s is not a Pod Security level (expected %s)"
            % (s.prefix, quoted(level), one_of(POD_SECURITY_LEVELS))
        )
        level = ""
    return level


def namespace_object(name, pod_security):
    meta = {"name": name}
    if pod_security:
        meta["labels"] = {LABEL_POD_SECURITY: pod_security}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def image_registry(s):
    """``<prefix>_image_registry``, the mirror's prefix, checked ('' when wrong)."""
    registry = s.get("image_registry") or ""
    if registry and (not isinstance(registry, str) or not _REGISTRY.fullmatch(registry)):
        s.problems.append(
            "%s_image_registry: %s is not a registry prefix (expected host[:port][/path] without a scheme, "
            "e.g. registry.example.com:5000/nvidia)" % (s.prefix, quoted(registry))
        )
        return ""
    return registry


def pull_secrets(s):
    """Names of the image pull secrets: the listed ones plus the one the role creates."""
    var = s.prefix + "_image_pull_secrets"
    listed = s.get("image_pull_secrets") or []
    if isinstance(listed, str) or not isinstance(listed, (list, tuple)):
        s.problems.append("%s: %s is not a list of secret names (expected e.g. [nvcr-pull])" % (var, quoted(listed)))
        listed = []
    names = [name for name in listed if check_name(name, var, DNS_SUBDOMAIN, _SECRET_NAME, s.problems)]
    secret = registry_secret(s)
    if secret and secret not in names:
        names.append(secret)
    return names


def set_image(values, registry, image, repository="", secrets=()):
    """A chart's ``image.repository`` (``repository``, else ``image`` under the mirror's ``registry``)
    and its ``imagePullSecrets``, each where there is one."""
    repository = repository or (registry + "/" + image if registry else "")
    if repository:
        values["image"] = {"repository": repository}
    if secrets:
        values["imagePullSecrets"] = [{"name": n} for n in secrets]


def registry_secret(s):
    """The name of the pull secret the role creates from the registry credentials, or ''."""
    prefix = s.prefix
    server = s.get("registry_server") or ""
    username = s.get("registry_username") or ""
    password_set = to_bool(s.get("registry_password_set", False), prefix + "_registry_password", s.problems)
    given = [n for n, v in (("server", server), ("username", username), ("password", password_set)) if v]
    if not given:
        return ""
    missing = [n for n in ("server", "username", "password") if n not in given]
    if missing:
        s.problems.append(
            "%s_registry_%s: not set, but %s are (expected all of %s_registry_server, _username and "
            "_password for a pull secret, or none)"
            % (prefix, missing[0], ", ".join("%s_registry_%s" % (prefix, n) for n in given), prefix)
        )
        return ""
    if not isinstance(server, str) or "://" in server or "/" in server:
        s.problems.append(
            "%s_registry_server: %s is not a registry host (expected host[:port], e.g. registry.example.com:5000)"
            % (prefix, quoted(server))
        )
    name = s.get("registry_secret_name") or ""
    if not check_name(name, prefix + "_registry_secret_name", DNS_SUBDOMAIN, _SECRET_NAME, s.problems):
        return ""
    return name


def image_pull_secret(credentials, name, namespace):
    """A ``kubernetes.io/dockerconfigjson`` Secret for one registry. ``credentials`` holds
    ``server``, ``username`` and ``password``; the password is never part of an error message."""
    credentials = plain(credentials or {})
    missing = [k for k in ("server", "username", "password") if not credentials.get(k)]
    if missing:
        raise ValueError("registry credentials lack %s" % ", ".join(missing))
    user = str(credentials["username"])
    password = str(credentials["password"])
    auth = base64.b64encode(("%s:%s" % (user, password)).encode("utf-8")).decode("ascii")
    config = {"auths": {str(credentials["server"]): {"username": user, "password": password, "auth": auth}}}
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "gpufleet.nvidia"}},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(text.encode("utf-8")).decode("ascii")},
    }


def _paths(data, prefix=""):
    for key, value in data.items():
        path = "%s.%s" % (prefix, key) if prefix else str(key)
        yield path
        if isinstance(value, dict):
            yield from _paths(value, path)


def set_path(data, dotted, value):
    parts = dotted.split(".")
    for part in parts[:-1]:
        data = data.setdefault(part, {})
    data[parts[-1]] = value


def overrides(s, derived):
    """``<prefix>_values_overrides``, the chart values a site sets over the role's: a problem for each
    that would undo a value the role derives (``derived``: value paths); {} when it is not a mapping."""
    var = s.prefix + "_values_overrides"
    found = s.get("values_overrides") or {}
    if not isinstance(found, dict):
        s.problems.append("%s: %s is not a mapping of chart values (expected a dict)" % (var, quoted(found)))
        return {}
    reported = []
    for path in _paths(found):
        if any(path.startswith(r + ".") for r in reported):
            continue
        if any(path == owned or path.startswith(owned + ".") for owned in derived):
            reported.append(path)
            s.problems.append(
                "%s.%s: the role sets this value from the inventory; remove it from %s (see the "
                "role's README for the variable that drives it)" % (var, path, var)
            )
    return found


def result(problems, **parts):
    """A plan: its ``problems`` and its parts, every part None when there are problems."""
    found = {"problems": problems}
    if problems:
        for key in parts:
            parts[key] = None
    found.update(parts)
    return found
