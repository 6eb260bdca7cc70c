# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes API as the drain (``upgrade.drain``) calls it, on the control host.

:func:`api_client` is kubernetes.core's client (``get_api_client``, as kubernetes.core's own
``k8s_drain`` takes it), so the cluster is found as every kubernetes.core task finds it;
:class:`KubeApi` is a thin layer over the Python kubernetes client's ``CoreV1Api`` and
``PolicyV1Api`` on it that hands back plain dicts (the API's JSON, not the client's models, so
that both the classic and the pydantic generations of the client work the same) and turns errors
into :class:`GpuFleetError`.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import threading

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

try:  # kubernetes.core is galaxy.yml's dependency; without it, api_client says what to install
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
except ImportError:
    get_api_client = CoreException = None

_PATCH_TYPE = "application/strategic-merge-patch+json"


def first_line(text):
    return str(text).strip().splitlines()[0] if str(text).strip() else ""


def api_client(kubeconfig=None, context=None, request_timeout=30):
    """The ApiClient of kubernetes.core's client for the cluster, found as every kubernetes.core
    module finds it: ``kubeconfig`` (a path, or the kubeconfig as a dict) and ``context``, else the
    ``K8S_AUTH_*`` variables, else the pod's service account in the cluster, else ``KUBECONFIG`` or
    ``~/.kube/config``.

    kubernetes.core reads the API's discovery when it makes the client (``/version`` and ``/apis``,
    then cached in the temporary folder), without a timeout of its own: a cluster that does not
    answer within ``request_timeout`` seconds is refused here.
    """
    _require_client()
    found = {}
    worker = threading.Thread(target=_connect, args=(found, kubeconfig, context), daemon=True)
    worker.start()
    worker.join(request_timeout)
    if worker.is_alive():
        raise GpuFleetError("gpu_drain: connect: the cluster at %s does not answer within %d s" % (_server(), request_timeout))
    if "error" in found:
        raise _client_error(found["error"], kubeconfig, context)
    return found["client"].client.client


def _connect(found, kubeconfig, context):
    """kubernetes.core's client into ``found['client']``, or what it raised into ``found['error']``."""
    try:
        found["client"] = get_api_client(kubeconfig=kubeconfig, context=context)
    except Exception as exc:  # pylint: disable=broad-except
        found["error"] = exc


def _require_client():
    """Refuse, saying what to install, when the Python kubernetes client or kubernetes.core is missing."""
    try:
        import kubernetes  # pylint: disable=import-outside-toplevel,unused-import  # noqa: F401
    except ImportError as exc:
        raise GpuFleetError(
            "gpu_drain: the Python kubernetes client is not installed in %s on the control host (%s); "
            "install it there (pip install kubernetes)" % (sys.executable, exc)
        ) from exc
    if get_api_client is None:
        raise GpuFleetError("gpu_drain: the kubernetes.core collection is not installed on the control host "
                            "(ansible-galaxy collection install kubernetes.core)")


def _server():
    """The API server the client was configured for (kubernetes.core loads it as the default)."""
    from kubernetes import client  # pylint: disable=import-outside-toplevel

    return client.Configuration.get_default_copy().host


def _client_error(exc, kubeconfig, context):
    """The refusal of a client kubernetes.core could not make: no kubeconfig, one it cannot use, no answer."""
    if not isinstance(exc, CoreException):
        status = getattr(exc, "status", None)
        how = "answered %s %s" % (status, getattr(exc, "reason", None) or "") if status else "does not answer"
        return GpuFleetError("gpu_drain: connect: the cluster at %s %s: %s" % (_server(), how, first_line(exc)))
    if isinstance(kubeconfig, dict):
        return GpuFleetError("gpu_drain: kubeconfig: the kubeconfig given as a dict cannot be used: %s" % first_line(exc))
    path, where = _kubeconfig_path(kubeconfig)
    if not os.path.exists(path):
        return GpuFleetError(
            "gpu_drain: no kubeconfig: %s (%s) does not exist; set kubeconfig (gpufleet_kubeconfig), "
            "K8S_AUTH_KUBECONFIG or KUBECONFIG to the cluster's kubeconfig" % (path, where),
            kubeconfig=path,
        )
    context = context or os.environ.get("K8S_AUTH_CONTEXT")
    return GpuFleetError(
        "gpu_drain: the kubeconfig %s cannot be used%s: %s"
        % (path, " with context '%s'" % context if context else "", first_line(exc)),
        kubeconfig=path,
    )


