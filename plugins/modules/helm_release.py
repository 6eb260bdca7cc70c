#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: helm_release
short_description: Check, install or upgrade one Helm release as a checked change
version_added: 0.2.0
author:
  - gpufleet.nvidia maintainers (@gpufleet)
description:
  - "Drives the C(helm) CLI on the control host (run it with C(delegate_to: localhost)). Helm 3 and
    Helm 4 are both supported; their flags differ where the module uses them (C(--wait) takes a
    strategy in Helm 4). Any other major version is refused by name."
  - "Before any change, it checks everything that can be known: the helm binary and its version,
    that the chart version exists in the repository or path (C(helm show chart); a chart that Helm 4
    resolves to a different version is refused), that the values render (C(helm template), client
    side), and the release's status and values in the cluster (C(helm status), C(helm get values)),
    which also proves the kubeconfig, context and connection."
  - "The release is changed when it is not installed, when its chart version or values differ from
    the planned ones, or when it is not V(deployed): a V(failed) release (a hook that timed out, an
    upgrade that failed) is upgraded again, so the next run repairs it. A V(pending-install),
    V(pending-upgrade) or V(pending-rollback) release is refused with the commands that clear it."
  - After C(helm upgrade --install), the release must be V(deployed) with the planned chart version
    and values, or the task fails (also when helm itself failed), saying the release's state.
  - "With O(check_values), the values are checked against what the chosen chart release declares
    before anything else: its defaults (C(helm show values)), the schema of the custom resource its
    values become (O(values_crd), from C(helm show crds): names, types and enums), and its
    subcharts (whose values are theirs). A value the release does not know, or one its schema
    refuses, is refused by name. Helm itself passes such a value to the templates, which ignore it."
  - With O(release_lines), an installed release may move to the next release line at most; a
    skipped line is refused with the releases to take, and an older line is refused.
  - With O(state=crds), only C(helm show crds) runs and the chart's CRDs are returned as O(ignore:crd_objects),
    for the caller to apply before the release (Helm installs CRDs on a first install and never upgrades them).
  - With O(state=checked), only the checks run and nothing changes; the result says what O(state=present)
    would do. In check mode, O(state=present) does the same; in diff mode, the diff is the deployed
    release's chart version and values against the planned ones.
