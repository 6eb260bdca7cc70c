# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of gpufleet.nvidia.kube_client_info: can this control host talk to a cluster?

kubernetes.core's modules run in the Python that runs Ansible, on the control host. Whether the
Python kubernetes client imports there, whether kubernetes.core is installed, and whether the
kubeconfig exists are all questions about this very process, answered in it: no module is
started for them.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.common import argspec

ARGUMENT_SPEC = argspec.from_stub(__file__)  # the options documented in plugins/modules/kube_client_info.py
K8S_INFO = "ansible_collections.kubernetes.core.plugins.modules.k8s_info"


def client_version():
    """The kubernetes client's version, or None when Python cannot find it.

    Found, not imported: importing the client costs the control host about half a second of CPU
    per run, and the k8s modules that use it import it themselves (and say so if it is broken).
    """
    try:
        if importlib.util.find_spec("kubernetes") is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        return importlib.metadata.version("kubernetes")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def collection_path():
    """Where kubernetes.core is (its root), or None; found by Ansible's own collection loader."""
    try:
        spec = importlib.util.find_spec(K8S_INFO)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return os.path.dirname(os.path.dirname(os.path.dirname(spec.origin)))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # no longer has any effect
        try:
            dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        except AnsibleActionFail as exc:
            result.update(failed=True, msg=str(exc))
            return result
        path = os.path.expanduser(args["kubeconfig"])
        version = client_version()
        result.update(
            changed=False,
            client=version is not None,
            client_version=version,
            collection=collection_path(),
            kubeconfig={"path": path, "exists": os.path.isfile(path)},
            in_cluster=bool(os.environ.get("KUBERNETES_SERVICE_HOST")),
        )
        return result