def _kubeconfig_path(kubeconfig):
    """``(path, where it came from)`` of the kubeconfig file kubernetes.core read, for a refusal."""
    if kubeconfig:
        return os.path.expanduser(kubeconfig), "kubeconfig"
    if os.environ.get("K8S_AUTH_KUBECONFIG"):
        return os.path.expanduser(os.environ["K8S_AUTH_KUBECONFIG"]), "K8S_AUTH_KUBECONFIG"
    if os.environ.get("KUBECONFIG"):
        return os.path.expanduser(os.environ["KUBECONFIG"].split(os.pathsep)[0]), "KUBECONFIG"
    return os.path.expanduser("~/.kube/config"), "the default kubeconfig"


def _error_body(exc):
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        return json.loads(body) if body else {}
    except ValueError:
        return {"message": body}


class KubeApi(object):
    """The few calls the drain makes, answering plain dicts; errors become :class:`GpuFleetError`."""

    def __init__(self, client_api, request_timeout=30):
        from kubernetes import client  # pylint: disable=import-outside-toplevel
        from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel

        self.core = client.CoreV1Api(client_api)
        self.policy = client.PolicyV1Api(client_api)
        self.api_exception = ApiException
        self.timeout = request_timeout
        self.server = getattr(getattr(client_api, "configuration", None), "host", None) or "the cluster"
        # The pydantic generation of the client sends the first JSON patch type it knows unless
        # told; the classic one picks the strategic merge patch for a dict by itself.
        params = inspect.signature(self.core.patch_node).parameters
        self._patch_kwargs = {"_content_type": _PATCH_TYPE} if "_content_type" in params else {}

    def _call(self, what, method, *args, answer=False, **kwargs):
        """``(status, body)``; a 404 answers ``(404, None)``, other HTTP errors raise, unless ``answer``:
        then every HTTP error answers its ``(status, body)``."""
        kwargs.update({"_preload_content": False, "_request_timeout": self.timeout})
        try:
            response = method(*args, **kwargs)
        except self.api_exception as exc:
            if answer:
                return exc.status, _error_body(exc)
            if exc.status == 404:
                return 404, None
            body = _error_body(exc)
            raise GpuFleetError(
                "gpu_drain: %s: the API server at %s answered %s %s: %s"
                % (what, self.server, exc.status, exc.reason or "", body.get("message") or first_line(exc)),
                status=exc.status,
            ) from exc
        except Exception as exc:  # pylint: disable=broad-except
            raise GpuFleetError("gpu_drain: %s: the cluster at %s does not answer: %s" % (what, self.server, first_line(exc))) from exc
        data = response.data
        return response.status, json.loads(data) if data else {}

    def node(self, name):
        return self._call("read node %s" % name, self.core.read_node, name)[1]

    def patch_node(self, name, patch):
        return self._call("patch node %s" % name, self.core.patch_node, name, patch, **self._patch_kwargs)[1]

    def pods_on(self, name):
        return self._call("list the pods of node %s" % name, self.core.list_pod_for_all_namespaces,
                          field_selector="spec.nodeName=%s" % name)[1].get("items") or []

    def pod(self, namespace, name):
        return self._call("read pod %s/%s" % (namespace, name), self.core.read_namespaced_pod, name, namespace)[1]

    def pdbs(self, namespace):
        return self._call("list the PodDisruptionBudgets of namespace %s" % namespace,
                          self.policy.list_namespaced_pod_disruption_budget, namespace)[1].get("items") or []

    def evict(self, namespace, name, grace_period=None):
        """``(status, body)`` of the eviction: 201 accepted, 429 refused by a budget, 404 gone, other."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        if grace_period is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_period}
        return self._call("evict pod %s/%s" % (namespace, name), self.core.create_namespaced_pod_eviction,
                          name, namespace, body, answer=True)