options:
  state:
    description:
      - V(present) installs, upgrades or repairs; V(checked) only checks and reports the action.
      - V(crds) returns the chart's CRDs (C(helm show crds)) and checks nothing else.
    type: str
    choices: [present, checked, crds]
    default: present
  name:
    description:
      - The release name, as Helm takes it (lower-case letters, digits, C(-) and C(.), at most 53 characters).
    type: str
    required: true
  namespace:
    description: The release's namespace (it must exist; the roles create it before the chart).
    type: str
    required: true
  chart_ref:
    description:
      - The chart's name in O(chart_repo_url), or a path to a chart directory or C(.tgz) on the control host.
      - Printable ASCII without spaces, not starting with C(-) (Helm would read it as an option).
    type: str
    required: true
  chart_repo_url:
    description: The chart repository (C(https://...)); empty for a chart path.
    type: str
    default: ""
  chart_version:
    description: The chart version, required with O(chart_repo_url); empty for a chart path, whose own version is used.
    type: str
    default: ""
  values:
    description: The release's values, all of them; values not given are reset to the chart's defaults.
    type: dict
    default: {}
  wait:
    description: Wait until the release's resources are ready (C(--wait); Helm 4 C(--wait=watcher)).
    type: bool
    default: true
  wait_timeout:
    description: How long helm waits (a duration, e.g. V(15m)).
    type: str
    default: 15m
  check_values:
    description: Refuse values the chart release does not declare, or that its schema refuses (see above).
    type: bool
    default: false
  values_crd:
    description:
      - The CRD (by name) whose C(spec) schema also names and types the chart's values, for O(check_values);
        V(clusterpolicies.nvidia.com) for the gpu-operator chart. Empty for none.
    type: str
    default: ""
  release_lines:
    description:
      - The chart's release lines in upgrade order, each V({line, newest}) (C(26.3), C(v26.3.3)); empty for no rule.
    type: list
    elements: dict
    default: []
  kube_version:
    description:
      - The API server's version (C(v1.36.2)), for C(helm template --kube-version); empty for helm's built-in one.
      - The cluster check reads it with M(kubernetes.core.k8s_cluster_info), so a chart's C(kubeVersion) and its
        own checks see the cluster's.
    type: str
    default: ""
  apis:
    description:
      - The APIs the cluster serves, as M(kubernetes.core.k8s_cluster_info) returns them (its C(apis)); each
        C(group/version) and C(group/version/Kind) is given to C(helm template --api-versions). Empty for helm's
        built-in ones.
    type: dict
    default: {}
  binary_path:
    description: The helm binary; empty for C(helm) on PATH.
    type: path
  kubeconfig:
    description: The kubeconfig file; empty for helm's default (C(KUBECONFIG) or C(~/.kube/config)).
    type: path
  context:
    description: The kubeconfig context; empty for its current context.
    type: str
    default: ""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying the release.
    support: full
  diff_mode:
    description: Returns the deployed release's chart version and values against the planned ones.
    support: full
notes:
  - The values are written to a private file in the module's temporary directory for helm to read.
seealso:
  - module: kubernetes.core.helm
"""

EXAMPLES = r"""
- name: Check the GPU Operator release before any layer changes anything
  gpufleet.nvidia.helm_release:
    state: checked
    name: gpu-operator
    namespace: gpu-operator
    chart_ref: gpu-operator
    chart_repo_url: https://helm.ngc.nvidia.com/nvidia
    chart_version: v26.7.0
    values: {driver: {enabled: false}, toolkit: {enabled: false}}
  delegate_to: localhost
  register: checked

- name: Install, upgrade or repair it
  gpufleet.nvidia.helm_release:
    name: gpu-operator
    namespace: gpu-operator
    chart_ref: gpu-operator
    chart_repo_url: https://helm.ngc.nvidia.com/nvidia
    chart_version: v26.7.0
    values: {driver: {enabled: false}, toolkit: {enabled: false}}
    wait_timeout: 15m
  delegate_to: localhost
"""

RETURN = r"""
helm_version:
  description: The version of the helm binary.
  returned: always
  type: str
  sample: v3.18.0
chart:
  description: The chart as C(helm show chart) found it.
  returned: when O(state) is not V(crds)
  type: dict
  sample: {name: gpu-operator, version: v26.7.0, ref: gpu-operator}
rendered_objects:
  description: How many objects the planned values render to.
  returned: when O(state) is not V(crds)
  type: int
  sample: 41
release:
  description: The release in the cluster (after the change with O(state=present)); null when not installed.
  returned: when O(state) is not V(crds)
  type: dict
  sample: {status: deployed, revision: 3, chart: gpu-operator, chart_version: v26.7.0, description: Upgrade complete, values: {}}
action:
  description: V(install), V(upgrade), V(repair) (a release that is not deployed) or V(none).
  returned: when O(state) is not V(crds)
  type: str
  sample: upgrade
reason:
  description: Why, in words.
  returned: when O(state) is not V(crds)
  type: str
  sample: "release gpu-operator: values differ"
crds:
  description: The names of the chart's CRDs, with O(check_values); null otherwise.
  returned: when O(state) is not V(crds)
  type: list
  elements: str
  sample: [clusterpolicies.nvidia.com, nvidiadrivers.nvidia.com]
crd_objects:
  description: The chart's CRDs, whole, with O(state=crds).
  returned: when O(state=crds)
  type: list
  elements: dict
  sample: [{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: clusterpolicies.nvidia.com}}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils.cluster import helm as helm_cli
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


def _params(module):
    p = inputs.check("helm_release", {"name": inputs.release_name, "chart_ref": inputs.chart_ref}, module.params)
    if p["chart_repo_url"] and not p["chart_version"]:
        raise GpuFleetError("helm_release: chart_version is required with chart_repo_url %r (expected e.g. v26.7.0)" % p["chart_repo_url"])
    chart = {"ref": p["chart_ref"]}
    if p["chart_repo_url"]:
        chart.update(repo_url=p["chart_repo_url"], version=p["chart_version"])
    return {"name": p["name"], "namespace": p["namespace"], "chart": chart, "values": p["values"] or {},
            "wait": p["wait"], "wait_timeout": p["wait_timeout"], "check_values": p["check_values"],
            "values_crd": p["values_crd"], "release_lines": p["release_lines"] or [],
            "capabilities": helm_cli.capabilities(p["kube_version"], p["apis"])}


def run(module):
    params = _params(module)
    helm = helm_cli.Helm(lambda argv: module.run_command(argv, handle_exceptions=False),
                         module.params["binary_path"], module.params["kubeconfig"], module.params["context"])
    if module.params["state"] == "crds":
        helm.version()
        return {"changed": False, "helm_version": helm.version_text, "crd_objects": helm.show_crds(params["chart"])}
    values_file = helm_cli.write_values(module.tmpdir, params["values"])
    checked = helm_cli.check(helm, params, values_file)
    if module.params["state"] == "checked" or module.check_mode:
        result = dict(checked, msg=checked["reason"])
    else:
        result = helm_cli.apply(helm, params, values_file, checked)
    if not module._diff:
        result.pop("diff")
    if module.params["state"] == "checked":
        result["changed"] = False
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "checked", "crds"], default="present"),
            name=dict(type="str", required=True),
            namespace=dict(type="str", required=True),
            chart_ref=dict(type="str", required=True),
            chart_repo_url=dict(type="str", default=""),
            chart_version=dict(type="str", default=""),
            values=dict(type="dict", default={}),
            wait=dict(type="bool", default=True),
            wait_timeout=dict(type="str", default="15m"),
            check_values=dict(type="bool", default=False),
            values_crd=dict(type="str", default=""),
            release_lines=dict(type="list", elements="dict", default=[]),
            kube_version=dict(type="str", default=""),
            apis=dict(type="dict", default={}),
            binary_path=dict(type="path"),
            kubeconfig=dict(type="path"),
            context=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except GpuFleetError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
