# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One Helm release as a checked change: the helm CLI, read and driven from the control host.

:class:`Helm` runs the ``helm`` binary (Helm 3 or Helm 4; their flags differ where they are
named here) through a ``run(argv) -> (rc, stdout, stderr)`` callable, so the tests can hand it
a real binary or a fake. :func:`check` reads everything a change needs before it is made (the
binary and its major version, the chart version in its repository or path, the values rendered
by ``helm template``, the release's status and values in the cluster) and decides the action;
:func:`apply` makes it and requires the release to end ``deployed`` with the desired chart and
values. A release that is not deployed (a failed hook, an interrupted upgrade) is never taken
for "no change": a ``failed`` one is upgraded again (repaired), a ``pending-*`` one is refused
with the command that clears it.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.gpufleet.nvidia.plugins.module_utils.cluster import chart_values
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

try:
    import yaml
except ImportError:  # pragma: no cover - ansible-core requires PyYAML on the controller
    yaml = None

SUPPORTED_MAJORS = (3, 4)
DEPLOYED = "deployed"
REPAIRABLE = ("failed", "superseded", "uninstalled")
PENDING = ("pending-install", "pending-upgrade", "pending-rollback", "uninstalling")

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


class HelmError(GpuFleetError):
    """helm answered with an error; ``stderr`` is its own words."""


def _last_lines(text, count=8):
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return "\n".join(lines[-count:])


def same_chart_version(a, b):
    """``v25.10.0`` and ``25.10.0`` name the same chart version."""
    return str(a or "").lstrip("v") == str(b or "").lstrip("v")


def normalised(values):
    """Values as Helm stores them: JSON types, no ``None`` maps told apart from missing ones."""
    return json.loads(json.dumps(values or {}, sort_keys=True))


class Helm(object):
    """The helm CLI for one kubeconfig and context."""

    def __init__(self, run, binary="helm", kubeconfig="", context=""):
        self._run = run
        self.binary = binary or "helm"
        self.kubeconfig = kubeconfig or ""
        self.context = context or ""
        self.major = None
        self.version_text = None

    # --- the binary ----------------------------------------------------------------------------
    def _call(self, args, what, cluster=False):
        argv = [self.binary] + list(args)
        if cluster:
            if self.kubeconfig:
                argv += ["--kubeconfig", self.kubeconfig]
            if self.context:
                argv += ["--kube-context", self.context]
        try:
            rc, out, err = self._run(argv)
        except OSError as exc:
            raise HelmError(
                "helm: cannot run %s (%s): install Helm 3 or 4 on the control host, or set the role's "
                "_helm_binary to its path" % (self.binary, exc), argv=argv
            )
        if rc != 0:
            raise HelmError("helm: %s failed (rc %s): %s" % (what, rc, _last_lines(err or out)), argv=argv, rc=rc, stderr=err)
        return out

    def version(self):
        """The major version (3 or 4); anything else is refused by name."""
        out = self._call(["version", "--template", "{{.Version}}"], "reading its version")
        text = out.strip()
        match = _VERSION.match(text)
        if not match:
            raise HelmError("helm: %s answered version %r, which is not a Helm version" % (self.binary, text))
        major = int(match.group(1))
        if major not in SUPPORTED_MAJORS:
            raise HelmError(
                "helm: %s is Helm %s (%s); the collection drives Helm %s" % (
                    self.binary, major, text, " and ".join(str(m) for m in SUPPORTED_MAJORS))
            )
        self.major = major
        self.version_text = text
        return major

    # --- the chart -----------------------------------------------------------------------------
    @staticmethod
    def chart_args(chart):
        """``[ref]`` plus ``--repo`` / ``--version`` for a chart of a repository."""
        args = [chart["ref"]]
        if chart.get("repo_url"):
            args += ["--repo", chart["repo_url"]]
        if chart.get("version"):
            args += ["--version", chart["version"]]
        return args

    def show_chart(self, chart):
        """The chart's Chart.yaml: proves that the version exists where the plan says."""
        out = self._call(["show", "chart"] + self.chart_args(chart), "finding chart %s" % describe_chart(chart))
        try:
            meta = yaml.safe_load(out) if yaml is not None else None
        except yaml.YAMLError:
            meta = None
        if not isinstance(meta, dict) or "version" not in meta:
            raise HelmError("helm: show chart for %s answered no Chart.yaml: %s" % (describe_chart(chart), _last_lines(out)))
        return meta

    def show_values(self, chart):
        """The chart's defaults (its values.yaml): every value it declares."""
        out = self._call(["show", "values"] + self.chart_args(chart), "reading the values of chart %s" % describe_chart(chart))
        return _yaml_docs(out, "values of chart %s" % describe_chart(chart))[0] or {}

    def show_crds(self, chart):
        """The chart's CRDs (its crds/ folder): Helm installs them on a first install only."""
        out = self._call(["show", "crds"] + self.chart_args(chart), "reading the CRDs of chart %s" % describe_chart(chart))
        return [d for d in _yaml_docs(out, "CRDs of chart %s" % describe_chart(chart)) if isinstance(d, dict)]

    def template(self, release, namespace, chart, values_file, capabilities=None):
        """The manifests the values render to (client side), with the cluster's capabilities
        (``{kube_version, api_versions}``, see :func:`capabilities`): without them helm renders
        for its own built-in ones, and a chart that checks for an API (the GPU Operator's check
        for Dynamic Resource Allocation) fails on a cluster that serves it."""
        args = ["template", release] + self.chart_args(chart) + ["--namespace", namespace, "--values", values_file]
        capabilities = capabilities or {}
        if capabilities.get("kube_version"):
            args += ["--kube-version", capabilities["kube_version"]]
        if capabilities.get("api_versions"):
            args += ["--api-versions", ",".join(capabilities["api_versions"])]
        return self._call(args, "rendering %s with the planned values" % describe_chart(chart))

    # --- the release ---------------------------------------------------------------------------
    def status(self, release, namespace):
        """The release as ``helm status -o json`` shows it, or None when there is none."""
        try:
            out = self._call(["status", release, "--namespace", namespace, "--output", "json"], "reading release %s" % release, cluster=True)
        except HelmError as exc:
            if re.search(r"release: not found", str(exc.details.get("stderr") or "")):
                return None
            raise
        return _json(out, "status of release %s" % release)

    def _get(self, kind, release, namespace, words):
        """``helm get KIND RELEASE -o json`` as data (``{}`` for an empty answer)."""
        out = self._call(["get", kind, release, "--namespace", namespace, "--output", "json"],
                         "reading the %s of release %s" % (words, release), cluster=True)
        return _json(out, "%s of release %s" % (kind, release)) or {}

    def metadata(self, release, namespace):
        """The release's chart and version (``helm get metadata -o json``): ``helm status -o json``
        names no chart in Helm 3.18 or 4.1 (its keys: name, info, config, manifest, version,
        namespace, and Helm 4's apply_method)."""
        return self._get("metadata", release, namespace, "chart")

    def values(self, release, namespace):
        """The values the release was given (``helm get values``: user-supplied only)."""
        return self._get("values", release, namespace, "values")

    def upgrade(self, release, namespace, chart, values_file, wait, timeout):
        args = ["upgrade", release] + self.chart_args(chart) + [
            "--install", "--namespace", namespace, "--values", values_file, "--reset-values", "--timeout", timeout]
        if wait:
            # Helm 4 waits with a strategy (watcher: kstatus); Helm 3's --wait is a switch.
            args += ["--wait=watcher"] if self.major == 4 else ["--wait"]
        return self._call(args, "upgrading release %s to %s" % (release, describe_chart(chart)), cluster=True)


def _json(text, what):
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        raise HelmError("helm: the %s is not JSON: %s" % (what, _last_lines(text, 3)))


def _yaml_docs(text, what):
    try:
        docs = list(yaml.safe_load_all(text)) if text.strip() else []
    except yaml.YAMLError as exc:
        raise HelmError("helm: the %s is not YAML (%s)" % (what, str(exc).splitlines()[0]))
    return docs or [None]


def capabilities(kube_version, apis):
    """What the cluster serves, as ``helm template`` takes it: the API server's version and each
    ``group/version`` and ``group/version/Kind`` of ``apis`` (kubernetes.core.k8s_cluster_info's
    ``apis``: ``{group/version: {Kind: ...}}``), the two forms helm's own install reads from the
    cluster's discovery."""
    versions = set()
    for group_version, kinds in (apis or {}).items():
        versions.add(group_version)
        versions.update("%s/%s" % (group_version, kind) for kind in (kinds or {}) if isinstance(kind, str))
    return {"kube_version": kube_version or "", "api_versions": sorted(versions)}


def describe_chart(chart):
    if chart.get("repo_url"):
        return "%s %s from %s" % (chart["ref"], chart.get("version") or "(latest)", chart["repo_url"])
    return chart["ref"]


# --- The decision -------------------------------------------------------------------------------
def release_state(status, metadata, deployed_values):
    """What the cluster holds: status, revision, chart version and values (None: no release).

    ``status`` is ``helm status -o json`` (its ``info`` and ``version``, the revision),
    ``metadata`` is ``helm get metadata -o json`` (``chart``, ``version``: the chart's)."""
    if status is None:
        return None
    info = status.get("info") or {}
    meta = metadata or {}
    return {
        "status": info.get("status") or "unknown",
        "revision": status.get("version"),
        "chart": meta.get("chart"),
        "chart_version": meta.get("version"),
        "description": info.get("description") or "",
        "values": normalised(deployed_values),
    }


def decide(current, chart_version, values, name):
    """``(action, reason)``: install, upgrade, repair, or none; a pending release is refused."""
    if current is None:
        return "install", "release %s is not installed" % name
    status = current["status"]
    if status in PENDING:
        raise GpuFleetError(
            "helm: release %s is %s at revision %s (%s): an operation is running or was interrupted; nothing was "
            "changed. When no helm command is running on it, roll it back to its last deployed revision "
            "(helm history %s, then helm rollback %s REVISION) and run again"
            % (name, status, current["revision"], current["description"] or "no description", name, name),
            release=current,
        )
    if status != DEPLOYED:
        return "repair", "release %s is %s at revision %s (%s), not deployed" % (
            name, status, current["revision"], current["description"] or "no description")
    changes = []
    if chart_version is not None and not same_chart_version(current["chart_version"], chart_version):
        changes.append("chart %s -> %s" % (current["chart_version"], chart_version))
    if current["values"] != normalised(values):
        changes.append("values differ")
    if changes:
        return "upgrade", "release %s: %s" % (name, ", ".join(changes))
    return "none", "release %s is deployed with chart %s and the planned values" % (name, current["chart_version"])


def _line(version):
    match = _VERSION.match(str(version or ""))
    return "%s.%s" % match.groups()[:2] if match else None


def check_release_line(lines, current, planned, name):
    """Refuse an upgrade that skips a release line, or goes back to an older one.

    ``lines`` is the upgrade order, ``[{line, newest}]`` (empty: no rule). A new install, the same
    line and the next line pass; otherwise the message gives the path, one release per line."""
    if not lines or current is None or not current.get("chart_version") or not planned:
        return
    order = [entry["line"] for entry in lines]
    newest = dict((entry["line"], entry["newest"]) for entry in lines)
    have, want = _line(current["chart_version"]), _line(planned)
    if have == want:
        return
    where = "helm: release %s has chart %s (release line %s), the plan %s (line %s)" % (
        name, current["chart_version"], have, planned, want)
    if have not in order or want not in order:
        stranger = have if have not in order else want
        raise GpuFleetError("%s: %s is not one of the release lines %s; nothing was changed (expected an upgrade along "
                            "NVIDIA's documented path to one of them first)" % (where, stranger, ", ".join(order)))
    i, j = order.index(have), order.index(want)
    if j < i:
        raise GpuFleetError("%s: that goes back to an older release line, which the chart's upgrades do not support; nothing "
                            "was changed (expected %s or later; to go back, uninstall the release first)" % (where, newest[have]))
    if j - i > 1:
        path = [newest[line] for line in order[i + 1:j]] + [planned]
        raise GpuFleetError(
            "%s: upgrades go one release line at a time (%s); nothing was changed (expected the chart version %s first: "
            "run with it, then %s)" % (where, " -> ".join(order[i:j + 1]), path[0], " -> ".join(path[1:])),
            path=path)


def check_values(helm, chart, values, crd_name, chart_meta):
    """Refuse values the chart release does not know (see chart_values); return the chart's CRDs."""
    crds = helm.show_crds(chart)
    subcharts = [d.get("alias") or d.get("name") for d in chart_meta.get("dependencies") or [] if isinstance(d, dict)]
    found = chart_values.problems(values, helm.show_values(chart), chart_values.crd_spec_schema(crds, crd_name), subcharts)
    if found:
        raise GpuFleetError(chart_values.describe(found, "%s %s" % (chart_meta.get("name"), chart_meta.get("version"))),
                            values=["%s: %s" % item for item in found])
    return crds


def values_diff(current, values, chart_version):
    """Diff mode's before / after: the deployed release's chart and values against the plan."""
    def text(version, vals):
        return yaml.safe_dump({"chart_version": version, "values": vals}, default_flow_style=False, sort_keys=True)

    before = "" if current is None else text(current["chart_version"], current["values"])
    return {"before": before, "after": text(chart_version, normalised(values)),
            "before_header": "release (deployed)", "after_header": "release (planned)"}


# --- Check and apply ------------------------------------------------------------------------------
def check(helm, params, values_file):
    """Everything that can be known before the change, and the action it needs."""
    chart = params["chart"]
    helm.version()
    meta = helm.show_chart(chart)
    if chart.get("version") and not same_chart_version(meta.get("version"), chart["version"]):
        # Helm 4 falls back to the "closest available version" when the exact one is missing.
        raise HelmError(
            "helm: chart %s: the repository has no version %s (helm resolved it to %s); nothing was changed"
            % (chart["ref"], chart["version"], meta.get("version")))
    crds = check_values(helm, chart, params["values"], params["values_crd"], meta) if params.get("check_values") else None
    manifest = helm.template(params["name"], params["namespace"], chart, values_file, params.get("capabilities"))
    current = read_release(helm, params["name"], params["namespace"])
    version = chart.get("version") or meta.get("version")
    check_release_line(params.get("release_lines"), current, version, params["name"])
    action, reason = decide(current, version, params["values"], params["name"])
    return {
        "crds": [(c.get("metadata") or {}).get("name") for c in crds] if crds is not None else None,
        "helm_version": helm.version_text,
        "chart": {"name": meta.get("name"), "version": meta.get("version"), "ref": chart["ref"]},
        "rendered_objects": len([d for d in re.split(r"^---\s*$", manifest, flags=re.M) if re.search(r"^kind:", d, re.M)]),
        "release": current,
        "action": action,
        "reason": reason,
        "changed": action != "none",
        "diff": values_diff(current, params["values"], version),
    }


def apply(helm, params, values_file, checked):
    """Make the checked change; the release must end deployed with the planned chart and values."""
    name, namespace = params["name"], params["namespace"]
    if checked["action"] == "none":
        return dict(checked, msg=checked["reason"])
    try:
        helm.upgrade(name, namespace, params["chart"], values_file, params["wait"], params["wait_timeout"])
    except HelmError as exc:
        after = _state_after(helm, name, namespace)
        raise HelmError(
            "%s. The release is now %s; nothing reports it as done: the next run %s it" % (
                exc.msg, _say(after), "upgrades (repairs)" if after is None or after["status"] in REPAIRABLE + (DEPLOYED,) else "refuses"),
            release=after, action=checked["action"],
        )
    after = _state_after(helm, name, namespace)
    version = checked["chart"]["version"]
    if after is None or after["status"] != DEPLOYED or not same_chart_version(after["chart_version"], version) \
            or after["values"] != normalised(params["values"]):
        raise HelmError(
            "helm: release %s is %s after the %s, not deployed with chart %s and the planned values"
            % (name, _say(after), checked["action"], version), release=after, action=checked["action"])
    return dict(checked, release=after, msg="%s: %s; now %s" % (checked["action"], checked["reason"], _say(after)))


def read_release(helm, name, namespace):
    """The release's state with its values, or None when it is not installed."""
    status = helm.status(name, namespace)
    if status is None:
        return None
    return release_state(status, helm.metadata(name, namespace), helm.values(name, namespace))


def _state_after(helm, name, namespace):
    try:
        return read_release(helm, name, namespace)
    except HelmError:
        return None


def _say(state):
    if state is None:
        return "not readable or not installed"
    return "%s at revision %s with chart %s" % (state["status"], state["revision"], state["chart_version"])


def write_values(tmpdir, values):
    """The values as a file helm reads (JSON is YAML), private to the run."""
    path = os.path.join(tmpdir, "gpufleet-values.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(values, f, sort_keys=True)
    return path
